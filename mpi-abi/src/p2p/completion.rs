//! How the wait/test family completes requests: each handle's standing,
//! taking the active requests out of the table and putting back what did
//! not complete, retiring completed ones, and one completion call over a
//! set of handles with vpml's call of the same name.

use std::ffi::c_int;

use vpml::protocol::CompletionKind;
use vpml::raw::RawRequest;

use super::status_of;
use crate::consts::*;
use crate::state::{Active, STATE, State, class_of, engine_comm, error, request_slot, vpml_error};

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

/// The request in table slot `k`, whose handle is `*h`, completed: a
/// persistent one becomes inactive, any other is freed and its handle set
/// to `MPI_REQUEST_NULL`.
#[inline]
fn retire(s: &mut State, k: usize, h: &mut Request) {
    match s.requests.get_mut(k) {
        Some(e) if e.persistent().is_some() => {
            if let Some(crate::state::Persistent::Partitioned(p)) = e.persistent_mut() {
                p.retire();
            }
            e.proc_null = false;
            e.collective = false;
            e.active = None;
            let more = e.more_mut();
            more.staging = None;
            more.after = None;
            more.ready = None;
        }
        Some(_) => {
            s.requests.free(k);
            *h = MPI_REQUEST_NULL;
        }
        None => {}
    }
}

/// What one completion call did.
pub(super) enum Outcome {
    /// No request was active or on `MPI_PROC_NULL`: the `MPI_UNDEFINED`
    /// answers.
    Inactive,
    /// `count` requests completed (none: a test found nothing, or
    /// `MPI_Testall` found some still pending), and the first error among
    /// their statuses, as (class, message).
    Completed {
        count: usize,
        error: Option<(c_int, String)>,
    },
}

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

/// Buffers a completion call reuses from one call to the next, so that a
/// `MPI_Waitall` over a window of requests allocates nothing.
#[derive(Default)]
struct Scratch {
    /// The requests as the engine knows them (`None`: null, inactive or
    /// on `MPI_PROC_NULL`).
    reqs: Vec<Option<RawRequest>>,
    /// The indices the call completes, in order.
    done: Vec<usize>,
}

thread_local! {
    /// Taken out for the length of a call (a nested call, from an error
    /// handler, finds it empty and starts afresh).
    static SCRATCH: std::cell::Cell<Scratch> = const {
        std::cell::Cell::new(Scratch {
            reqs: Vec::new(),
            done: Vec::new(),
        })
    };
}

/// One completion call over `hs`: `each(index, status)` for every request
/// it completes, in index order (`None`: an operation on
/// `MPI_PROC_NULL`, whose status is empty), after the request was retired.
/// Returns what the call did and the communicator whose error handler
/// applies (the first request's), or the error code.
pub(super) fn complete(
    func: &str,
    hs: &mut [Request],
    call: Call,
    mut each: impl FnMut(usize, &MpiStatus),
) -> Result<(Outcome, Comm), c_int> {
    let mut scratch = SCRATCH.take();
    let r = complete_with(&mut scratch, func, hs, call, &mut each);
    scratch.reqs.clear();
    scratch.done.clear();
    SCRATCH.set(scratch);
    r
}

fn complete_with(
    scratch: &mut Scratch,
    func: &str,
    hs: &mut [Request],
    call: Call,
    each: &mut dyn FnMut(usize, &MpiStatus),
) -> Result<(Outcome, Comm), c_int> {
    let Scratch { reqs, done } = scratch;
    if call == Call::WaitAll
        && let Some(r) = wait_all_plain(reqs, func, hs, each)
    {
        return r;
    }
    // A partitioned send completes once MPI_Pready marked all its
    // partitions: until then a test finds it pending, and a wait needs
    // another thread to mark them.
    let unready = super::partitioned::any_unready(hs);
    if unready {
        // Another request the call can complete meanwhile?
        let others = hs.iter().any(|&h| {
            !super::partitioned::any_unready(&[h])
                && matches!(standing(h), Ok(Standing::Active | Standing::ProcNull))
        });
        match call {
            Call::WaitAny | Call::WaitSome if others => {}
            Call::WaitAll | Call::WaitAny | Call::WaitSome if crate::threads::multiple() => {
                crate::threads::wait_until(|| !super::partitioned::any_unready(hs));
            }
            Call::WaitAll | Call::WaitAny | Call::WaitSome => {
                let why = "a partitioned send's partitions are not all marked ready (MPI_Pready), and no other thread can mark them while this one waits";
                return Err(error(super::comm_of(hs[0]), func, MPI_ERR_REQUEST, why));
            }
            Call::Test | Call::TestAll => {
                let pending = Outcome::Completed {
                    count: 0,
                    error: None,
                };
                return Ok((pending, super::comm_of(hs[0])));
            }
            Call::TestAny | Call::TestSome => {}
        }
    }
    // The requests as the engine knows them, the operations on
    // MPI_PROC_NULL, and a communicator to run the call on (any active
    // request's: they share one engine).
    let looked_up = STATE.with(|s| {
        let s = s.borrow();
        let mut comm = None;
        let mut engine = None;
        let mut first_proc_null = None;
        let mut any_active = false;
        for (i, &h) in hs.iter().enumerate() {
            if h == MPI_REQUEST_NULL {
                reqs.push(None);
                continue;
            }
            let e = request_slot(h).and_then(|k| s.requests.get(k)).ok_or(())?;
            comm.get_or_insert(e.comm);
            if e.proc_null {
                first_proc_null.get_or_insert(i);
            }
            if let Some(a) = &e.active {
                any_active = true;
                if engine.is_none() {
                    engine = a.on().cloned();
                }
            }
            reqs.push(e.active.as_ref().map(Active::id));
        }
        // Operations complete at start alone: any communicator reaches
        // the engine (which still runs the completion call).
        if any_active && engine.is_none() {
            engine = engine_comm(&s);
        }
        Ok((comm.unwrap_or(MPI_COMM_WORLD), engine, first_proc_null))
    });
    let (comm, engine, first_proc_null) =
        looked_up.map_err(|()| error(MPI_COMM_WORLD, func, MPI_ERR_REQUEST, "invalid request"))?;
    if engine.is_none() && first_proc_null.is_none() {
        // (A partitioned send still waiting for its partitions is not
        // inactive: nothing completed.)
        let outcome = if unready && matches!(call, Call::TestAny | Call::TestSome) {
            Outcome::Completed {
                count: 0,
                error: None,
            }
        } else {
            Outcome::Inactive
        };
        return Ok((outcome, comm));
    }
    // Operations on MPI_PROC_NULL are complete: the "any" calls take the
    // first, the "some" calls take them all and only test the others.
    let call = match (call, first_proc_null) {
        (Call::WaitAny | Call::TestAny, Some(i)) => {
            done.push(i);
            None
        }
        (Call::WaitSome, Some(_)) => Some(Call::TestSome),
        (other, _) => Some(other),
    };
    if let (Some(call), Some(engine)) = (call, &engine) {
        // Under MPI_THREAD_MULTIPLE, a wait lets other threads run.
        if matches!(call, Call::WaitAll | Call::WaitAny | Call::WaitSome) {
            crate::threads::block_until(engine, reqs, call == Call::WaitAll)
                .map_err(|e| vpml_error(comm, func, &e))?;
        }
        let kind = |k| engine.completion_raw(k, reqs);
        let completed = match call {
            Call::WaitAll => engine.wait_all_raw(reqs).map(|()| {
                done.extend((0..reqs.len()).filter(|&i| reqs[i].is_some()));
            }),
            Call::TestAll => kind(CompletionKind::TestAll).map(|v| done.extend(v)),
            Call::WaitAny => kind(CompletionKind::WaitAny).map(|v| done.extend(v)),
            Call::TestAny => kind(CompletionKind::TestAny).map(|v| done.extend(v)),
            Call::Test => engine
                .completion_raw(CompletionKind::Test, &reqs[..1])
                .map(|v| done.extend(v)),
            Call::WaitSome => kind(CompletionKind::WaitSome).map(|v| done.extend(v)),
            Call::TestSome => kind(CompletionKind::TestSome).map(|v| done.extend(v)),
        };
        completed.map_err(|e| vpml_error(comm, func, &e))?;
        if call == Call::TestAll && done.is_empty() {
            // Not all done: complete nothing.
            return Ok((
                Outcome::Completed {
                    count: 0,
                    error: None,
                },
                comm,
            ));
        }
    }
    // The all-calls (once everything is done), the some-calls and Test
    // also complete every operation on MPI_PROC_NULL.
    if first_proc_null.is_some()
        && matches!(
            call,
            Some(Call::WaitAll | Call::TestAll | Call::TestSome | Call::Test)
        )
    {
        done.extend((0..hs.len()).filter(|&i| reqs[i].is_none() && is_proc_null(hs[i])));
        done.sort_unstable();
    }
    let mut first_error = None;
    let mut count = 0;
    // Nonblocking collectives' last steps, and the generalized requests
    // whose status the application's function gives, run once the table
    // is free again (a user reduction may call MPI).
    let mut afters: smallvec::SmallVec<[crate::state::AfterCollective; 2]> =
        smallvec::SmallVec::new();
    let mut greqs = Vec::new();
    let finished = STATE.with(|s| {
        let mut s = s.borrow_mut();
        for &i in done.iter() {
            // Every completed request is in the table (looked up above).
            let Some(k) = request_slot(hs[i]) else {
                continue;
            };
            let status = match reqs[i] {
                Some(_) => {
                    let Some((e, a)) = s
                        .requests
                        .get(k)
                        .and_then(|e| Some((e, e.active.as_ref()?)))
                    else {
                        continue;
                    };
                    // In the numbering of the request's communicator,
                    // with the program's tag (a partitioned message
                    // travels under another).
                    let st = a.finish()?;
                    let st = match e.persistent() {
                        Some(crate::state::Persistent::Partitioned(p)) => st.with_tag(p.tag()),
                        _ => st,
                    };
                    // Received data of a non-contiguous datatype goes to
                    // the C buffer.
                    if let Some(m) = e.staging() {
                        m.finish(Some(st.len()));
                    }
                    if first_error.is_none() {
                        first_error = st.error().map(|e| (class_of(e), e.to_string()));
                    }
                    if st.error().is_none()
                        && let Some(after) = s.requests.get_mut(k).and_then(|e| e.take_after())
                    {
                        afters.push(after);
                    }
                    if let Some(g) = s.requests.get_mut(k).and_then(|e| e.take_greq()) {
                        retire(&mut s, k, &mut hs[i]);
                        greqs.push((i, g));
                        count += 1;
                        continue;
                    }
                    Some(st)
                }
                // Complete from the start: its own status, or (on
                // MPI_PROC_NULL) an empty one.
                None => s
                    .requests
                    .get(k)
                    .and_then(|e| e.ready())
                    .map(|(source, tag, len)| vpml::Status::of_send(source, tag, len)),
            };
            retire(&mut s, k, &mut hs[i]);
            each(i, &status_of(status.as_ref(), status.is_none()));
            count += 1;
        }
        Ok(())
    });
    finished.map_err(|e| vpml_error(comm, func, &e))?;
    for (i, g) in greqs {
        let st = g.finish();
        if st.error != MPI_SUCCESS && first_error.is_none() {
            first_error = Some((
                st.error,
                "a generalized request's function failed".to_string(),
            ));
        }
        each(i, &st);
    }
    for after in afters {
        if let Err(e) = after()
            && first_error.is_none()
        {
            first_error = Some(e);
        }
    }
    let outcome = Outcome::Completed {
        count,
        error: first_error,
    };
    Ok((outcome, comm))
}

/// `MPI_Wait`/`MPI_Waitall` when every request is null or a plain
/// operation in flight (not persistent, staged or on `MPI_PROC_NULL`): a
/// pass to find them, the engine's wait, and a pass that takes each
/// status and frees its entry. `None`, with nothing done, for any other
/// set of requests (the general path takes them). About 60 instructions
/// per request fewer than the general path in a window of `MPI_Isend`s
/// (callgrind, `mpi_bench --tests msgrate`), which is most of what a
/// completed send costs here.
fn wait_all_plain(
    reqs: &mut Vec<Option<RawRequest>>,
    func: &str,
    hs: &mut [Request],
    each: &mut dyn FnMut(usize, &MpiStatus),
) -> Option<Result<(Outcome, Comm), c_int>> {
    let looked_up = STATE.with(|s| {
        let s = s.borrow();
        let mut first = None;
        let mut engine = None;
        for &h in hs.iter() {
            if h == MPI_REQUEST_NULL {
                reqs.push(None);
                continue;
            }
            let e = request_slot(h).and_then(|k| s.requests.get(k))?;
            let a = e.active.as_ref().filter(|_| e.more.is_none())?;
            if first.is_none() {
                first = Some(e.comm);
            }
            if engine.is_none() {
                // Any request's communicator reaches the engine.
                engine = a.on().cloned();
            }
            reqs.push(Some(a.id()));
        }
        // Operations complete at start alone: any communicator reaches
        // the engine (whose wait tells the protocol).
        Some((first?, engine.or_else(|| engine_comm(&s))?))
    });
    let Some((comm, engine)) = looked_up else {
        reqs.clear();
        return None;
    };
    let waited =
        crate::threads::block_until(&engine, reqs, true).and_then(|()| engine.wait_all_raw(reqs));
    if let Err(e) = waited {
        return Some(Err(vpml_error(comm, func, &e)));
    }
    let mut first_error = None;
    let mut count = 0;
    let finished = STATE.with(|s| {
        let mut s = s.borrow_mut();
        for (i, r) in reqs.iter().enumerate() {
            let (Some(_), Some(k)) = (*r, request_slot(hs[i])) else {
                continue;
            };
            let Some(active) = s.requests.get(k).and_then(|e| e.active.as_ref()) else {
                continue;
            };
            if let &Active::AtStart { peer, tag, len, .. } = active {
                // Most requests of a window (no `more`, as checked above):
                // the status as it was kept, no error, the slot freed.
                s.requests.free(k);
                hs[i] = MPI_REQUEST_NULL;
                each(
                    i,
                    &super::status_fields(peer, tag, len as u64, false, MPI_SUCCESS),
                );
                count += 1;
                continue;
            }
            // In the numbering of the request's communicator.
            let st = active.finish()?;
            retire(&mut s, k, &mut hs[i]);
            if first_error.is_none() {
                first_error = st.error().map(|e| (class_of(e), e.to_string()));
            }
            each(i, &status_of(Some(&st), false));
            count += 1;
        }
        Ok(())
    });
    Some(match finished {
        Ok(()) => Ok((
            Outcome::Completed {
                count,
                error: first_error,
            },
            comm,
        )),
        Err(e) => Err(vpml_error(comm, func, &e)),
    })
}

/// Is `h` an operation on `MPI_PROC_NULL`?
fn is_proc_null(h: Request) -> bool {
    STATE.with(|s| {
        let s = s.borrow();
        request_slot(h)
            .and_then(|k| s.requests.get(k))
            .is_some_and(|e| e.proc_null)
    })
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
