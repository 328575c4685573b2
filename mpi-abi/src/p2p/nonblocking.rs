//! Nonblocking sends and receives: `MPI_Isend`, `MPI_Irsend`,
//! `MPI_Issend`, `MPI_Irecv`.

use std::ffi::{c_int, c_void};

use super::{new_request, rank_of, source_of, start, tag_of};
use crate::consts::*;
use crate::state::{Active, ReqEntry, put, request_handle, vpml_error, with_comm};
use crate::types::Message;

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
    // The common case in one visit to the state: a predefined datatype
    // (the C buffer itself), a valid communicator, a real peer.
    if peer != MPI_PROC_NULL
        && let Some(mut msg) = Message::predefined(buf, count, dt)
    {
        let (ptr, len) = msg.target();
        let started = with_comm(h, |c, requests| {
            // SAFETY: MPI's contract keeps the C buffer valid until the
            // request completes.
            let r = unsafe {
                if send {
                    c.isend_raw(rank_of(peer), tag, ptr, len, sync)
                } else {
                    c.irecv_raw(source_of(peer), tag_of(tag), ptr, len)
                }
            };
            r.map(|id| {
                requests.insert(ReqEntry {
                    comm: h,
                    active: Some(Active::new(id, c, peer, tag, len)),
                    proc_null: false,
                    persistent: None,
                    staging: None,
                    after: None,
                    ready: None,
                })
            })
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
            let entry = ReqEntry {
                comm: h,
                proc_null: active.is_none(),
                active,
                persistent: None,
                staging,
                after: None,
                ready: None,
            };
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
