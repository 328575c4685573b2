//! How the wait/test family completes requests: each handle's standing,
//! taking the active requests out of the table and putting back what did
//! not complete, retiring completed ones, and one completion call over a
//! set of handles with vpml's call of the same name.

use std::ffi::c_int;

use super::comm_of;
use crate::consts::*;
use crate::state::{CBuf, STATE, class_of, error, request_slot, vpml_error};

/// How a request handle stands.
pub(super) enum Standing {
    /// `MPI_REQUEST_NULL` or an inactive persistent request.
    Inactive,
    /// An operation on `MPI_PROC_NULL`: complete.
    ProcNull,
    /// In flight.
    Active,
}

pub(super) fn standing(h: Request) -> Result<Standing, ()> {
    if h == MPI_REQUEST_NULL {
        return Ok(Standing::Inactive);
    }
    STATE.with(|s| {
        let s = s.borrow();
        let e = request_slot(h)
            .and_then(|i| s.requests.get(i)?.as_ref())
            .ok_or(())?;
        Ok(if e.proc_null {
            Standing::ProcNull
        } else if e.active.is_some() {
            Standing::Active
        } else {
            Standing::Inactive
        })
    })
}

/// Take the active requests of `handles` out of the table.
fn take(handles: &[Request]) -> Vec<Option<vpml::Request<CBuf>>> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        handles
            .iter()
            .map(|&h| {
                request_slot(h)
                    .and_then(|i| s.requests.get_mut(i)?.as_mut())
                    .and_then(|e| e.active.take())
            })
            .collect()
    })
}

/// Put back the requests of `slots` that did not complete.
fn put_back(handles: &[Request], slots: Vec<Option<vpml::Request<CBuf>>>) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        for (&h, slot) in handles.iter().zip(slots) {
            if let Some(r) = slot
                && let Some(e) = request_slot(h).and_then(|i| s.requests.get_mut(i)?.as_mut())
            {
                e.active = Some(r);
            }
        }
    });
}

/// The request `*h` completed: a persistent one becomes inactive, any
/// other is freed and its handle set to `MPI_REQUEST_NULL`.
///
/// # Safety
/// `h` points to a request handle.
unsafe fn retire(h: *mut Request) {
    // SAFETY: caller contract.
    let handle = unsafe { *h };
    let free = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let Some(i) = request_slot(handle) else {
            return false;
        };
        match s.requests.get_mut(i) {
            Some(Some(e)) if e.persistent.is_some() => {
                e.proc_null = false;
                e.active = None;
                e.staging = None;
                false
            }
            Some(slot) => {
                *slot = None;
                true
            }
            None => false,
        }
    });
    if free {
        // SAFETY: caller contract.
        unsafe { *h = MPI_REQUEST_NULL };
    }
}

/// Classify every handle, or name the first invalid one.
fn standings(func: &str, hs: &[Request]) -> Result<Vec<Standing>, c_int> {
    hs.iter()
        .map(|&h| {
            standing(h)
                .map_err(|()| error(MPI_COMM_WORLD, func, MPI_ERR_REQUEST, "invalid request"))
        })
        .collect()
}

/// Completed request indices with their statuses (`None`: an operation
/// on `MPI_PROC_NULL`); `None` overall when nothing was active.
pub(super) type Completions = Option<Vec<(usize, Option<vpml::Status>)>>;

/// Which completion call to run over the active requests.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Call {
    WaitAll,
    WaitAny,
    WaitSome,
    Test,
    TestAll,
    TestAny,
    TestSome,
}

/// One completion call over `hs`. Returns the completed indices with
/// their statuses (`None`: an operation on `MPI_PROC_NULL`), or `None`
/// when nothing was active (the `MPI_UNDEFINED` answers), or the error
/// code.
pub(super) fn complete(
    func: &str,
    hs: &mut [Request],
    call: Call,
) -> Result<(Completions, Comm), c_int> {
    let st = standings(func, hs)?;
    // Whose error handler applies (taken before the handles are retired).
    let comm = hs
        .iter()
        .find(|&&h| h != MPI_REQUEST_NULL)
        .map_or(MPI_COMM_WORLD, |&h| comm_of(h));
    let proc_null: Vec<usize> = (0..hs.len())
        .filter(|&i| matches!(st[i], Standing::ProcNull))
        .collect();
    let active = st.iter().any(|s| matches!(s, Standing::Active));
    if !active && proc_null.is_empty() {
        return Ok((None, comm));
    }
    let mut done: Vec<(usize, Option<vpml::Status>)> = Vec::new();
    // Operations on MPI_PROC_NULL are complete: the "any" calls take the
    // first, the "some" calls take them all and only test the others.
    let call = match call {
        Call::WaitAny | Call::TestAny if !proc_null.is_empty() => {
            done.push((proc_null[0], None));
            None
        }
        Call::WaitSome if !proc_null.is_empty() => Some(Call::TestSome),
        other => Some(other),
    };
    if let Some(call) = call
        && active
    {
        let mut slots = take(hs);
        let outcome: vpml::Result<Vec<(usize, vpml::Status)>> = (|| {
            Ok(match call {
                Call::WaitAll => {
                    let idx: Vec<usize> =
                        (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
                    let outs = vpml::wait_all(&mut slots)?;
                    idx.into_iter()
                        .zip(outs.into_iter().map(|c| c.status))
                        .collect()
                }
                Call::TestAll => {
                    let idx: Vec<usize> =
                        (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
                    match vpml::test_all(&mut slots)? {
                        Some(outs) => idx
                            .into_iter()
                            .zip(outs.into_iter().map(|c| c.status))
                            .collect(),
                        None => Vec::new(),
                    }
                }
                Call::WaitAny => vpml::wait_any(&mut slots)?
                    .map(|(i, c)| (i, c.status))
                    .into_iter()
                    .collect(),
                Call::TestAny => vpml::test_any(&mut slots)?
                    .map(|(i, c)| (i, c.status))
                    .into_iter()
                    .collect(),
                Call::Test => vpml::test(&mut slots[0])?
                    .map(|c| (0, c.status))
                    .into_iter()
                    .collect(),
                Call::WaitSome => vpml::wait_some(&mut slots)?
                    .into_iter()
                    .map(|(i, c)| (i, c.status))
                    .collect(),
                Call::TestSome => vpml::test_some(&mut slots)?
                    .into_iter()
                    .map(|(i, c)| (i, c.status))
                    .collect(),
            })
        })();
        put_back(hs, slots);
        match outcome {
            Ok(v) => {
                let all = matches!(call, Call::WaitAll | Call::TestAll);
                if all && v.is_empty() {
                    // Test_all: not all done; complete nothing.
                    return Ok((Some(Vec::new()), comm));
                }
                done.extend(v.into_iter().map(|(i, s)| (i, Some(s))));
            }
            Err(e) => return Err(vpml_error(comm, func, &e)),
        }
    }
    // The all-calls (once everything is done), the some-calls and Test
    // also complete every operation on MPI_PROC_NULL.
    if matches!(
        call,
        Some(Call::WaitAll | Call::TestAll | Call::TestSome | Call::Test)
    ) {
        done.extend(proc_null.iter().map(|&i| (i, None)));
    }
    done.sort_by_key(|(i, _)| *i);
    // Received data of a non-contiguous datatype goes to the C buffer.
    STATE.with(|s| {
        let s = s.borrow();
        for (i, st) in &done {
            if let Some(st) = st
                && let Some(e) = request_slot(hs[*i]).and_then(|k| s.requests.get(k)?.as_ref())
                && let Some(m) = &e.staging
            {
                m.finish(Some(st.len()));
            }
        }
    });
    for (i, _) in &done {
        // SAFETY: `hs[i]` is a handle of the caller's array.
        unsafe { retire(&mut hs[*i]) };
    }
    Ok((Some(done), comm))
}

/// The first error among completed requests, as (class, message).
pub(super) fn first_error(done: &[(usize, Option<vpml::Status>)]) -> Option<(c_int, String)> {
    done.iter()
        .find_map(|(_, s)| s.as_ref()?.error())
        .map(|e| (class_of(e), e.to_string()))
}

/// Report a completed request's error once the statuses are written: its
/// own class from a call that completes one request, `MPI_ERR_IN_STATUS`
/// (each status's `MPI_ERROR` says which) from one that completes several.
pub(super) fn raise(func: &str, comm: Comm, err: Option<(c_int, String)>, several: bool) -> c_int {
    match err {
        None => MPI_SUCCESS,
        Some((class, why)) => error(
            comm,
            func,
            if several { MPI_ERR_IN_STATUS } else { class },
            &why,
        ),
    }
}
