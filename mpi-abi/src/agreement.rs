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
//! Several agreements may run in one process at once (threads make
//! communicators on different communicators, in any order across
//! processes), so none may wait for another. Each round of an agreement:
//!
//! 1. each member holds a block of its contexts for this agreement alone
//!    (its next free block, which no later proposal of the process
//!    overlaps) and proposes its start; the largest proposal `r` is the
//!    candidate (`MPI_Iallreduce`, `MPI_MAX`);
//! 2. each member says whether the candidate block is free there: it must
//!    not overlap a block another agreement in flight holds or checked, or
//!    one committed while this agreement was in flight (everything
//!    committed before lies below the proposal); a member that says yes
//!    holds the candidate block too, until the round ends;
//! 3. if every member said yes (`MPI_Iallreduce`, `MPI_MIN`), the block is
//!    committed; otherwise the round is repeated with new blocks, after a
//!    short pause that differs between threads.
//!
//! Two agreements never commit overlapping blocks at a common member: the
//! second to check there sees the first one's hold (or its commit) and
//! says no. None waits for another, so one that its members all reach
//! completes; two that keep checking each other's blocks at the same
//! moment are parted by the pauses.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::consts::*;
use crate::state::vpml_error;

/// The agreements in flight in this process.
struct Agreements {
    /// Blocks of contexts held by agreements in flight: (agreement,
    /// first, end).
    held: Vec<(u64, u32, u32)>,
    /// Blocks committed while some agreement was in flight.
    recent: Vec<(u32, u32)>,
    /// Agreements in flight.
    in_flight: usize,
    /// The next agreement's number.
    next_id: u64,
}

/// See [`Agreements`].
static AGREEMENTS: Mutex<Agreements> = Mutex::new(Agreements {
    held: Vec::new(),
    recent: Vec::new(),
    in_flight: 0,
    next_id: 0,
});

/// The agreements' table (every access is also under the call lock).
fn lock() -> std::sync::MutexGuard<'static, Agreements> {
    AGREEMENTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One `MPI_Iallreduce` of an unsigned int over `h`, waited for without
/// the call lock.
fn allreduce_u32(func: &str, h: Comm, mine: u32, op: Op) -> Result<u32, c_int> {
    let mut result: u32 = 0;
    let start = |req| {
        // SAFETY: one unsigned int each way, both alive until the wait
        // below returns.
        unsafe {
            crate::coll::MPI_Iallreduce(
                (&raw const mine).cast::<c_void>(),
                (&raw mut result).cast::<c_void>(),
                1,
                MPI_UNSIGNED,
                op,
                h,
                req,
            )
        }
    };
    // SAFETY: null is MPI_STATUS_IGNORE.
    match unsafe { crate::p2p::start_and_wait(func, start, std::ptr::null_mut()) } {
        MPI_SUCCESS => Ok(result),
        code => Err(code),
    }
}

/// Agree with the other members of `c` (handle `h`) on a new context,
/// letting other threads run meanwhile. Errors are reported (named after
/// `func`) and returned as codes.
fn agree(func: &str, h: Comm, c: &vpml::Comm) -> Result<u32, c_int> {
    let taken = vpml::Comm::contexts_per_communicator();
    let me = {
        let mut a = lock();
        a.in_flight += 1;
        a.next_id += 1;
        a.next_id
    };
    let mut round: u32 = 0;
    let agreed = loop {
        let mine = c.take_context_block();
        lock().held.push((me, mine, mine.saturating_add(taken)));
        let candidate = match allreduce_u32(func, h, mine, MPI_MAX) {
            Ok(r) => r,
            Err(code) => {
                lock().held.retain(|&(id, _, _)| id != me);
                break Err(code);
            }
        };
        let end = candidate.saturating_add(taken);
        if end >= u32::MAX - 2 {
            // Every member sees the same candidate: all fail alike.
            lock().held.retain(|&(id, _, _)| id != me);
            break c
                .commit_context(candidate)
                .map_err(|e| vpml_error(h, func, &e));
        }
        let free = {
            let mut a = lock();
            let overlaps = |&(first, last): &(u32, u32)| first < end && candidate < last;
            let free = !a
                .held
                .iter()
                .any(|&(id, f, l)| id != me && overlaps(&(f, l)))
                && !a.recent.iter().any(overlaps);
            if free {
                a.held.push((me, candidate, end));
            }
            free
        };
        let all_free = allreduce_u32(func, h, u32::from(free), MPI_MIN);
        lock().held.retain(|&(id, _, _)| id != me);
        match all_free {
            Err(code) => break Err(code),
            Ok(1) => {
                let committed = c
                    .commit_context(candidate)
                    .map_err(|e| vpml_error(h, func, &e));
                let mut a = lock();
                if committed.is_ok() && a.in_flight > 1 {
                    a.recent.push((candidate, end));
                }
                break committed;
            }
            Ok(_) => {
                // A member's block was held by another agreement: pause
                // (differently in each thread and round) and try again.
                round = round.saturating_add(1);
                let pause = Duration::from_micros(u64::from(jitter(me, round)));
                crate::threads::without_lock(|| std::thread::sleep(pause));
            }
        }
    };
    let mut a = lock();
    a.in_flight -= 1;
    if a.in_flight == 0 {
        a.recent.clear();
    }
    agreed
}

/// A pause before round `round` of agreement `id` is repeated: up to
/// 0.25 ms doubled each round (at most 32 ms), at a point drawn from the
/// process, the agreement and the round, so that two agreements that keep
/// failing each other — mirrored at two processes — part.
fn jitter(id: u64, round: u32) -> u32 {
    let mut x = id.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ u64::from(round).wrapping_mul(0xbf58_476d_1ce4_e5b9)
        ^ u64::from(std::process::id()).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    let span = 256u64 << round.min(7);
    (x % span) as u32
}

/// Run `f`, a vpml call that agrees on contexts itself (blocking, with
/// the call lock held, so no other thread runs until it returns), once no
/// agreement of another thread is in flight.
pub(crate) fn exclusive<R>(f: impl FnOnce() -> R) -> R {
    if !crate::threads::multiple() {
        return f();
    }
    crate::threads::wait_until(|| lock().in_flight == 0);
    // The call lock is held from here: no other thread can start one.
    f()
}

/// Are communicators made from `h` agreed in rounds waited for in the
/// library — under `MPI_THREAD_MULTIPLE` (other threads call meanwhile),
/// or when every member shares a live window with this process (requests
/// are served meanwhile; see [`crate::rma::covers`])? Every member decides
/// alike.
fn in_rounds(h: Comm) -> bool {
    crate::threads::multiple() || crate::rma::covers(h)
}

/// `MPI_Comm_dup`'s communicator.
pub(crate) fn dup(func: &str, h: Comm, c: &vpml::Comm) -> Result<vpml::Comm, c_int> {
    if !in_rounds(h) || c.is_inter() {
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
    if !in_rounds(h) || c.is_inter() {
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
    if !in_rounds(h) {
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
