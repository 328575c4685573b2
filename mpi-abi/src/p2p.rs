//! Point-to-point: blocking, buffered, nonblocking and persistent sends
//! and receives, the wait/test family, probes, cancel, status queries.
//!
//! Requests live in the state's table; a handle is its slot. The wait and
//! test calls take the active requests out, run vpml's call of the same
//! name over them (so a logging protocol sees exactly that call), and put
//! back what did not complete.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{
    CBuf, PersistentOp, ReqEntry, STATE, class_of, comm, error, insert, put, request_handle,
    request_slot, vpml_error,
};
use crate::types::{Message, info};

fn source_of(source: c_int) -> vpml::Source {
    if source == MPI_ANY_SOURCE {
        vpml::ANY_SOURCE
    } else {
        usize::try_from(source).unwrap_or(usize::MAX).into()
    }
}

fn tag_of(tag: c_int) -> i32 {
    if tag == MPI_ANY_TAG {
        vpml::ANY_TAG
    } else {
        tag
    }
}

fn rank_of(r: c_int) -> usize {
    usize::try_from(r).unwrap_or(usize::MAX)
}

/// Write `st` to a C status (unless ignored).
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE` or a valid status pointer.
unsafe fn write_status(out: *mut MpiStatus, st: Option<&vpml::Status>, proc_null: bool) {
    if ignored(out) {
        return;
    }
    let err = st.and_then(|s| s.error()).map_or(MPI_SUCCESS, class_of);
    let (source, tag, len, cancelled) = match st {
        Some(s) => (
            s.source() as c_int,
            s.tag(),
            s.len() as u64,
            s.is_cancelled(),
        ),
        None if proc_null => (MPI_PROC_NULL, MPI_ANY_TAG, 0, false),
        None => (MPI_ANY_SOURCE, MPI_ANY_TAG, 0, false),
    };
    // SAFETY: caller contract.
    unsafe {
        *out = MpiStatus {
            count_lo: len as u32 as c_int,
            count_hi_and_cancelled: (((len >> 32) as c_int) << 1) | c_int::from(cancelled),
            source,
            tag,
            error: err,
        };
    }
}

/// How a blocking send completes.
#[derive(Clone, Copy)]
enum Blocking {
    /// `MPI_Send` (and `MPI_Rsend`).
    Standard,
    /// `MPI_Ssend`: once the receive has matched.
    Synchronous,
    /// `MPI_Bsend`: at once; a copy of the message is sent in the
    /// background (the dropped request lets the engine finish it).
    Buffered,
}

#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn blocking_send(
    func: &str,
    how: Blocking,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    h: Comm,
) -> c_int {
    let c = match comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if dest == MPI_PROC_NULL {
        return MPI_SUCCESS;
    }
    // SAFETY: the caller's buffer holds `count` elements of `dt`.
    let mut msg = match unsafe { Message::new(buf, count, dt, true) } {
        Ok(m) => m,
        Err((code, why)) => return error(h, func, code, why),
    };
    let data = msg.bytes();
    let r = match how {
        Blocking::Standard => c.send(rank_of(dest), tag, &*data),
        Blocking::Synchronous => c.ssend(rank_of(dest), tag, &*data),
        Blocking::Buffered => c.isend(rank_of(dest), tag, data.to_vec()).map(drop),
    };
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => vpml_error(h, func, &e),
    }
}

/// The `i`-th status of a C array (or ignore).
fn nth(statuses: *mut MpiStatus, i: usize) -> *mut MpiStatus {
    if ignored(statuses) {
        statuses
    } else {
        statuses.wrapping_add(i)
    }
}

/// What `start` gives back: the request (`None` for an operation on
/// `MPI_PROC_NULL`) and the staging buffer it uses, if any.
type Started = (Option<vpml::Request<CBuf>>, Option<Message>);

/// Start an operation on `count` elements of `dt` at `buf`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn start(
    func: &str,
    h: Comm,
    send: bool,
    sync: bool,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
) -> Result<Started, c_int> {
    let c = comm(func, h)?;
    if peer == MPI_PROC_NULL {
        return Ok((None, None));
    }
    // SAFETY: the caller's buffer holds `count` elements of `dt`.
    let mut msg = unsafe { Message::new(buf, count, dt, send) }
        .map_err(|(code, why)| error(h, func, code, why))?;
    let (ptr, len) = msg.target();
    // SAFETY: MPI's contract keeps the C buffer valid until completion; a
    // staging buffer lives in the request's entry as long.
    let cbuf = unsafe { CBuf::new(ptr, len) };
    let r = match (send, sync) {
        (true, false) => c.isend(rank_of(peer), tag, cbuf),
        (true, true) => c.issend(rank_of(peer), tag, cbuf),
        (false, _) => c.irecv(source_of(peer), tag_of(tag), cbuf),
    };
    let staging = matches!(msg, Message::Staged { .. }).then_some(msg);
    r.map(|r| (Some(r), staging))
        .map_err(|e| vpml_error(h, func, &e))
}

fn new_request(entry: ReqEntry) -> Request {
    request_handle(STATE.with(|s| insert(&mut s.borrow_mut().requests, 0, entry)))
}

#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn nonblocking(
    func: &str,
    send: bool,
    sync: bool,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    h: Comm,
    req: *mut Request,
) -> c_int {
    match start(func, h, send, sync, buf, count, dt, peer, tag) {
        Ok((active, staging)) => {
            let entry = ReqEntry {
                comm: h,
                proc_null: active.is_none(),
                active,
                persistent: None,
                staging,
            };
            // SAFETY: a handle pointer (caller contract).
            unsafe { put(req, new_request(entry)) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn persistent(
    func: &str,
    send: bool,
    sync: bool,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    h: Comm,
    req: *mut Request,
) -> c_int {
    if let Err((code, why)) = crate::types::span(count, dt) {
        return error(h, func, code, why);
    }
    let c = match comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if peer != MPI_PROC_NULL {
        let source = (peer != MPI_ANY_SOURCE).then_some(peer as usize);
        if let Err(e) = c.persistent_made(send, source, tag) {
            return vpml_error(h, func, &e);
        }
    }
    let op = PersistentOp {
        send,
        sync,
        buf,
        count,
        dt,
        peer,
        tag,
    };
    let entry = ReqEntry {
        comm: h,
        active: None,
        proc_null: false,
        persistent: Some(op),
        staging: None,
    };
    // SAFETY: a handle pointer (caller contract).
    unsafe { put(req, new_request(entry)) };
    MPI_SUCCESS
}

/// How a request handle stands.
enum Standing {
    /// `MPI_REQUEST_NULL` or an inactive persistent request.
    Inactive,
    /// An operation on `MPI_PROC_NULL`: complete.
    ProcNull,
    /// In flight.
    Active,
}

fn standing(h: Request) -> Result<Standing, ()> {
    if h == MPI_REQUEST_NULL {
        return Ok(Standing::Inactive);
    }
    STATE.with(|s| {
        let s = s.borrow();
        let e = request_slot(h)
            .and_then(|i| s.requests.get(i)?.as_ref())
            .ok_or(())?;
        Ok(if e.proc_null {
            Standing::ProcNull
        } else if e.active.is_some() {
            Standing::Active
        } else {
            Standing::Inactive
        })
    })
}

/// Take the active requests of `handles` out of the table.
fn take(handles: &[Request]) -> Vec<Option<vpml::Request<CBuf>>> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        handles
            .iter()
            .map(|&h| {
                request_slot(h)
                    .and_then(|i| s.requests.get_mut(i)?.as_mut())
                    .and_then(|e| e.active.take())
            })
            .collect()
    })
}

/// Put back the requests of `slots` that did not complete.
fn put_back(handles: &[Request], slots: Vec<Option<vpml::Request<CBuf>>>) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        for (&h, slot) in handles.iter().zip(slots) {
            if let Some(r) = slot
                && let Some(e) = request_slot(h).and_then(|i| s.requests.get_mut(i)?.as_mut())
            {
                e.active = Some(r);
            }
        }
    });
}

/// The request `*h` completed: a persistent one becomes inactive, any
/// other is freed and its handle set to `MPI_REQUEST_NULL`.
///
/// # Safety
/// `h` points to a request handle.
unsafe fn retire(h: *mut Request) {
    // SAFETY: caller contract.
    let handle = unsafe { *h };
    let free = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let Some(i) = request_slot(handle) else {
            return false;
        };
        match s.requests.get_mut(i) {
            Some(Some(e)) if e.persistent.is_some() => {
                e.proc_null = false;
                e.active = None;
                e.staging = None;
                false
            }
            Some(slot) => {
                *slot = None;
                true
            }
            None => false,
        }
    });
    if free {
        // SAFETY: caller contract.
        unsafe { *h = MPI_REQUEST_NULL };
    }
}

/// The communicator whose error handler applies to request `h`.
fn comm_of(h: Request) -> Comm {
    STATE.with(|s| {
        let s = s.borrow();
        request_slot(h)
            .and_then(|i| s.requests.get(i)?.as_ref())
            .map_or(MPI_COMM_WORLD, |e| e.comm)
    })
}

/// The C array `reqs[0..count]`.
///
/// # Safety
/// `reqs` holds `count` handles.
unsafe fn handles<'a>(reqs: *mut Request, count: c_int) -> &'a mut [Request] {
    match usize::try_from(count) {
        // SAFETY: caller contract.
        Ok(n) if n > 0 && !reqs.is_null() => unsafe { std::slice::from_raw_parts_mut(reqs, n) },
        _ => &mut [],
    }
}

/// Classify every handle, or name the first invalid one.
fn standings(func: &str, hs: &[Request]) -> Result<Vec<Standing>, c_int> {
    hs.iter()
        .map(|&h| {
            standing(h)
                .map_err(|()| error(MPI_COMM_WORLD, func, MPI_ERR_REQUEST, "invalid request"))
        })
        .collect()
}

/// Completed request indices with their statuses (`None`: an operation
/// on `MPI_PROC_NULL`); `None` overall when nothing was active.
type Completions = Option<Vec<(usize, Option<vpml::Status>)>>;

/// Which completion call to run over the active requests.
#[derive(Clone, Copy, PartialEq)]
enum Call {
    WaitAll,
    WaitAny,
    WaitSome,
    Test,
    TestAll,
    TestAny,
    TestSome,
}

/// One completion call over `hs`. Returns the completed indices with
/// their statuses (`None`: an operation on `MPI_PROC_NULL`), or `None`
/// when nothing was active (the `MPI_UNDEFINED` answers), or the error
/// code.
fn complete(func: &str, hs: &mut [Request], call: Call) -> Result<(Completions, Comm), c_int> {
    let st = standings(func, hs)?;
    // Whose error handler applies (taken before the handles are retired).
    let comm = hs
        .iter()
        .find(|&&h| h != MPI_REQUEST_NULL)
        .map_or(MPI_COMM_WORLD, |&h| comm_of(h));
    let proc_null: Vec<usize> = (0..hs.len())
        .filter(|&i| matches!(st[i], Standing::ProcNull))
        .collect();
    let active = st.iter().any(|s| matches!(s, Standing::Active));
    if !active && proc_null.is_empty() {
        return Ok((None, comm));
    }
    let mut done: Vec<(usize, Option<vpml::Status>)> = Vec::new();
    // Operations on MPI_PROC_NULL are complete: the "any" calls take the
    // first, the "some" calls take them all and only test the others.
    let call = match call {
        Call::WaitAny | Call::TestAny if !proc_null.is_empty() => {
            done.push((proc_null[0], None));
            None
        }
        Call::WaitSome if !proc_null.is_empty() => Some(Call::TestSome),
        other => Some(other),
    };
    if let Some(call) = call
        && active
    {
        let mut slots = take(hs);
        let outcome: vpml::Result<Vec<(usize, vpml::Status)>> = (|| {
            Ok(match call {
                Call::WaitAll => {
                    let idx: Vec<usize> =
                        (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
                    let outs = vpml::wait_all(&mut slots)?;
                    idx.into_iter()
                        .zip(outs.into_iter().map(|c| c.status))
                        .collect()
                }
                Call::TestAll => {
                    let idx: Vec<usize> =
                        (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
                    match vpml::test_all(&mut slots)? {
                        Some(outs) => idx
                            .into_iter()
                            .zip(outs.into_iter().map(|c| c.status))
                            .collect(),
                        None => Vec::new(),
                    }
                }
                Call::WaitAny => vpml::wait_any(&mut slots)?
                    .map(|(i, c)| (i, c.status))
                    .into_iter()
                    .collect(),
                Call::TestAny => vpml::test_any(&mut slots)?
                    .map(|(i, c)| (i, c.status))
                    .into_iter()
                    .collect(),
                Call::Test => vpml::test(&mut slots[0])?
                    .map(|c| (0, c.status))
                    .into_iter()
                    .collect(),
                Call::WaitSome => vpml::wait_some(&mut slots)?
                    .into_iter()
                    .map(|(i, c)| (i, c.status))
                    .collect(),
                Call::TestSome => vpml::test_some(&mut slots)?
                    .into_iter()
                    .map(|(i, c)| (i, c.status))
                    .collect(),
            })
        })();
        put_back(hs, slots);
        match outcome {
            Ok(v) => {
                let all = matches!(call, Call::WaitAll | Call::TestAll);
                if all && v.is_empty() {
                    // Test_all: not all done; complete nothing.
                    return Ok((Some(Vec::new()), comm));
                }
                done.extend(v.into_iter().map(|(i, s)| (i, Some(s))));
            }
            Err(e) => return Err(vpml_error(comm, func, &e)),
        }
    }
    // The all-calls (once everything is done), the some-calls and Test
    // also complete every operation on MPI_PROC_NULL.
    if matches!(
        call,
        Some(Call::WaitAll | Call::TestAll | Call::TestSome | Call::Test)
    ) {
        done.extend(proc_null.iter().map(|&i| (i, None)));
    }
    done.sort_by_key(|(i, _)| *i);
    // Received data of a non-contiguous datatype goes to the C buffer.
    STATE.with(|s| {
        let s = s.borrow();
        for (i, st) in &done {
            if let Some(st) = st
                && let Some(e) = request_slot(hs[*i]).and_then(|k| s.requests.get(k)?.as_ref())
                && let Some(m) = &e.staging
            {
                m.finish(Some(st.len()));
            }
        }
    });
    for (i, _) in &done {
        // SAFETY: `hs[i]` is a handle of the caller's array.
        unsafe { retire(&mut hs[*i]) };
    }
    Ok((Some(done), comm))
}

/// The first error among completed requests, as (class, message).
fn first_error(done: &[(usize, Option<vpml::Status>)]) -> Option<(c_int, String)> {
    done.iter()
        .find_map(|(_, s)| s.as_ref()?.error())
        .map(|e| (class_of(e), e.to_string()))
}

/// Report a completed request's error once the statuses are written: its
/// own class from a call that completes one request, `MPI_ERR_IN_STATUS`
/// (each status's `MPI_ERROR` says which) from one that completes several.
fn raise(func: &str, comm: Comm, err: Option<(c_int, String)>, several: bool) -> c_int {
    match err {
        None => MPI_SUCCESS,
        Some((class, why)) => error(
            comm,
            func,
            if several { MPI_ERR_IN_STATUS } else { class },
            &why,
        ),
    }
}

export! {
    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm) -> c_int {
        blocking_send("MPI_Send", Blocking::Standard, buf, count, dt, dest, tag, h)
    }

    fn MPI_Rsend / PMPI_Rsend(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm) -> c_int {
        // SAFETY: same contract as MPI_Send.
        unsafe { MPI_Send(buf, count, dt, dest, tag, h) }
    }

    fn MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm) -> c_int {
        blocking_send("MPI_Ssend", Blocking::Synchronous, buf, count, dt, dest, tag, h)
    }

    fn MPI_Bsend / PMPI_Bsend(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm) -> c_int {
        blocking_send("MPI_Bsend", Blocking::Buffered, buf, count, dt, dest, tag, h)
    }

    fn MPI_Buffer_attach / PMPI_Buffer_attach(buf: *mut c_void, size: c_int) -> c_int {
        STATE.with(|s| s.borrow_mut().attached = Some((buf, size)));
        MPI_SUCCESS
    }

    fn MPI_Buffer_detach / PMPI_Buffer_detach(buf: *mut c_void, size: *mut c_int) -> c_int {
        let (p, n) = STATE.with(|s| s.borrow_mut().attached.take()).unwrap_or((std::ptr::null_mut(), 0));
        // SAFETY: `buf` is a `void **`, `size` an int pointer (the standard's contract).
        unsafe {
            put(buf as *mut *mut c_void, p);
            put(size, n);
        }
        MPI_SUCCESS
    }

    fn MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, dt: Datatype, source: c_int, tag: c_int, h: Comm, status: *mut MpiStatus) -> c_int {
        let c = match comm("MPI_Recv", h) { Ok(c) => c, Err(code) => return code };
        if source == MPI_PROC_NULL {
            // SAFETY: a status pointer or MPI_STATUS_IGNORE.
            unsafe { write_status(status, None, true) };
            return MPI_SUCCESS;
        }
        // SAFETY: the caller's buffer holds `count` elements of `dt`.
        let mut msg = match unsafe { Message::new(buf, count, dt, false) } { Ok(m) => m, Err((code, why)) => return error(h, "MPI_Recv", code, why) };
        match c.recv(source_of(source), tag_of(tag), msg.bytes()) {
            Ok(st) => {
                msg.finish(Some(st.len()));
                // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                unsafe { write_status(status, Some(&st), false) };
                MPI_SUCCESS
            }
            Err(e) => vpml_error(h, "MPI_Recv", &e),
        }
    }

    fn MPI_Sendrecv / PMPI_Sendrecv(sbuf: *const c_void, scount: c_int, stype: Datatype, dest: c_int, stag: c_int, rbuf: *mut c_void, rcount: c_int, rtype: Datatype, source: c_int, rtag: c_int, h: Comm, status: *mut MpiStatus) -> c_int {
        let mut req = MPI_REQUEST_NULL;
        // SAFETY: MPI's contract for both buffers; `req` is local.
        let r = unsafe { MPI_Irecv(rbuf, rcount, rtype, source, rtag, h, &mut req) };
        if r != MPI_SUCCESS {
            return r;
        }
        // SAFETY: as above.
        let r = unsafe { MPI_Send(sbuf, scount, stype, dest, stag, h) };
        if r != MPI_SUCCESS {
            // SAFETY: our own request.
            unsafe { MPI_Request_free(&mut req) };
            return r;
        }
        // SAFETY: our own request; the caller's status pointer.
        unsafe { MPI_Wait(&mut req, status) }
    }

    fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(buf: *mut c_void, count: c_int, dt: Datatype, dest: c_int, stag: c_int, source: c_int, rtag: c_int, h: Comm, status: *mut MpiStatus) -> c_int {
        // The outgoing message, packed (a private copy).
        // SAFETY: the caller's buffer holds `count` elements of `dt`.
        let mut msg = match unsafe { Message::new(buf, count, dt, true) } { Ok(m) => m, Err((code, why)) => return error(h, "MPI_Sendrecv_replace", code, why) };
        let copy = msg.bytes().to_vec();
        let len = copy.len();
        // SAFETY: `copy` holds `len` bytes, sent as MPI_BYTE.
        unsafe { MPI_Sendrecv(copy.as_ptr() as *const c_void, len as c_int, MPI_BYTE, dest, stag, buf, count, dt, source, rtag, h, status) }
    }

    fn MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        nonblocking("MPI_Isend", true, false, buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Irsend / PMPI_Irsend(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        nonblocking("MPI_Irsend", true, false, buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Issend / PMPI_Issend(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        nonblocking("MPI_Issend", true, true, buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, dt: Datatype, source: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        nonblocking("MPI_Irecv", false, false, buf, count, dt, source, tag, h, req)
    }

    fn MPI_Send_init / PMPI_Send_init(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        persistent("MPI_Send_init", true, false, buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        persistent("MPI_Ssend_init", true, true, buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, dt: Datatype, source: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        persistent("MPI_Recv_init", false, false, buf, count, dt, source, tag, h, req)
    }

    fn MPI_Start / PMPI_Start(req: *mut Request) -> c_int {
        // SAFETY: a request handle pointer (caller contract).
        let h = unsafe { req.as_ref().copied() }.unwrap_or(MPI_REQUEST_NULL);
        let found = STATE.with(|s| {
            let s = s.borrow();
            request_slot(h)
                .and_then(|i| s.requests.get(i)?.as_ref())
                .and_then(|e| Some((e.comm, e.persistent?, e.active.is_some() || e.proc_null)))
        });
        let Some((c, op, busy)) = found else {
            return error(MPI_COMM_WORLD, "MPI_Start", MPI_ERR_REQUEST, "not a persistent request");
        };
        if busy {
            return error(c, "MPI_Start", MPI_ERR_REQUEST, "the request is already active");
        }
        match start("MPI_Start", c, op.send, op.sync, op.buf, op.count, op.dt, op.peer, op.tag) {
            Ok((active, staging)) => {
                STATE.with(|s| {
                    let mut s = s.borrow_mut();
                    if let Some(e) = request_slot(h).and_then(|i| s.requests.get_mut(i)?.as_mut()) {
                        e.proc_null = active.is_none();
                        e.active = active;
                        e.staging = staging;
                    }
                });
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Startall / PMPI_Startall(count: c_int, reqs: *mut Request) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        for h in unsafe { handles(reqs, count) } {
            // SAFETY: one of the caller's handles.
            let r = unsafe { MPI_Start(h) };
            if r != MPI_SUCCESS {
                return r;
            }
        }
        MPI_SUCCESS
    }

    fn MPI_Wait / PMPI_Wait(req: *mut Request, status: *mut MpiStatus) -> c_int {
        // SAFETY: one handle (caller contract).
        let hs = unsafe { handles(req, 1) };
        match complete("MPI_Wait", hs, Call::WaitAll) {
            Ok((done, c)) => {
                let done = done.unwrap_or_default();
                let err = first_error(&done);
                let st = done.into_iter().next();
                let proc_null = st.as_ref().is_some_and(|(_, s)| s.is_none());
                // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                unsafe { write_status(status, st.and_then(|(_, s)| s).as_ref(), proc_null) };
                raise("MPI_Wait", c, err, false)
            }
            Err(code) => code,
        }
    }

    fn MPI_Waitall / PMPI_Waitall(count: c_int, reqs: *mut Request, statuses: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        let n = hs.len();
        match complete("MPI_Waitall", hs, Call::WaitAll) {
            Ok((done, c)) => {
                let done = done.unwrap_or_default();
                let err = first_error(&done);
                let mut out: Vec<(Option<vpml::Status>, bool)> = (0..n).map(|_| (None, false)).collect();
                for (i, s) in done {
                    let pn = s.is_none();
                    out[i] = (s, pn);
                }
                for (i, (s, pn)) in out.iter().enumerate() {
                    // SAFETY: `statuses` holds `count` statuses or is ignored.
                    unsafe { write_status(nth(statuses, i), s.as_ref(), *pn) };
                }
                raise("MPI_Waitall", c, err, true)
            }
            Err(code) => code,
        }
    }

    fn MPI_Waitany / PMPI_Waitany(count: c_int, reqs: *mut Request, index: *mut c_int, status: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        any_result("MPI_Waitany", complete("MPI_Waitany", hs, Call::WaitAny), index, None, status)
    }

    fn MPI_Waitsome / PMPI_Waitsome(count: c_int, reqs: *mut Request, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        some_result("MPI_Waitsome", complete("MPI_Waitsome", hs, Call::WaitSome), outcount, indices, statuses)
    }

    fn MPI_Test / PMPI_Test(req: *mut Request, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        // SAFETY: one handle (caller contract).
        let hs = unsafe { handles(req, 1) };
        match complete("MPI_Test", hs, Call::Test) {
            Ok((None, _)) => {
                // SAFETY: caller's pointers.
                unsafe {
                    put(flag, 1);
                    write_status(status, None, false);
                }
                MPI_SUCCESS
            }
            Ok((Some(done), c)) => {
                let err = first_error(&done);
                let st = done.into_iter().next();
                // SAFETY: caller's pointers.
                unsafe {
                    put(flag, c_int::from(st.is_some()));
                    if let Some((_, s)) = st {
                        write_status(status, s.as_ref(), s.is_none());
                    }
                }
                raise("MPI_Test", c, err, false)
            }
            Err(code) => code,
        }
    }

    fn MPI_Testany / PMPI_Testany(count: c_int, reqs: *mut Request, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        any_result("MPI_Testany", complete("MPI_Testany", hs, Call::TestAny), index, Some(flag), status)
    }

    fn MPI_Testall / PMPI_Testall(count: c_int, reqs: *mut Request, flag: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        let n = hs.len();
        let pending = hs.iter().any(|&h| h != MPI_REQUEST_NULL && matches!(standing(h), Ok(Standing::Active)));
        match complete("MPI_Testall", hs, Call::TestAll) {
            Ok((done, c)) => {
                let done = done.unwrap_or_default();
                let err = first_error(&done);
                let all = !pending || !done.is_empty();
                // SAFETY: an int pointer (caller contract).
                unsafe { put(flag, c_int::from(all)) };
                if all {
                    let mut out: Vec<(Option<vpml::Status>, bool)> = (0..n).map(|_| (None, false)).collect();
                    for (i, s) in done {
                        let pn = s.is_none();
                        out[i] = (s, pn);
                    }
                    for (i, (s, pn)) in out.iter().enumerate() {
                        // SAFETY: `statuses` holds `count` statuses or is ignored.
                        unsafe { write_status(nth(statuses, i), s.as_ref(), *pn) };
                    }
                }
                raise("MPI_Testall", c, err, true)
            }
            Err(code) => code,
        }
    }

    fn MPI_Testsome / PMPI_Testsome(count: c_int, reqs: *mut Request, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        some_result("MPI_Testsome", complete("MPI_Testsome", hs, Call::TestSome), outcount, indices, statuses)
    }

    fn MPI_Request_free / PMPI_Request_free(req: *mut Request) -> c_int {
        // SAFETY: a request handle pointer (caller contract).
        let h = unsafe { req.as_ref().copied() }.unwrap_or(MPI_REQUEST_NULL);
        // Dropping an active request lets it finish in the background;
        // its staging buffer must outlive it.
        let freed = STATE.with(|s| {
            let mut s = s.borrow_mut();
            let entry = request_slot(h).and_then(|i| s.requests.get_mut(i)?.take());
            match entry {
                Some(e) => {
                    if e.active.is_some() {
                        s.orphans.extend(e.staging);
                    }
                    true
                }
                None => false,
            }
        });
        if !freed {
            return error(MPI_COMM_WORLD, "MPI_Request_free", MPI_ERR_REQUEST, "invalid request");
        }
        // SAFETY: as above.
        unsafe { put(req, MPI_REQUEST_NULL) };
        MPI_SUCCESS
    }

    fn MPI_Cancel / PMPI_Cancel(req: *mut Request) -> c_int {
        // SAFETY: a request handle pointer (caller contract).
        let h = unsafe { req.as_ref().copied() }.unwrap_or(MPI_REQUEST_NULL);
        let r = STATE.with(|s| {
            let s = s.borrow();
            request_slot(h)
                .and_then(|i| s.requests.get(i)?.as_ref())
                .map(|e| e.active.as_ref().map(|r| r.cancel()))
        });
        match r {
            None => error(MPI_COMM_WORLD, "MPI_Cancel", MPI_ERR_REQUEST, "invalid request"),
            Some(None) | Some(Some(Ok(_))) => MPI_SUCCESS,
            Some(Some(Err(e))) => vpml_error(comm_of(h), "MPI_Cancel", &e),
        }
    }

    fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) -> c_int {
        // SAFETY: a status pointer (caller contract).
        let c = unsafe { status.as_ref() }.is_some_and(|s| s.count_hi_and_cancelled & 1 == 1);
        // SAFETY: an int pointer (caller contract).
        unsafe { put(flag, c_int::from(c)) };
        MPI_SUCCESS
    }

    fn MPI_Get_count / PMPI_Get_count(status: *const MpiStatus, dt: Datatype, count: *mut c_int) -> c_int {
        get_count("MPI_Get_count", status, dt, count, false)
    }

    fn MPI_Get_elements / PMPI_Get_elements(status: *const MpiStatus, dt: Datatype, count: *mut c_int) -> c_int {
        get_count("MPI_Get_elements", status, dt, count, true)
    }

    fn MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, h: Comm, status: *mut MpiStatus) -> c_int {
        let c = match comm("MPI_Probe", h) { Ok(c) => c, Err(code) => return code };
        if source == MPI_PROC_NULL {
            // SAFETY: a status pointer or MPI_STATUS_IGNORE.
            unsafe { write_status(status, None, true) };
            return MPI_SUCCESS;
        }
        match c.probe(source_of(source), tag_of(tag)) {
            Ok(st) => {
                // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                unsafe { write_status(status, Some(&st), false) };
                MPI_SUCCESS
            }
            Err(e) => vpml_error(h, "MPI_Probe", &e),
        }
    }

    fn MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, h: Comm, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        let c = match comm("MPI_Iprobe", h) { Ok(c) => c, Err(code) => return code };
        if source == MPI_PROC_NULL {
            // SAFETY: caller's pointers.
            unsafe {
                put(flag, 1);
                write_status(status, None, true);
            }
            return MPI_SUCCESS;
        }
        match c.iprobe(source_of(source), tag_of(tag)) {
            Ok(found) => {
                // SAFETY: caller's pointers.
                unsafe {
                    put(flag, c_int::from(found.is_some()));
                    if let Some(st) = found {
                        write_status(status, Some(&st), false);
                    }
                }
                MPI_SUCCESS
            }
            Err(e) => vpml_error(h, "MPI_Iprobe", &e),
        }
    }
}

/// Outputs of `Waitany`/`Testany`.
fn any_result(
    func: &str,
    r: Result<(Completions, Comm), c_int>,
    index: *mut c_int,
    flag: Option<*mut c_int>,
    status: *mut MpiStatus,
) -> c_int {
    match r {
        Ok((None, _)) => {
            // Nothing active: flag true, index MPI_UNDEFINED, empty status.
            // SAFETY: caller's pointers.
            unsafe {
                put(index, MPI_UNDEFINED);
                if let Some(f) = flag {
                    put(f, 1);
                }
                write_status(status, None, false);
            }
            MPI_SUCCESS
        }
        Ok((Some(done), c)) => {
            let err = first_error(&done);
            let first = done.into_iter().next();
            // SAFETY: caller's pointers.
            unsafe {
                if let Some(f) = flag {
                    put(f, c_int::from(first.is_some()));
                }
                match first {
                    Some((i, s)) => {
                        put(index, i as c_int);
                        write_status(status, s.as_ref(), s.is_none());
                    }
                    None => put(index, MPI_UNDEFINED),
                }
            }
            raise(func, c, err, false)
        }
        Err(code) => code,
    }
}

/// Outputs of `Waitsome`/`Testsome`.
fn some_result(
    func: &str,
    r: Result<(Completions, Comm), c_int>,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    match r {
        Ok((None, _)) => {
            // SAFETY: an int pointer (caller contract).
            unsafe { put(outcount, MPI_UNDEFINED) };
            MPI_SUCCESS
        }
        Ok((Some(done), c)) => {
            let err = first_error(&done);
            // SAFETY: `indices`/`statuses` hold room for every request.
            unsafe {
                put(outcount, done.len() as c_int);
                for (k, (i, s)) in done.iter().enumerate() {
                    put(indices.wrapping_add(k), *i as c_int);
                    write_status(nth(statuses, k), s.as_ref(), s.is_none());
                }
            }
            raise(func, c, err, true)
        }
        Err(code) => code,
    }
}

fn get_count(
    func: &str,
    status: *const MpiStatus,
    dt: Datatype,
    count: *mut c_int,
    elements: bool,
) -> c_int {
    let Some(t) = info(dt).filter(|t| t.size > 0) else {
        return error(MPI_COMM_WORLD, func, MPI_ERR_TYPE, "invalid datatype");
    };
    // SAFETY: a status pointer (caller contract).
    let Some(st) = (unsafe { status.as_ref() }) else {
        return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null status");
    };
    let bytes = (st.count_lo as u32 as u64) | (((st.count_hi_and_cancelled >> 1) as u64) << 32);
    let unit = if elements {
        (t.size / t.per) as u64
    } else {
        t.size as u64
    };
    let n = if bytes.is_multiple_of(unit) {
        (bytes / unit) as c_int
    } else {
        MPI_UNDEFINED
    };
    // SAFETY: an int pointer (caller contract).
    unsafe { put(count, n) };
    MPI_SUCCESS
}
