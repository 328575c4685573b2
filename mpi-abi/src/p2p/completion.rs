//! How the wait/test family completes requests: each handle's standing,
//! taking the active requests out of the table and putting back what did
//! not complete, retiring completed ones, and one completion call over a
//! set of handles with vpml's call of the same name.

use std::ffi::c_int;

use vpml::protocol::CompletionKind;
use vpml::raw::RawRequest;

use crate::consts::*;
use crate::state::{STATE, State, class_of, error, request_slot, vpml_error};

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
        let e = request_slot(h).and_then(|i| s.requests.get(i)).ok_or(())?;
        Ok(if e.proc_null {
            Standing::ProcNull
        } else if e.active.is_some() {
            Standing::Active
        } else {
            Standing::Inactive
        })
    })
}

/// The request `*h` completed: a persistent one becomes inactive, any
/// other is freed and its handle set to `MPI_REQUEST_NULL`.
///
/// # Safety
/// `h` points to a request handle.
unsafe fn retire(s: &mut State, h: *mut Request) {
    // SAFETY: caller contract.
    let handle = unsafe { *h };
    let Some(i) = request_slot(handle) else {
        return;
    };
    match s.requests.get_mut(i) {
        Some(e) if e.persistent.is_some() => {
            e.proc_null = false;
            e.active = None;
            e.staging = None;
        }
        Some(_) => {
            s.requests.remove(i);
            // SAFETY: caller contract.
            unsafe { *h = MPI_REQUEST_NULL };
        }
        None => {}
    }
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

/// The requests of `hs` as the engine knows them (`None`: null, inactive
/// or on `MPI_PROC_NULL`), the indices of operations on `MPI_PROC_NULL`,
/// the communicator whose error handler applies (the first request's),
/// and a communicator to run the completion call on (any active
/// request's: they share one engine). `Err` for an invalid handle.
#[allow(clippy::type_complexity)]
fn look_up(
    hs: &[Request],
) -> Result<
    (
        Vec<Option<RawRequest>>,
        Vec<usize>,
        Comm,
        Option<vpml::Comm>,
    ),
    (),
> {
    STATE.with(|s| {
        let s = s.borrow();
        let mut reqs = Vec::with_capacity(hs.len());
        let mut proc_null = Vec::new();
        let mut comm = None;
        let mut engine = None;
        for (i, &h) in hs.iter().enumerate() {
            if h == MPI_REQUEST_NULL {
                reqs.push(None);
                continue;
            }
            let e = request_slot(h).and_then(|k| s.requests.get(k)).ok_or(())?;
            comm.get_or_insert(e.comm);
            if e.proc_null {
                proc_null.push(i);
            }
            if let Some(a) = &e.active
                && engine.is_none()
            {
                engine = Some(a.on.clone());
            }
            reqs.push(e.active.as_ref().map(|a| a.id));
        }
        Ok((reqs, proc_null, comm.unwrap_or(MPI_COMM_WORLD), engine))
    })
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
    let (reqs, proc_null, comm, engine) = look_up(hs)
        .map_err(|()| error(MPI_COMM_WORLD, func, MPI_ERR_REQUEST, "invalid request"))?;
    if engine.is_none() && proc_null.is_empty() {
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
    if let (Some(call), Some(engine)) = (call, &engine) {
        let kind = |k| engine.completion_raw(k, &reqs);
        let outcome = match call {
            Call::WaitAll => engine
                .wait_all_raw(&reqs)
                .map(|()| (0..reqs.len()).filter(|&i| reqs[i].is_some()).collect()),
            Call::TestAll => kind(CompletionKind::TestAll),
            Call::WaitAny => kind(CompletionKind::WaitAny),
            Call::TestAny => kind(CompletionKind::TestAny),
            Call::Test => engine.completion_raw(CompletionKind::Test, &reqs[..1]),
            Call::WaitSome => kind(CompletionKind::WaitSome),
            Call::TestSome => kind(CompletionKind::TestSome),
        };
        let finished = outcome.and_then(|idx: Vec<usize>| {
            // Each status, in the numbering of its request's communicator.
            STATE.with(|s| {
                let s = s.borrow();
                idx.into_iter()
                    .filter_map(|i| Some((i, reqs[i]?)))
                    .map(|(i, r)| {
                        // In the numbering of the request's communicator.
                        let c = request_slot(hs[i])
                            .and_then(|k| s.requests.get(k))
                            .and_then(|e| e.active.as_ref())
                            .map_or(engine, |a| &a.on);
                        Ok((i, Some(c.finish_raw(r)?)))
                    })
                    .collect::<vpml::Result<Vec<_>>>()
            })
        });
        match finished {
            Ok(v) => {
                if matches!(call, Call::TestAll) && v.is_empty() {
                    // Test_all: not all done; complete nothing.
                    return Ok((Some(Vec::new()), comm));
                }
                done.extend(v);
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
        done.sort_by_key(|(i, _)| *i);
    }
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        for (i, st) in &done {
            // Received data of a non-contiguous datatype goes to the C
            // buffer.
            if let Some(st) = st
                && let Some(m) = request_slot(hs[*i])
                    .and_then(|k| s.requests.get(k))
                    .and_then(|e| e.staging.as_ref())
            {
                m.finish(Some(st.len()));
            }
            // SAFETY: `hs[i]` is a handle of the caller's array.
            unsafe { retire(&mut s, &mut hs[*i]) };
        }
    });
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
