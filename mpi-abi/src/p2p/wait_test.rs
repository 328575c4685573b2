//! The wait/test family: `MPI_Wait`, `MPI_Waitall`, `MPI_Waitany`,
//! `MPI_Waitsome`, `MPI_Test`, `MPI_Testany`, `MPI_Testall`,
//! `MPI_Testsome`, and how their outputs are written.

use std::ffi::c_int;

use super::completion::{Call, Completions, Standing, complete, first_error, raise, standing};
use super::{handles, nth, write_status};
use crate::consts::*;
use crate::state::put;

/// The statuses of an all-call over `n` requests: each completed one's,
/// empty for the others (inactive or null requests).
///
/// # Safety
/// `statuses` holds `n` statuses or is `MPI_STATUSES_IGNORE`.
unsafe fn write_all_statuses(
    statuses: *mut MpiStatus,
    n: usize,
    done: Vec<(usize, Option<vpml::Status>)>,
) {
    if ignored(statuses) {
        return;
    }
    let mut out: Vec<(Option<vpml::Status>, bool)> = (0..n).map(|_| (None, false)).collect();
    for (i, s) in done {
        let proc_null = s.is_none();
        out[i] = (s, proc_null);
    }
    for (i, (s, proc_null)) in out.iter().enumerate() {
        // SAFETY: caller contract.
        unsafe { write_status(nth(statuses, i), s.as_ref(), *proc_null) };
    }
}

export! {
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
                // SAFETY: `statuses` holds `count` statuses or is ignored.
                unsafe { write_all_statuses(statuses, n, done) };
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
                    // SAFETY: `statuses` holds `count` statuses or is ignored.
                    unsafe { write_all_statuses(statuses, n, done) };
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
