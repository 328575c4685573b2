//! Nonblocking sends and receives: `MPI_Isend`, `MPI_Irsend`,
//! `MPI_Issend`, `MPI_Irecv`.

use std::ffi::{c_int, c_void};

use super::{new_request, rank_of, source_of, start, tag_of};
use crate::consts::*;
use crate::state::{Active, More, ReqEntry, error, put, request_handle, vpml_error, with_comm};
use crate::types::Message;

/// Start a send (synchronous when `sync`) or a receive, errors named
/// after `func`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) fn nonblocking(
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
    // The common case in one visit to the state: a predefined datatype
    // (the C buffer itself), a valid communicator, a real peer.
    if peer != MPI_PROC_NULL
        && let Some(mut msg) = Message::predefined(buf, count, dt)
    {
        let (ptr, len) = msg.target();
        let started = with_comm(h, |c, requests| {
            // SAFETY: MPI's contract keeps the C buffer valid until the
            // request completes.
            let active = unsafe {
                if send {
                    c.isend_raw(rank_of(peer), tag, ptr, len, sync)
                        .map(|id| Active::new(id, c, peer, tag, len))
                } else {
                    c.irecv_now_raw(source_of(peer), tag_of(tag), ptr, len)
                        .map(|started| match started {
                            // The message was waiting: complete already.
                            (id, Some(st)) => Active::AtStart {
                                id,
                                peer: st.source() as c_int,
                                tag: st.tag(),
                                len: st.len(),
                            },
                            (id, None) => Active::new(id, c, peer, tag, len),
                        })
                }
            };
            active.map(|a| requests.insert(ReqEntry::new(h, Some(a))))
        });
        match started {
            Some(Ok(slot)) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(req, request_handle(slot)) };
                return MPI_SUCCESS;
            }
            Some(Err(e)) => return vpml_error(h, func, &e),
            // No valid communicator: the general path says so.
            None => {}
        }
    }
    let c = match crate::state::comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match start(func, h, &c, send, sync, buf, count, dt, peer, tag) {
        Ok((active, staging)) => {
            let staging = More {
                staging,
                ..More::default()
            };
            let entry = ReqEntry::with(h, active, staging);
            // SAFETY: a handle pointer (caller contract).
            unsafe { put(req, new_request(entry)) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

export! {
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
}

/// `MPI_Isendrecv` and (`send` = `recv`, counted and typed alike)
/// `MPI_Isendrecv_replace`: one request for a send and a receive, whose
/// status is the receive's. What is sent is copied first, so that the
/// receive may land in the same buffer.
///
/// # Safety
/// The buffers hold what the counts and datatypes say (the C caller's
/// contract).
#[allow(clippy::too_many_arguments)] // MPI's own argument list
unsafe fn isendrecv(
    func: &str,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    dest: c_int,
    stag: c_int,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    source: c_int,
    rtag: c_int,
    h: Comm,
    req: *mut Request,
) -> c_int {
    let c = match crate::state::comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if req.is_null() {
        return error(h, func, MPI_ERR_REQUEST, "null request pointer");
    }
    if dest == MPI_PROC_NULL && source == MPI_PROC_NULL {
        return super::completed_request(h, req);
    }
    let out: Vec<u8> = if dest == MPI_PROC_NULL {
        Vec::new()
    } else {
        // SAFETY: caller contract.
        match unsafe { Message::new(send, scount, stype, true) } {
            Ok(mut m) => m.read_only().to_vec(),
            Err((code, why)) => return error(h, func, code, why),
        }
    };
    let mut into = if source == MPI_PROC_NULL {
        None
    } else {
        // SAFETY: caller contract.
        match unsafe { Message::new(recv, rcount, rtype, false) } {
            Ok(m) => Some(m),
            Err((code, why)) => return error(h, func, code, why),
        }
    };
    let (rptr, rlen) = into
        .as_mut()
        .map_or((std::ptr::NonNull::dangling().as_ptr(), 0), |m| m.target());
    let to = (dest != MPI_PROC_NULL).then(|| rank_of(dest));
    let from = (source != MPI_PROC_NULL).then(|| source_of(source));
    // SAFETY: `out` and `into`'s staging move into the request's last step,
    // which it keeps until it completes; the C buffer is the caller's.
    let started = unsafe {
        c.isendrecv_raw(
            to,
            stag,
            out.as_ptr(),
            out.len(),
            from,
            tag_of(rtag),
            rptr,
            rlen,
        )
    };
    match started {
        Ok(id) => {
            // The receive's staging is unpacked as any receive's, as far
            // as the message reached; the request keeps what is sent.
            let more = More {
                staging: into.filter(|m| matches!(m, Message::Staged(_))),
                after: Some(Box::new(move || {
                    drop(out);
                    Ok(())
                })),
                ..More::default()
            };
            let entry = ReqEntry::with(h, Some(Active::new(id, &c, 0, 0, 0)), more);
            // SAFETY: a request handle pointer (caller contract, checked).
            unsafe { put(req, new_request(entry)) };
            MPI_SUCCESS
        }
        Err(e) => vpml_error(h, func, &e),
    }
}

export! {
    fn MPI_Isendrecv / PMPI_Isendrecv(send: *const c_void, scount: c_int, stype: Datatype, dest: c_int, stag: c_int, recv: *mut c_void, rcount: c_int, rtype: Datatype, source: c_int, rtag: c_int, h: Comm, req: *mut Request) -> c_int {
        // SAFETY: the caller's buffers (caller contract).
        unsafe { isendrecv("MPI_Isendrecv", send, scount, stype, dest, stag, recv, rcount, rtype, source, rtag, h, req) }
    }

    fn MPI_Isendrecv_replace / PMPI_Isendrecv_replace(buf: *mut c_void, count: c_int, dt: Datatype, dest: c_int, stag: c_int, source: c_int, rtag: c_int, h: Comm, req: *mut Request) -> c_int {
        // SAFETY: the caller's buffer (caller contract).
        unsafe { isendrecv("MPI_Isendrecv_replace", buf, count, dt, dest, stag, buf, count, dt, source, rtag, h, req) }
    }
}
