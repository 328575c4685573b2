//! The wait/test family: `MPI_Wait`, `MPI_Waitall`, `MPI_Waitany`,
//! `MPI_Waitsome`, `MPI_Test`, `MPI_Testany`, `MPI_Testall`,
//! `MPI_Testsome`, and how their outputs are written.

use std::ffi::c_int;

use super::completion::{Call, Outcome, Standing, complete, raise, standing};
use super::{handles, nth, put_single_status, put_status, write_status};
use crate::consts::*;
use crate::state::put;

/// Empty statuses for the `n` requests of an all-call (those it completes
/// are written over).
///
/// # Safety
/// `statuses` holds `n` statuses or is `MPI_STATUSES_IGNORE`.
unsafe fn write_empty_statuses(statuses: *mut MpiStatus, n: usize) {
    for i in 0..n {
        // SAFETY: caller contract. (MPI's empty status, MPI_ERROR
        // included: these calls set it.)
        unsafe { put_status(nth(statuses, i), &super::status_of(None, false)) };
    }
}

/// The status of a request completed by a call that completes several
/// (`MPI_ERROR` included).
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE` or a valid status pointer.
unsafe fn write_completed(out: *mut MpiStatus, st: &MpiStatus) {
    // SAFETY: caller contract.
    unsafe { put_status(out, st) };
}

/// The status of the request completed by a call that completes one:
/// `MPI_ERROR` is left as it was.
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE` or a valid status pointer.
unsafe fn write_one_completed(out: *mut MpiStatus, st: &MpiStatus) {
    // SAFETY: caller contract.
    unsafe { put_single_status(out, st) };
}

/// `MPI_Wait` on the one handle of `hs`, errors named after `func`.
///
/// # Safety
/// `status` is `MPI_STATUS_IGNORE` or a valid status pointer.
pub(crate) unsafe fn wait_one(func: &str, hs: &mut [Request], status: *mut MpiStatus) -> c_int {
    let each = |_, st: &MpiStatus| {
        // SAFETY: caller contract.
        unsafe { write_one_completed(status, st) }
    };
    match complete(func, hs, Call::WaitAll, each) {
        Ok((Outcome::Completed { count: 1, error }, c)) => raise(func, c, error, false),
        Ok(_) => {
            // SAFETY: as above.
            unsafe { write_status(status, None, false) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

/// Under `MPI_THREAD_MULTIPLE`, a blocking call as its nonblocking start
/// and a wait that lets other threads call MPI meanwhile (see
/// [`crate::threads`]), errors named after `func`.
///
/// # Safety
/// As for `wait_one`.
pub(crate) unsafe fn start_and_wait(
    func: &str,
    start: impl FnOnce(*mut Request) -> c_int,
    status: *mut MpiStatus,
) -> c_int {
    let mut req = MPI_REQUEST_NULL;
    let r = start(&mut req);
    if r != MPI_SUCCESS {
        return r;
    }
    // SAFETY: the caller's status pointer.
    unsafe { wait_one(func, std::slice::from_mut(&mut req), status) }
}

export! {
    fn MPI_Wait / PMPI_Wait(req: *mut Request, status: *mut MpiStatus) -> c_int {
        // SAFETY: one handle (caller contract).
        let hs = unsafe { handles(req, 1) };
        // SAFETY: the caller's status pointer.
        unsafe { wait_one("MPI_Wait", hs, status) }
    }

    fn MPI_Waitall / PMPI_Waitall(count: c_int, reqs: *mut Request, statuses: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        let n = hs.len();
        // Empty statuses first (for the null and inactive requests), once
        // the call got that far; each completed one's over its own.
        let mut wrote_empty = false;
        let each = |i, st: &MpiStatus| {
            if !wrote_empty {
                wrote_empty = true;
                // SAFETY: `statuses` holds `count` statuses or is ignored.
                unsafe { write_empty_statuses(statuses, n) };
            }
            // SAFETY: as above.
            unsafe { write_completed(nth(statuses, i), st) }
        };
        let r = complete("MPI_Waitall", hs, Call::WaitAll, each);
        if matches!(r, Ok((Outcome::Inactive, _))) {
            // SAFETY: as above.
            unsafe { write_empty_statuses(statuses, n) };
        }
        match r {
            Ok((Outcome::Completed { error, .. }, c)) => raise("MPI_Waitall", c, error, true),
            Ok((Outcome::Inactive, _)) => MPI_SUCCESS,
            Err(code) => code,
        }
    }

    fn MPI_Waitany / PMPI_Waitany(count: c_int, reqs: *mut Request, index: *mut c_int, status: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        any_call("MPI_Waitany", hs, Call::WaitAny, index, None, status)
    }

    fn MPI_Waitsome / PMPI_Waitsome(count: c_int, reqs: *mut Request, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        some_call("MPI_Waitsome", hs, Call::WaitSome, outcount, indices, statuses)
    }

    fn MPI_Test / PMPI_Test(req: *mut Request, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        // A polling loop is a progress point for one-sided requests.
        crate::rma::progress();
        // SAFETY: one handle (caller contract).
        let hs = unsafe { handles(req, 1) };
        let each = |_, st: &MpiStatus| {
            // SAFETY: a status pointer or MPI_STATUS_IGNORE.
            unsafe { write_one_completed(status, st) }
        };
        match complete("MPI_Test", hs, Call::Test, each) {
            Ok((Outcome::Inactive, _)) => {
                // SAFETY: caller's pointers.
                unsafe {
                    put(flag, 1);
                    write_status(status, None, false);
                }
                MPI_SUCCESS
            }
            Ok((Outcome::Completed { count, error }, c)) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(flag, c_int::from(count > 0)) };
                raise("MPI_Test", c, error, false)
            }
            Err(code) => code,
        }
    }

    fn MPI_Testany / PMPI_Testany(count: c_int, reqs: *mut Request, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        // A polling loop is a progress point for one-sided requests.
        crate::rma::progress();
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        any_call("MPI_Testany", hs, Call::TestAny, index, Some(flag), status)
    }

    fn MPI_Testall / PMPI_Testall(count: c_int, reqs: *mut Request, flag: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // A polling loop is a progress point for one-sided requests.
        crate::rma::progress();
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        let n = hs.len();
        let pending = hs.iter().any(|&h| h != MPI_REQUEST_NULL && matches!(standing(h), Ok(Standing::Active)));
        // Statuses are written only when everything completed: the empty
        // ones first, then (the call completes all or nothing) each
        // completed one over its own.
        let mut wrote_empty = false;
        let each = |i, st: &MpiStatus| {
            if !wrote_empty {
                wrote_empty = true;
                // SAFETY: `statuses` holds `count` statuses or is ignored.
                unsafe { write_empty_statuses(statuses, n) };
            }
            // SAFETY: as above.
            unsafe { write_completed(nth(statuses, i), st) };
        };
        match complete("MPI_Testall", hs, Call::TestAll, each) {
            Ok((outcome, c)) => {
                let (all, error) = match outcome {
                    Outcome::Inactive => (true, None),
                    Outcome::Completed { count, error } => (!pending || count > 0, error),
                };
                if all && !wrote_empty {
                    // Nothing was active: every status is empty.
                    // SAFETY: as above.
                    unsafe { write_empty_statuses(statuses, n) };
                }
                // SAFETY: an int pointer (caller contract).
                unsafe { put(flag, c_int::from(all)) };
                raise("MPI_Testall", c, error, true)
            }
            Err(code) => code,
        }
    }

    fn MPI_Testsome / PMPI_Testsome(count: c_int, reqs: *mut Request, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // A polling loop is a progress point for one-sided requests.
        crate::rma::progress();
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        some_call("MPI_Testsome", hs, Call::TestSome, outcount, indices, statuses)
    }
}

/// `Waitany`/`Testany`: run `call` and write its outputs.
fn any_call(
    func: &str,
    hs: &mut [Request],
    call: Call,
    index: *mut c_int,
    flag: Option<*mut c_int>,
    status: *mut MpiStatus,
) -> c_int {
    let each = |i: usize, st: &MpiStatus| {
        // SAFETY: the caller's pointers.
        unsafe {
            put(index, i as c_int);
            write_one_completed(status, st);
        }
    };
    match complete(func, hs, call, each) {
        Ok((Outcome::Inactive, _)) => {
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
        Ok((Outcome::Completed { count, error }, c)) => {
            // SAFETY: caller's pointers.
            unsafe {
                if let Some(f) = flag {
                    put(f, c_int::from(count > 0));
                }
                if count == 0 {
                    put(index, MPI_UNDEFINED);
                }
            }
            raise(func, c, error, false)
        }
        Err(code) => code,
    }
}

/// `Waitsome`/`Testsome`: run `call` and write its outputs.
fn some_call(
    func: &str,
    hs: &mut [Request],
    call: Call,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    let mut k = 0;
    let each = |i: usize, st: &MpiStatus| {
        // SAFETY: `indices`/`statuses` hold room for every request.
        unsafe {
            put(indices.wrapping_add(k), i as c_int);
            write_completed(nth(statuses, k), st);
        }
        k += 1;
    };
    match complete(func, hs, call, each) {
        Ok((Outcome::Inactive, _)) => {
            // SAFETY: an int pointer (caller contract).
            unsafe { put(outcount, MPI_UNDEFINED) };
            MPI_SUCCESS
        }
        Ok((Outcome::Completed { count, error }, c)) => {
            // SAFETY: an int pointer (caller contract).
            unsafe { put(outcount, count as c_int) };
            raise(func, c, error, true)
        }
        Err(code) => code,
    }
}

/// `MPI_Request_get_status`: whether request `h` completed, without
/// freeing it. A completed operation's status is taken from the engine
/// and kept in the entry (as for one complete from the start), so that the
/// wait or test that frees the request reports it again; its last steps
/// (unpacking, a collective's folding) run now.
/// `None` if not complete; else its status (`None`: empty, on
/// `MPI_PROC_NULL` when the flag says so).
fn get_status(h: Request) -> Result<Option<(Option<vpml::Status>, bool)>, c_int> {
    use crate::state::{STATE, error, request_slot};
    let func = "MPI_Request_get_status";
    if h == MPI_REQUEST_NULL {
        return Ok(Some((None, false)));
    }
    // What to test: the operation in flight, or a status already known.
    let found = STATE.with(|s| {
        let s = s.borrow();
        let e = request_slot(h).and_then(|i| s.requests.get(i))?;
        Some(match &e.active {
            Some(a) => (e.comm, Some((a.id(), a.on().cloned())), None),
            None => (e.comm, None, Some((e.ready(), e.proc_null))),
        })
    });
    let Some((comm, active, known)) = found else {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_REQUEST,
            "invalid request",
        ));
    };
    // A partitioned send waiting for MPI_Pready is not complete.
    if super::partitioned::any_unready(&[h]) {
        return Ok(None);
    }
    let Some((id, on)) = active else {
        // Inactive, on MPI_PROC_NULL, or complete from the start.
        let (ready, proc_null) = known.unwrap_or((None, false));
        let on_proc_null = proc_null && ready.is_none();
        let st = ready.map(|(s, t, n)| vpml::Status::of_send(s, t, n));
        return Ok(Some((st, on_proc_null)));
    };
    if let Some(on) = &on {
        let done = on
            .completion_raw(vpml::protocol::CompletionKind::Test, &[Some(id)])
            .map_err(|e| crate::state::vpml_error(comm, func, &e))?;
        if done.is_empty() {
            return Ok(None);
        }
    }
    // Complete: take its status and keep it in the entry.
    let taken = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let e = request_slot(h).and_then(|i| s.requests.get_mut(i))?;
        let a = e.active.take()?;
        let st = a.finish();
        if let (Ok(st), Some(m)) = (&st, e.staging()) {
            m.finish(Some(st.len()));
        }
        drop(e.take_staging());
        if let Ok(st) = &st {
            // (A partitioned message travels under another tag.)
            let tag = match e.persistent() {
                Some(crate::state::Persistent::Partitioned(p)) => p.tag(),
                _ => st.tag(),
            };
            e.more_mut().ready = Some((st.source(), tag, st.len()));
        }
        e.proc_null = true;
        e.collective = false;
        Some((st, e.take_after()))
    });
    let Some((st, after)) = taken else {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_REQUEST,
            "invalid request",
        ));
    };
    let st = st.map_err(|e| crate::state::vpml_error(comm, func, &e))?;
    // (As a wait does: no last step after a failed operation.)
    if let Some(after) = after
        && st.error().is_none()
        && let Err((code, why)) = after()
    {
        return Err(error(comm, func, code, &why));
    }
    Ok(Some((Some(st), false)))
}

export! {
    fn MPI_Request_get_status / PMPI_Request_get_status(req: Request, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        if let Some(st) = super::greq_status(req) {
            // SAFETY: the caller's pointers.
            unsafe {
                put(flag, c_int::from(st.is_some()));
                if let Some(st) = &st {
                    put_single_status(status, st);
                }
            }
            // The query function's code is the call's.
            return match st.map_or(MPI_SUCCESS, |st| st.error) {
                MPI_SUCCESS => MPI_SUCCESS,
                code => crate::state::error(MPI_COMM_WORLD, "MPI_Request_get_status", code, "the generalized request's query function failed"),
            };
        }
        match get_status(req) {
            Ok(done) => {
                // SAFETY: the caller's pointers.
                unsafe {
                    put(flag, c_int::from(done.is_some()));
                    if let Some((st, proc_null)) = done {
                        write_status(status, st.as_ref(), proc_null);
                    }
                }
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }
}
