//! Cancelling and freeing requests: `MPI_Request_free`, `MPI_Cancel`,
//! `MPI_Test_cancelled`.

use std::ffi::c_int;

use super::comm_of;
use crate::consts::*;
use crate::state::{STATE, error, put, release, request_slot, vpml_error};

export! {
    fn MPI_Request_free / PMPI_Request_free(req: *mut Request) -> c_int {
        // SAFETY: a request handle pointer (caller contract).
        let h = unsafe { req.as_ref().copied() }.unwrap_or(MPI_REQUEST_NULL);
        // Dropping an active request lets it finish in the background;
        // its staging buffer must outlive it.
        // A completed generalized request to free with the state let go.
        let mut greq = None;
        let freed = STATE.with(|s| {
            let mut s = s.borrow_mut();
            let i = request_slot(h).filter(|&i| s.requests.get(i).is_some())?;
            if s.requests.get(i).is_some_and(|e| e.is_collective_in_flight()) {
                // MPI forbids it: the collective's memory is in use.
                return Some(false);
            }
            if s.requests.get(i).is_some_and(|e| e.is_greq()) {
                greq = super::release_greq(&mut s, i);
                return Some(true);
            }
            let e = s.requests.remove(i)?;
            // A persistent request's private copies of its datatypes.
            match e.persistent() {
                Some(crate::state::Persistent::P2p(op)) => {
                    release(&mut s.types, op.dt, USER_TYPE_KIND);
                }
                Some(crate::state::Persistent::Collective(pc)) => {
                    for &t in &pc.types {
                        release(&mut s.types, t, USER_TYPE_KIND);
                    }
                }
                Some(crate::state::Persistent::Partitioned(p)) => {
                    release(&mut s.types, p.datatype(), USER_TYPE_KIND);
                }
                None => {}
            }
            if let Some(a) = e.active {
                if let Some(on) = a.on() {
                    on.detach_raw(a.id());
                }
                s.orphans.extend(e.more.and_then(|m| m.staging));
            }
            Some(true)
        });
        match freed {
            Some(true) => {}
            Some(false) => {
                return error(comm_of(h), "MPI_Request_free", MPI_ERR_REQUEST, "a nonblocking collective cannot be freed");
            }
            None => return error(MPI_COMM_WORLD, "MPI_Request_free", MPI_ERR_REQUEST, "invalid request"),
        }
        // SAFETY: as above.
        unsafe { put(req, MPI_REQUEST_NULL) };
        if let Some((g, active)) = greq {
            if let Some(a) = active {
                // Its (empty) status in the engine.
                let _ = a.finish();
            }
            let code = g.free();
            if code != MPI_SUCCESS {
                return error(MPI_COMM_WORLD, "MPI_Request_free", code, "the generalized request's free function failed");
            }
        }
        MPI_SUCCESS
    }

    fn MPI_Cancel / PMPI_Cancel(req: *mut Request) -> c_int {
        // SAFETY: a request handle pointer (caller contract).
        let h = unsafe { req.as_ref().copied() }.unwrap_or(MPI_REQUEST_NULL);
        match super::cancel_greq(h) {
            None => {}
            Some(MPI_SUCCESS) => return MPI_SUCCESS,
            Some(code) => return error(comm_of(h), "MPI_Cancel", code, "the generalized request's cancel function failed"),
        }
        let r = STATE.with(|s| {
            let s = s.borrow();
            let e = request_slot(h).and_then(|i| s.requests.get(i))?;
            if e.is_collective_in_flight() {
                return Some(Some(Err(vpml::Error::RequestState("a nonblocking collective cannot be cancelled"))));
            }
            // (An operation complete at start cannot be cancelled.)
            Some(e.active.as_ref().and_then(|a| Some(a.on()?.cancel_raw(a.id()))))
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
}
