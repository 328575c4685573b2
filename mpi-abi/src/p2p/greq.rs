//! Generalized requests: `MPI_Grequest_start`, `MPI_Grequest_complete`.
//!
//! A generalized request is an engine request that the application
//! completes itself (`vpml::Comm::start_external_raw`): every wait and
//! test finds it as any other, and under a logging protocol its
//! completions are logged and replayed as any other's. Its status comes
//! from the application's query function, called once it completed; its
//! free function runs when the request is freed (by the wait or test that
//! completes it, or at `MPI_Grequest_complete` if `MPI_Request_free` let
//! it go before); `MPI_Cancel` calls its cancel function.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{
    Active, More, ReqEntry, STATE, engine_comm, error, put, request_handle, request_slot,
    vpml_error,
};

/// `MPI_Grequest_query_function`.
pub(crate) type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
/// `MPI_Grequest_free_function`.
pub(crate) type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
pub(crate) type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// The application's functions and state for one generalized request.
pub(crate) struct Greq {
    /// The query function: fills the status of the completed request.
    query: Option<QueryFn>,
    /// The free function: releases the application's state.
    free: Option<FreeFn>,
    /// The cancel function: told whether the request completed.
    cancel: Option<CancelFn>,
    /// The application's state, passed to each function.
    extra: *mut c_void,
    /// `MPI_Grequest_complete` was called.
    completed: bool,
    /// `MPI_Request_free` let it go before it completed: free it at
    /// `MPI_Grequest_complete`.
    orphaned: bool,
}

impl Greq {
    /// The status the query function gives, and its return value. Runs
    /// the application's code: call it with the state free.
    pub(crate) fn query(&self) -> (MpiStatus, c_int) {
        let mut st = MpiStatus::default();
        let rc = match self.query {
            // SAFETY: the function and its state as the application gave
            // them to MPI_Grequest_start; a status it may fill.
            Some(q) => unsafe { q(self.extra, &mut st) },
            None => MPI_SUCCESS,
        };
        (st, rc)
    }

    /// Query, then free (the request completes): the status, with the
    /// last failing function's code in `MPI_ERROR` (MPI's rule: the free
    /// function's, else the query function's).
    pub(crate) fn finish(self) -> MpiStatus {
        let (mut st, queried) = self.query();
        let freed = self.free();
        st.error = if freed != MPI_SUCCESS { freed } else { queried };
        st
    }

    /// Run the free function (once: it consumes the request's state).
    pub(crate) fn free(self) -> c_int {
        match self.free {
            // SAFETY: as in `query`.
            Some(f) => unsafe { f(self.extra) },
            None => MPI_SUCCESS,
        }
    }

    /// Run the cancel function (`complete`: the request already
    /// completed).
    pub(crate) fn cancel(&self, complete: bool) -> c_int {
        match self.cancel {
            // SAFETY: as in `query`.
            Some(c) => unsafe { c(self.extra, c_int::from(complete)) },
            None => MPI_SUCCESS,
        }
    }
}

/// `MPI_Request_free` of a generalized request (entry `k`): one that
/// completed is taken out of the table and returned, to be freed (its
/// free function run) with the state let go; one still in flight is kept
/// for `MPI_Grequest_complete`, which frees it.
pub(crate) fn release_greq(
    s: &mut crate::state::State,
    k: usize,
) -> Option<(Greq, Option<Active>)> {
    let g = s.requests.get_mut(k)?.greq_mut()?;
    if !g.completed {
        g.orphaned = true;
        return None;
    }
    let mut e = s.requests.remove(k)?;
    Some((e.take_greq()?, e.active))
}

/// A copy of generalized request `h`'s functions and state, to call
/// them with the state let go (the free function left out: only the call
/// that completes the request runs it); `None` if `h` is not one.
fn functions_of(h: Request) -> Option<Greq> {
    STATE.with(|s| {
        let s = s.borrow();
        let g = request_slot(h).and_then(|k| s.requests.get(k))?.greq()?;
        Some(Greq {
            query: g.query,
            free: None,
            cancel: g.cancel,
            extra: g.extra,
            completed: g.completed,
            orphaned: false,
        })
    })
}

/// What `MPI_Request_get_status` says of generalized request `h`:
/// `None` if `h` is not one; else its status once completed (the query
/// function's answer, the request staying as it is).
pub(crate) fn greq_status(h: Request) -> Option<Option<MpiStatus>> {
    let g = functions_of(h)?;
    Some(g.completed.then(|| {
        let (mut st, rc) = g.query();
        st.error = rc;
        st
    }))
}

/// `MPI_Cancel` of generalized request `h`: its cancel function's answer,
/// or `None` if `h` is not one.
pub(crate) fn cancel_greq(h: Request) -> Option<c_int> {
    let g = functions_of(h)?;
    Some(g.cancel(g.completed))
}

export! {
    fn MPI_Grequest_start / PMPI_Grequest_start(query: Option<QueryFn>, free: Option<FreeFn>, cancel: Option<CancelFn>, extra: *mut c_void, req: *mut Request) -> c_int {
        let started = STATE.with(|s| {
            let mut s = s.borrow_mut();
            let c = engine_comm(&s)?;
            let id = match c.start_external_raw() {
                Ok(id) => id,
                Err(e) => return Some(Err(e)),
            };
            let greq = Greq { query, free, cancel, extra, completed: false, orphaned: false };
            let active = Active::new(id, &c, MPI_UNDEFINED, MPI_UNDEFINED, 0);
            let more = More { greq: Some(greq), ..More::default() };
            Some(Ok(s.requests.insert(ReqEntry::with(MPI_COMM_WORLD, Some(active), more))))
        });
        match started {
            Some(Ok(slot)) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(req, request_handle(slot)) };
                MPI_SUCCESS
            }
            Some(Err(e)) => crate::state::vpml_error(MPI_COMM_WORLD, "MPI_Grequest_start", &e),
            None => error(MPI_COMM_WORLD, "MPI_Grequest_start", MPI_ERR_OTHER, "MPI is not initialized"),
        }
    }

    fn MPI_Grequest_complete / PMPI_Grequest_complete(h: Request) -> c_int {
        let func = "MPI_Grequest_complete";
        // The engine's request, and (freed already) the functions.
        let found = STATE.with(|s| {
            let mut s = s.borrow_mut();
            let k = request_slot(h)?;
            let e = s.requests.get_mut(k)?;
            let g = e.greq_mut().filter(|g| !g.completed)?;
            let orphaned = g.orphaned;
            let a = e.active.as_ref()?;
            let (id, on) = (a.id(), a.on()?.clone());
            // Complete in the engine first: on an error, nothing changed.
            if let Err(e) = on.complete_external_raw(id) {
                return Some(Err(e));
            }
            if let Some(g) = s.requests.get_mut(k).and_then(|e| e.greq_mut()) {
                g.completed = true;
            }
            let greq = if orphaned { s.requests.remove(k).and_then(|mut e| e.take_greq()) } else { None };
            Some(Ok((id, on, greq)))
        });
        let (id, on, greq) = match found {
            Some(Ok(f)) => f,
            Some(Err(e)) => return vpml_error(MPI_COMM_WORLD, func, &e),
            None => return error(MPI_COMM_WORLD, func, MPI_ERR_REQUEST, "not an active generalized request"),
        };
        match greq {
            Some(g) => {
                // Nobody waits for it: its status is not needed.
                let _ = on.finish_raw(id);
                match g.free() {
                    MPI_SUCCESS => MPI_SUCCESS,
                    code => error(MPI_COMM_WORLD, func, code, "the free function failed"),
                }
            }
            None => MPI_SUCCESS,
        }
    }
}
