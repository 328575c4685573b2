//! The target side: taking requests from any origin, in the order they
//! come, and applying them to the window's memory.
//!
//! Each window keeps a receive from any source posted for requests (its
//! *inbox*). The engine matches it whenever it progresses; a progress
//! point takes the request with `MPI_Test` once the receive is done — and,
//! while the rank re-executes logged calls, exactly where the log says the
//! logged execution did (`vpml::Comm::logged_next_completes_raw`) — then
//! posts the inbox again. The source the receive matched and the call
//! that took it are both logged outcomes, so a re-execution applies the
//! same requests in the same order between the same calls.

use std::ffi::c_int;

use super::wire::{self, Kind, TAG_DATA, TAG_REPLY, TAG_REQUEST};
use super::{Window, with_win};
use crate::consts::*;
use crate::types::{CombineOp, fold_into};

/// Bytes of a window's inbox: a request longer than this comes as a
/// `Follows` request, and then whole on its own (`TAG_DATA`).
pub(crate) const INBOX_BYTES: usize = 64 * 1024;

/// Post window `h`'s inbox receive (into its buffer, which stays put
/// while the window lives).
pub(super) fn post_inbox(h: Win) -> Result<(), c_int> {
    let Some((comm, ptr)) = with_win(h, |w| (w.comm, w.inbox_buf.as_mut_ptr())) else {
        return Ok(());
    };
    let mut req: Request = MPI_REQUEST_NULL;
    // SAFETY: the buffer holds INBOX_BYTES and is freed only with the
    // window, after the receive was cancelled.
    let rc = unsafe {
        crate::p2p::MPI_Irecv(
            ptr.cast(),
            INBOX_BYTES as c_int,
            MPI_BYTE,
            MPI_ANY_SOURCE,
            TAG_REQUEST,
            comm,
            &mut req,
        )
    };
    with_win(h, |w| w.inbox = req);
    super::check(
        h,
        "MPI one-sided communication",
        rc,
        "posting the receive of requests",
    )
}

/// Should the inbox of window `h` be taken now? Where the log does not
/// say, whether it is done: `first` at a progress point, as of the
/// engine's last progress (waits poll between their progress points, and
/// [`super::progress`] polls if nothing did since its last one, so a
/// request that came is taken without costing each point a progress of
/// its own); after a request was taken, with a progress first, to take
/// the rest of a burst at once.
fn inbox_ready(engine: &vpml::Comm, h: Win, first: bool) -> bool {
    let Some(req) = with_win(h, |w| w.inbox) else {
        return false;
    };
    let Some(id) = super::origin::raw_id(req) else {
        return false;
    };
    match engine.logged_next_completes_raw(id) {
        Some(logged) => logged,
        None if first => engine.is_done_raw(id),
        None => engine.poll_raw(&[Some(id)], true).is_ok_and(|p| p.done),
    }
}

/// Serve the requests waiting for window `h`, `most` at most; whether it
/// served one.
pub(super) fn serve(engine: &vpml::Comm, h: Win, most: usize) -> bool {
    let mut served = 0;
    while served < most && inbox_ready(engine, h, served == 0) {
        let Some(mut req) = with_win(h, |w| w.inbox) else {
            return served > 0;
        };
        let mut done: c_int = 0;
        let mut st = MpiStatus::default();
        // SAFETY: the inbox request and out-pointers to locals.
        let rc = unsafe { crate::p2p::MPI_Test(&mut req, &mut done, &mut st) };
        if rc != MPI_SUCCESS {
            refuse(h, None, "receiving requests failed");
        }
        if done == 0 {
            return served > 0;
        }
        let mut count: c_int = 0;
        // SAFETY: a status of this library.
        unsafe { crate::p2p::MPI_Get_count(&st, MPI_BYTE, &mut count) };
        let n = usize::try_from(count).unwrap_or(0).min(INBOX_BYTES);
        let bytes = with_win(h, |w| w.inbox_buf[..n].to_vec()).unwrap_or_default();
        if let Err(code) = post_inbox(h) {
            refuse(
                h,
                None,
                &format!("its inbox could not be posted again (error {code})"),
            );
        }
        reap(h);
        let from = usize::try_from(st.source).unwrap_or(usize::MAX);
        match wire::follows(&bytes) {
            Some(len) => {
                let whole = receive_whole(h, from, len);
                apply(h, from, &whole);
            }
            None => apply(h, from, &bytes),
        }
        served += 1;
    }
    served > 0
}

/// The request of `len` bytes that rank `from` sends after a `Follows`.
fn receive_whole(h: Win, from: usize, len: u64) -> Vec<u8> {
    let Some(comm) = with_win(h, |w| w.comm) else {
        return Vec::new();
    };
    let Ok(n) = c_int::try_from(len) else {
        refuse(h, from, &format!("a request of {len} bytes announced"));
    };
    let mut whole = vec![0u8; n as usize];
    // SAFETY: `whole` holds `n` bytes; the status is ignored.
    let rc = unsafe {
        crate::p2p::MPI_Recv(
            whole.as_mut_ptr().cast(),
            n,
            MPI_BYTE,
            from as c_int,
            TAG_DATA,
            comm,
            std::ptr::null_mut(),
        )
    };
    if rc != MPI_SUCCESS {
        refuse(h, from, "its data could not be received");
    }
    whole
}

/// Forget the sends that completed. Whether one did depends on timing,
/// so none of this may make a call that takes a call id (a test would),
/// nor serve requests (a progress point a re-execution might not have):
/// the engine is asked directly, and a done send completed by `MPI_Wait`,
/// which takes none, with serving held off.
pub(super) fn reap(h: Win) {
    super::without_serving(|| reap_serving_nothing(h));
}

/// [`reap`], its waits serving nothing.
fn reap_serving_nothing(h: Win) {
    let Some(sends) = with_win(h, |w| std::mem::take(&mut w.sends)) else {
        return;
    };
    let Some(engine) = crate::state::world_comm() else {
        return;
    };
    let mut left = Vec::with_capacity(sends.len());
    for (mut req, bytes) in sends {
        let done = super::origin::raw_id(req)
            .is_none_or(|id| engine.poll_raw(&[Some(id)], true).is_ok_and(|p| p.done));
        if done {
            // SAFETY: a request of this window; the status is ignored.
            unsafe { crate::p2p::MPI_Wait(&mut req, std::ptr::null_mut()) };
        } else {
            left.push((req, bytes));
        }
    }
    with_win(h, |w| w.sends.append(&mut left));
}

/// A request that cannot be right stops the job, naming its origin: its
/// bytes were damaged, or the origin's program broke MPI's rules in a way
/// the origin could not see (an address outside a dynamic window).
fn refuse(h: Win, from: impl Into<Option<usize>>, why: &str) -> ! {
    refuse_as(h, from, MPI_ERR_OTHER, why)
}

/// [`refuse`] with error class `code`.
fn refuse_as(h: Win, from: impl Into<Option<usize>>, code: c_int, why: &str) -> ! {
    let (rank, name) = with_win(h, |w| (w.rank, w.name.clone())).unwrap_or_default();
    let which = if name.is_empty() {
        String::new()
    } else {
        format!(" \"{name}\"")
    };
    let from = match from.into() {
        Some(r) if r != usize::MAX => format!("rank {r}"),
        _ => "an unknown rank".to_string(),
    };
    crate::state::fatal(
        "MPI one-sided communication",
        code,
        &format!("a request from {from} to rank {rank} of window{which}: {why}"),
    )
}

/// Apply one request from rank `from`.
fn apply(h: Win, from: usize, bytes: &[u8]) {
    let req = match wire::decode(bytes) {
        Ok(r) => r,
        Err(why) => refuse(h, from, &format!("malformed ({why})")),
    };
    let reply: Option<Vec<u8>> = match req.kind {
        Kind::Put => {
            write(h, from, &req, req.data);
            None
        }
        Kind::Get => Some(read(h, from, &req)),
        Kind::Accumulate => {
            let old = read(h, from, &req);
            write(h, from, &req, &combine(h, from, &req, &old));
            None
        }
        Kind::GetAccumulate => {
            let old = read(h, from, &req);
            if req.header.arg != MPI_NO_OP {
                write(h, from, &req, &combine(h, from, &req, &old));
            }
            Some(old)
        }
        Kind::CompareAndSwap => {
            let old = read(h, from, &req);
            if old == req.compare {
                write(h, from, &req, req.data);
            }
            Some(old)
        }
        Kind::Lock => {
            let exclusive = req.header.arg == MPI_LOCK_EXCLUSIVE;
            let granted = with_win(h, |w| {
                if w.lock.waiting.is_empty() && w.lock.can_grant(exclusive) {
                    w.lock.take(exclusive);
                    true
                } else {
                    w.lock.waiting.push_back((from, exclusive));
                    false
                }
            });
            granted.unwrap_or(false).then(Vec::new)
        }
        Kind::Unlock => {
            let exclusive = req.header.arg == MPI_LOCK_EXCLUSIVE;
            // Acknowledge, then grant to those waiting, in order.
            send_reply(h, from, Vec::new());
            let granted = with_win(h, |w| {
                w.lock.release(exclusive);
                let mut granted = Vec::new();
                while let Some(&(origin, excl)) = w.lock.waiting.front() {
                    if !w.lock.can_grant(excl) {
                        break;
                    }
                    w.lock.waiting.pop_front();
                    w.lock.take(excl);
                    granted.push(origin);
                }
                granted
            });
            for origin in granted.unwrap_or_default() {
                send_reply(h, origin, Vec::new());
            }
            None
        }
        Kind::Flush => Some(Vec::new()),
        Kind::Follows => refuse(h, from, "a request announced inside another"),
        Kind::Complete => {
            with_win(h, |w| {
                if let Some(n) = w.completed.get_mut(from) {
                    *n += 1;
                }
            });
            None
        }
    };
    if req.kind.is_access() {
        with_win(h, |w| w.served += 1);
    }
    if let Some(bytes) = reply {
        send_reply(h, from, bytes);
    }
}

/// Send `bytes` back to `origin` (kept until the send completes).
fn send_reply(h: Win, origin: usize, bytes: Vec<u8>) {
    let Some(comm) = with_win(h, |w| w.comm) else {
        return;
    };
    let mut req: Request = MPI_REQUEST_NULL;
    // SAFETY: `bytes` stays in the window's list until the send completes.
    let rc = unsafe {
        crate::p2p::MPI_Isend(
            bytes.as_ptr().cast(),
            bytes.len() as c_int,
            MPI_BYTE,
            origin as c_int,
            TAG_REPLY,
            comm,
            &mut req,
        )
    };
    if rc != MPI_SUCCESS {
        refuse(h, origin, "its reply could not be sent");
    }
    with_win(h, |w| w.sends.push((req, bytes)));
}

/// The window bytes of `req`'s runs, in order.
fn read(h: Win, from: usize, req: &wire::Request<'_>) -> Vec<u8> {
    let got = with_win(h, |w| {
        let mut out = Vec::new();
        for &(off, len) in &req.runs {
            let at = runs_at(w, req.header.at, off, len)?;
            // SAFETY: `locate` found all `len` bytes inside the window's
            // memory, which the program keeps valid while the window lives.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(at, len as usize) });
        }
        Some(out)
    });
    got.flatten().unwrap_or_else(|| {
        refuse_as(
            h,
            from,
            MPI_ERR_RMA_RANGE,
            "its target bytes are not all in the window",
        )
    })
}

/// Write `data` over `req`'s runs, in order.
fn write(h: Win, from: usize, req: &wire::Request<'_>, data: &[u8]) {
    let total = req.runs.iter().try_fold(0u64, |t, r| t.checked_add(r.1));
    if total != Some(data.len() as u64) {
        let why = format!("{} bytes of data for runs of other lengths", data.len());
        refuse(h, from, &why);
    }
    let done = with_win(h, |w| {
        let mut pos = 0usize;
        for &(off, len) in &req.runs {
            let at = runs_at(w, req.header.at, off, len)?;
            let end = pos.checked_add(usize::try_from(len).ok()?)?;
            let bytes = data.get(pos..end)?;
            // SAFETY: `locate` found all `len` bytes inside the window's
            // memory, which the program keeps valid while the window
            // lives; `bytes` is exactly `len` bytes long.
            unsafe { std::ptr::copy(bytes.as_ptr(), at, bytes.len()) };
            pos = end;
        }
        Some(())
    });
    if done.flatten().is_none() {
        refuse_as(
            h,
            from,
            MPI_ERR_RMA_RANGE,
            "its target bytes are not all in the window",
        );
    }
}

/// Where run (`off`, `len`) after `at` lies in `w`'s memory.
fn runs_at(w: &Window, at: i64, off: i64, len: u64) -> Option<*mut u8> {
    w.locate(at.checked_add(off)?, len)
}

/// `old` combined with the request's data by its operation.
fn combine(h: Win, from: usize, req: &wire::Request<'_>, old: &[u8]) -> Vec<u8> {
    let (op, base) = (req.header.arg, req.header.base);
    if req.data.len() != old.len() {
        refuse(
            h,
            from,
            &format!("{} bytes for {} bytes of target", req.data.len(), old.len()),
        );
    }
    combined(op, base, old, req.data)
        .unwrap_or_else(|why| refuse(h, from, &format!("its accumulate cannot be applied: {why}")))
}

/// `old` elements of predefined type `base` combined with as many of
/// `data` by `op` (what an accumulate leaves in the target's memory).
fn combined(op: Op, base: Datatype, old: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
    let c = CombineOp::new(op, base).map_err(|(_, why)| why.to_string())?;
    let mut out = old.to_vec();
    fold_into(c, base, &mut out, data).map_err(|(_, w)| w)?;
    Ok(out)
}
