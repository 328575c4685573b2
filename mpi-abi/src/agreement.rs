//! Making communicators while other threads call MPI
//! (`MPI_THREAD_MULTIPLE`).
//!
//! A new communicator's context is agreed by its members: each proposes
//! its next free context and the largest proposal wins
//! (`vpml::Comm::context_proposal`). Made by vpml's blocking calls, that
//! agreement would hold the call lock while it waits for the other
//! members — and a thread of another rank that those members wait for
//! might itself be waiting for this process in another communicator's
//! agreement. Under `MPI_THREAD_MULTIPLE` the library runs the agreement
//! itself, as rounds of `MPI_Iallreduce` waited for without the lock.
//!
//! Two agreements of one process must not run over its contexts at once
//! (both would propose the same one). So one agreement at a time owns the
//! process's contexts and proposes; any other contributes "busy" (the
//! largest value), which makes its whole round fail, and tries again. The
//! agreement on the communicator with the lowest context, among those
//! waiting in a process, owns them first: the lowest one waiting
//! anywhere is first at every member, so it succeeds within a round or
//! two, and the others after it (MPICH's context-id scheme, with a
//! largest-value reduction in place of a bit mask).

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, PoisonError};

use crate::consts::*;
use crate::state::vpml_error;

/// Agreements under way in this process, by the context of the
/// communicator they run on, and the one that owns the contexts.
struct Agreements {
    waiting: Vec<u32>,
    owner: Option<u32>,
}

static AGREEMENTS: Mutex<Agreements> = Mutex::new(Agreements {
    waiting: Vec::new(),
    owner: None,
});

/// A contribution that makes a round fail.
const BUSY: u32 = u32::MAX;

/// Agree with the other members of `c` (handle `h`) on a new context,
/// letting other threads run meanwhile. Errors are reported (named after
/// `func`) and returned as codes.
fn agree(func: &str, h: Comm, c: &vpml::Comm) -> Result<u32, c_int> {
    let me = c.context_id();
    lock().waiting.push(me);
    let agreed = loop {
        let own = {
            let mut a = lock();
            let first = a.waiting.iter().min() == Some(&me);
            let own = a.owner.is_none() && first;
            if own {
                a.owner = Some(me);
            }
            own
        };
        let proposal: u32 = if own { c.context_proposal() } else { BUSY };
        let mut result: u32 = 0;
        let start = |req| {
            // SAFETY: one unsigned int each way, both alive until the
            // wait below returns.
            unsafe {
                crate::coll::MPI_Iallreduce(
                    (&raw const proposal).cast::<c_void>(),
                    (&raw mut result).cast::<c_void>(),
                    1,
                    MPI_UNSIGNED,
                    MPI_MAX,
                    h,
                    req,
                )
            }
        };
        // SAFETY: null is MPI_STATUS_IGNORE.
        let r = unsafe { crate::p2p::start_and_wait(func, start, std::ptr::null_mut()) };
        if own {
            lock().owner = None;
        }
        if r != MPI_SUCCESS {
            break Err(r);
        }
        if result != BUSY {
            break c
                .commit_context(result)
                .map_err(|e| vpml_error(h, func, &e));
        }
        // Some member's contexts were busy: everyone tries again.
    };
    let mut a = lock();
    if let Some(i) = a.waiting.iter().position(|&w| w == me) {
        a.waiting.swap_remove(i);
    }
    agreed
}

fn lock() -> std::sync::MutexGuard<'static, Agreements> {
    AGREEMENTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Run `f`, a vpml call that agrees on contexts itself (blocking, with
/// the call lock held), once no agreement of another thread owns this
/// process's contexts.
pub(crate) fn exclusive<R>(f: impl FnOnce() -> R) -> R {
    if !crate::threads::multiple() {
        return f();
    }
    crate::threads::wait_until(|| lock().owner.is_none());
    // The call lock is held from here: no other thread can start one.
    f()
}

/// `MPI_Comm_dup`'s communicator.
pub(crate) fn dup(func: &str, h: Comm, c: &vpml::Comm) -> Result<vpml::Comm, c_int> {
    if !crate::threads::multiple() || c.is_inter() {
        return exclusive(|| c.dup()).map_err(|e| vpml_error(h, func, &e));
    }
    let context = agree(func, h, c)?;
    c.dup_on(context).map_err(|e| vpml_error(h, func, &e))
}

/// `MPI_Comm_split`'s communicator (`None`: `MPI_UNDEFINED` as color).
pub(crate) fn split(
    func: &str,
    h: Comm,
    c: &vpml::Comm,
    color: Option<u32>,
    key: i64,
) -> Result<Option<vpml::Comm>, c_int> {
    if !crate::threads::multiple() || c.is_inter() {
        return exclusive(|| c.split(color, key)).map_err(|e| vpml_error(h, func, &e));
    }
    let context = agree(func, h, c)?;
    let all = allgather(func, h, c, &vpml::split_entry(color, key))?;
    c.split_on(context, &all, color)
        .map_err(|e| vpml_error(h, func, &e))
}

/// Every member's `mine` (of one length), in rank order: under
/// `MPI_THREAD_MULTIPLE` waited for without the call lock.
pub(crate) fn allgather(
    func: &str,
    h: Comm,
    c: &vpml::Comm,
    mine: &[u64],
) -> Result<Vec<u64>, c_int> {
    let mut all = vec![0u64; mine.len() * c.size()];
    if !crate::threads::multiple() {
        c.allgather(mine, &mut all)
            .map_err(|e| vpml_error(h, func, &e))?;
        return Ok(all);
    }
    let n = mine.len() as c_int;
    let start = |req| {
        // SAFETY: `mine` and `all` hold what the counts say and outlive
        // the wait below.
        unsafe {
            crate::coll::MPI_Iallgather(
                mine.as_ptr().cast(),
                n,
                MPI_UINT64_T,
                all.as_mut_ptr().cast(),
                n,
                MPI_UINT64_T,
                h,
                req,
            )
        }
    };
    // SAFETY: null is MPI_STATUS_IGNORE.
    match unsafe { crate::p2p::start_and_wait(func, start, std::ptr::null_mut()) } {
        MPI_SUCCESS => Ok(all),
        code => Err(code),
    }
}
