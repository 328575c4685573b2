//! The wait/test family: `MPI_Wait`, `MPI_Waitall`, `MPI_Waitany`,
//! `MPI_Waitsome`, `MPI_Test`, `MPI_Testany`, `MPI_Testall`,
//! `MPI_Testsome`, and how their outputs are written.

use std::ffi::c_int;

use super::completion::{Call, Outcome, Standing, complete, raise, standing};
use super::{handles, nth, write_status};
use crate::consts::*;
use crate::state::put;

/// Empty statuses for the `n` requests of an all-call (those it completes
/// are written over).
///
/// # Safety
/// `statuses` holds `n` statuses or is `MPI_STATUSES_IGNORE`.
unsafe fn write_empty_statuses(statuses: *mut MpiStatus, n: usize) {
    for i in 0..n {
        // SAFETY: caller contract.
        unsafe { write_status(nth(statuses, i), None, false) };
    }
}

/// The status of a completed request (`None`: an operation on
/// `MPI_PROC_NULL`).
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE` or a valid status pointer.
unsafe fn write_completed(out: *mut MpiStatus, st: Option<&vpml::Status>) {
    // SAFETY: caller contract.
    unsafe { write_status(out, st, st.is_none()) };
}

export! {
    fn MPI_Wait / PMPI_Wait(req: *mut Request, status: *mut MpiStatus) -> c_int {
        // SAFETY: one handle (caller contract).
        let hs = unsafe { handles(req, 1) };
        let each = |_, st: Option<&vpml::Status>| {
            // SAFETY: a status pointer or MPI_STATUS_IGNORE.
            unsafe { write_completed(status, st) }
        };
        match complete("MPI_Wait", hs, Call::WaitAll, each) {
            Ok((Outcome::Completed { count: 1, error }, c)) => raise("MPI_Wait", c, error, false),
            Ok(_) => {
                // SAFETY: as above.
                unsafe { write_status(status, None, false) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Waitall / PMPI_Waitall(count: c_int, reqs: *mut Request, statuses: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        let n = hs.len();
        // Empty statuses first (for the null and inactive requests), once
        // the call got that far; each completed one's over its own.
        let mut wrote_empty = false;
        let each = |i, st: Option<&vpml::Status>| {
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
        // SAFETY: one handle (caller contract).
        let hs = unsafe { handles(req, 1) };
        let each = |_, st: Option<&vpml::Status>| {
            // SAFETY: a status pointer or MPI_STATUS_IGNORE.
            unsafe { write_completed(status, st) }
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
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        any_call("MPI_Testany", hs, Call::TestAny, index, Some(flag), status)
    }

    fn MPI_Testall / PMPI_Testall(count: c_int, reqs: *mut Request, flag: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        let hs = unsafe { handles(reqs, count) };
        let n = hs.len();
        let pending = hs.iter().any(|&h| h != MPI_REQUEST_NULL && matches!(standing(h), Ok(Standing::Active)));
        // Statuses are written only when everything completed: the empty
        // ones first, then (the call completes all or nothing) each
        // completed one over its own.
        let mut wrote_empty = false;
        let each = |i, st: Option<&vpml::Status>| {
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
    let each = |i: usize, st: Option<&vpml::Status>| {
        // SAFETY: the caller's pointers.
        unsafe {
            put(index, i as c_int);
            write_completed(status, st);
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
    let each = |i: usize, st: Option<&vpml::Status>| {
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
