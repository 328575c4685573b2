//! Blocking point-to-point: standard, ready, synchronous and buffered
//! sends, `MPI_Recv`, `MPI_Sendrecv(_replace)`, and the attached buffer.

use std::ffi::{c_int, c_void};

use super::nonblocking::nonblocking;
use super::wait_test::wait_one;
use super::{
    MPI_Irecv, MPI_Request_free, MPI_Wait, put_single_status, rank_of, source_of, start_and_wait,
    tag_of, truncated_status, write_status,
};
use crate::consts::*;
use crate::state::{
    Active, ReqEntry, STATE, comm, error, put, request_handle, vpml_error, with_comm,
};
use crate::types::Message;

/// How a blocking send completes.
#[derive(Clone, Copy)]
pub(super) enum Blocking {
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
    if crate::threads::waits_in_library() && !matches!(how, Blocking::Buffered) {
        // (Not while a window is alive: the wait is one of its progress
        // points, and a rank that only sends must still serve requests.)
        if matches!(how, Blocking::Standard)
            && crate::threads::multiple()
            && !crate::rma::live()
            && let Some(done) = send_now_or_wait(func, buf, count, dt, dest, tag, h)
        {
            return done;
        }
        let sync = matches!(how, Blocking::Synchronous);
        let start = |req| nonblocking(func, true, sync, buf, count, dt, dest, tag, h, req);
        // SAFETY: no status is written.
        return unsafe { start_and_wait(func, start, std::ptr::null_mut()) };
    }
    // The common case: a predefined datatype (the C buffer itself) to a
    // real peer. (The communicator is cloned and the state let go before
    // the call blocks.)
    if dest != MPI_PROC_NULL
        && !matches!(how, Blocking::Buffered)
        && let Some(mut msg) = Message::predefined(buf, count, dt)
        && let Some(c) = with_comm(h, |c, _| c.clone())
    {
        let data = &*msg.bytes();
        let sent = match how {
            Blocking::Synchronous => c.ssend(rank_of(dest), tag, data),
            _ => c.send(rank_of(dest), tag, data),
        };
        return match sent {
            Ok(()) => MPI_SUCCESS,
            Err(e) => vpml_error(h, func, &e),
        };
    }
    let c = match comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    send_on(func, how, &c, h, buf, count, dt, dest, tag)
}

/// A standard blocking send of a predefined datatype to a real peer under
/// `MPI_THREAD_MULTIPLE`: written into the ring at once (complete, no
/// request made), or started and waited for. `None` for anything else
/// (the general path).
fn send_now_or_wait(
    func: &str,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
    h: Comm,
) -> Option<c_int> {
    if dest == MPI_PROC_NULL {
        return None;
    }
    let mut msg = Message::predefined(buf, count, dt)?;
    let (ptr, len) = msg.target();
    let started = with_comm(h, |c, requests| {
        // SAFETY: the C buffer stays valid until the send completes: at
        // once, or in the wait below.
        let id = unsafe { c.isend_raw(rank_of(dest), tag, ptr as *const u8, len, false) }?;
        Ok(if id.is_complete_send() {
            None
        } else {
            let active = Active::new(id, c, dest, tag, len);
            Some(requests.insert(ReqEntry::new(h, Some(active))))
        })
    })?;
    Some(match started {
        Ok(None) => MPI_SUCCESS,
        Ok(Some(slot)) => {
            let mut req = request_handle(slot);
            // SAFETY: one handle; no status is written.
            unsafe { wait_one(func, std::slice::from_mut(&mut req), std::ptr::null_mut()) }
        }
        Err(e) => vpml_error(h, func, &e),
    })
}

/// A blocking send of the C buffer on `c` (whose handle, for errors, is
/// `h`; a persistent request's clone may outlive the handle).
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) fn send_on(
    func: &str,
    how: Blocking,
    c: &vpml::Comm,
    h: Comm,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    dest: c_int,
    tag: c_int,
) -> c_int {
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

    fn MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        // A buffered send is complete when it returns (the data is
        // copied): a completed request.
        let r = blocking_send("MPI_Ibsend", Blocking::Buffered, buf, count, dt, dest, tag, h);
        if r != MPI_SUCCESS {
            return r;
        }
        super::completed_request(h, req)
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
        if crate::threads::waits_in_library() {
            // The message may be waiting already, or come while a wait
            // would spin: taken straight off the ring, as without threads.
            if source != MPI_PROC_NULL
                && let Some(mut msg) = Message::predefined(buf, count, dt)
                && let Some(c) = with_comm(h, |c, _| c.clone())
            {
                let (ptr, len) = msg.target();
                // SAFETY: the C buffer holds `len` writable bytes.
                let look = || unsafe { c.recv_now_raw(source_of(source), tag_of(tag), ptr, len) };
                match crate::threads::spin_for_message(&c, look) {
                    Ok(Some(st)) => {
                        // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                        unsafe { write_status(status, Some(&st), false) };
                        return MPI_SUCCESS;
                    }
                    Ok(None) => {}
                    Err(e) => return vpml_error(h, "MPI_Recv", &e),
                }
            }
            let start = |req| nonblocking("MPI_Recv", false, false, buf, count, dt, source, tag, h, req);
            // SAFETY: the caller's status pointer.
            return unsafe { start_and_wait("MPI_Recv", start, status) };
        }
        // The common case, as in MPI_Send.
        if source != MPI_PROC_NULL
            && let Some(mut msg) = Message::predefined(buf, count, dt)
            && let Some(c) = with_comm(h, |c, _| c.clone())
        {
            return match c.recv(source_of(source), tag_of(tag), msg.bytes()) {
                Ok(st) => {
                    // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                    unsafe { write_status(status, Some(&st), false) };
                    MPI_SUCCESS
                }
                Err(e) => vpml_error(h, "MPI_Recv", &e),
            };
        }
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
        // The common case, as in MPI_Recv: predefined datatypes, real
        // peers, separate buffers (MPI requires them disjoint; the general
        // path below takes whatever else is passed).
        if !crate::threads::waits_in_library()
            && dest != MPI_PROC_NULL
            && source != MPI_PROC_NULL
            && let Some(mut out) = Message::predefined(sbuf, scount, stype)
            && let Some(mut inp) = Message::predefined(rbuf, rcount, rtype)
            && disjoint(out.target(), inp.target())
            && let Some(c) = with_comm(h, |c, _| c.clone())
        {
            return match c.sendrecv(out.read_only(), rank_of(dest), stag, inp.bytes(), source_of(source), tag_of(rtag)) {
                Ok(st) => {
                    // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                    unsafe { write_status(status, Some(&st), false) };
                    MPI_SUCCESS
                }
                Err(e) => {
                    // As the general path's wait: the status says what
                    // arrived even when it did not fit.
                    if let Some(st) = truncated_status(&e) {
                        // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                        unsafe { put_single_status(status, &st) };
                    }
                    vpml_error(h, "MPI_Sendrecv", &e)
                }
            };
        }
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
}

/// Do two byte ranges (start, length) share no byte?
fn disjoint(a: (*mut u8, usize), b: (*mut u8, usize)) -> bool {
    let (a, alen) = (a.0 as usize, a.1);
    let (b, blen) = (b.0 as usize, b.1);
    alen == 0 || blen == 0 || a.saturating_add(alen) <= b || b.saturating_add(blen) <= a
}
