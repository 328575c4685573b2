//! Nonblocking sends and receives: `MPI_Isend`, `MPI_Irsend`,
//! `MPI_Issend`, `MPI_Irecv`.

use std::ffi::{c_int, c_void};

use super::{new_request, start};
use crate::consts::*;
use crate::state::{ReqEntry, put};

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
