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
use crate::state::{error, vpml_error};

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

/// The reduction with `op` (`MPI_MAX` or `MPI_MIN`) of every member's
/// `mine` over `c` (handle `h`), waited for without the call lock. On an
/// intercommunicator one round gives each group the other's reduction; a
/// second hands each group its own, and the two combine alike in both.
fn reduce_u32(func: &str, h: Comm, c: &vpml::Comm, mine: u32, op: Op) -> Result<u32, c_int> {
    let theirs = allreduce_u32(func, h, mine, op)?;
    if !c.is_inter() {
        return Ok(theirs);
    }
    let ours = allreduce_u32(func, h, theirs, op)?;
    Ok(if op == MPI_MAX {
        theirs.max(ours)
    } else {
        theirs.min(ours)
    })
}

/// Agree with the other members of `c` (handle `h`; both groups of an
/// intercommunicator) on a block of `taken` new contexts, letting other
/// threads run meanwhile. Errors are reported (named after `func`) and
/// returned as codes.
fn agree(func: &str, h: Comm, c: &vpml::Comm, taken: u32) -> Result<u32, c_int> {
    agree_by(func, h, c, taken, |mine, op| {
        reduce_u32(func, h, c, mine, op)
    })
}

/// [`agree`] with `reduce(mine, op)` giving every member's reduction.
fn agree_by(
    func: &str,
    h: Comm,
    c: &vpml::Comm,
    taken: u32,
    mut reduce: impl FnMut(u32, Op) -> Result<u32, c_int>,
) -> Result<u32, c_int> {
    let me = {
        let mut a = lock();
        a.in_flight += 1;
        a.next_id += 1;
        a.next_id
    };
    let mut round: u32 = 0;
    let agreed = loop {
        let mine = c.take_context_block_of(taken);
        lock().held.push((me, mine, mine.saturating_add(taken)));
        let candidate = match reduce(mine, MPI_MAX) {
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
                .commit_context_block(candidate, taken)
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
        let all_free = reduce(u32::from(free), MPI_MIN);
        lock().held.retain(|&(id, _, _)| id != me);
        match all_free {
            Err(code) => break Err(code),
            Ok(1) => {
                let committed = c
                    .commit_context_block(candidate, taken)
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
    crate::threads::making_a_communicator();
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
    crate::threads::making_a_communicator();
    if !in_rounds(h) {
        return exclusive(|| c.dup()).map_err(|e| vpml_error(h, func, &e));
    }
    if c.is_inter() {
        let context = agree(func, h, c, vpml::Comm::contexts_per_intercommunicator())?;
        return c.inter_dup_on(context).map_err(|e| vpml_error(h, func, &e));
    }
    let context = agree(func, h, c, vpml::Comm::contexts_per_communicator())?;
    c.dup_on(context).map_err(|e| vpml_error(h, func, &e))
}

/// `MPI_Comm_create_group`'s communicator: `members` (world ranks) agree
/// among themselves, apart from the communicator's other traffic and
/// from other groups' agreements by `tag`; `None` for a process outside
/// the group.
pub(crate) fn create_group(
    func: &str,
    h: Comm,
    c: &vpml::Comm,
    members: &[usize],
    tag: c_int,
) -> Result<Option<vpml::Comm>, c_int> {
    crate::threads::making_a_communicator();
    if !in_rounds(h) || c.is_inter() {
        // (vpml's call refuses an intercommunicator, saying so.)
        return exclusive(|| c.create_group(members)).map_err(|e| vpml_error(h, func, &e));
    }
    let world = c.world_ranks();
    let ranks: Vec<usize> = members
        .iter()
        .map(|w| world.iter().position(|x| x == w))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            error(
                h,
                func,
                MPI_ERR_GROUP,
                "the group has a process outside the communicator",
            )
        })?;
    if !ranks.contains(&c.rank()) {
        return Ok(None);
    }
    let taken = vpml::Comm::contexts_per_communicator();
    let context = agree_by(func, h, c, taken, |mine, op| {
        group_reduce(func, h, c, &ranks, tag, mine, op)
    })?;
    c.create_group_on(members, context)
        .map_err(|e| vpml_error(h, func, &e))
}

/// The reduction with `op` of `mine` over the members `ranks` (of `c`)
/// alone: the first gathers and answers, by point-to-point messages in
/// the communicator's group space under `tag`, waited for without the
/// call lock.
fn group_reduce(
    func: &str,
    h: Comm,
    c: &vpml::Comm,
    ranks: &[usize],
    tag: c_int,
    mine: u32,
    op: Op,
) -> Result<u32, c_int> {
    use vpml::raw::TagSpace::Group;
    let fail = |e: vpml::Error| vpml_error(h, func, &e);
    let combine = |a: u32, b: u32| if op == MPI_MAX { a.max(b) } else { a.min(b) };
    let leader = ranks[0];
    // One word per member: what each sent (the leader's receives), or
    // mine and the answer. Should starting or waiting fail, transfers
    // already started may still write here: the words are then leaked,
    // never freed under them.
    let n = ranks.len().max(2);
    let words: *mut u32 = Box::into_raw(vec![0u32; n].into_boxed_slice()).cast();
    let at = |i: usize| words.wrapping_add(i).cast::<u8>();
    let word = |i: usize| {
        // SAFETY: `words` holds `n` > i words; a word is read only after
        // the transfer writing it completed.
        unsafe { words.add(i).read() }
    };
    let set = |i: usize, v: u32| {
        // SAFETY: as for `word`; no transfer uses the word meanwhile.
        unsafe { words.add(i).write(v) }
    };
    let wait = |reqs: &[Option<vpml::raw::RawRequest>]| -> Result<(), c_int> {
        crate::threads::block_until(c, reqs, true).map_err(fail)?;
        c.wait_all_raw(reqs).map_err(fail)
    };
    let run = || -> Result<u32, c_int> {
        if c.rank() != leader {
            set(0, mine);
            // SAFETY: `words` outlives the transfers (leaked on failure).
            let reqs = unsafe {
                [
                    Some(
                        c.isend_private_raw(Group, leader, tag, at(0), 4)
                            .map_err(fail)?,
                    ),
                    Some(
                        c.irecv_private_raw(Group, leader, tag, at(1), 4)
                            .map_err(fail)?,
                    ),
                ]
            };
            wait(&reqs)?;
            return Ok(word(1));
        }
        let mut reqs = Vec::with_capacity(ranks.len());
        for (i, &r) in ranks.iter().enumerate().skip(1) {
            // SAFETY: as above; each receive has its own word.
            reqs.push(Some(
                unsafe { c.irecv_private_raw(Group, r, tag, at(i), 4) }.map_err(fail)?,
            ));
        }
        wait(&reqs)?;
        let result = (1..ranks.len()).fold(mine, |a, i| combine(a, word(i)));
        set(0, result);
        let mut sends = Vec::with_capacity(ranks.len());
        for &r in &ranks[1..] {
            // SAFETY: as above.
            sends.push(Some(
                unsafe { c.isend_private_raw(Group, r, tag, at(0), 4) }.map_err(fail)?,
            ));
        }
        wait(&sends)?;
        Ok(result)
    };
    let r = run();
    if r.is_ok() {
        // SAFETY: made by `Box::into_raw` above; every transfer is done.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(words, n)) });
    }
    r
}

/// `MPI_Intercomm_create`'s communicator, made in rounds (see the module)
/// when other threads may call MPI meanwhile: the leaders swap their
/// groups' members through `peer` (by `tag`), each group learns the other
/// from its leader, and the context is agreed in rounds whose reductions
/// run in each group and are combined by the leaders.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(crate) fn intercomm_create(
    func: &str,
    h: Comm,
    c: &vpml::Comm,
    local_leader: usize,
    peer: Comm,
    peer_comm: Option<&vpml::Comm>,
    remote_leader: usize,
    tag: c_int,
) -> Result<vpml::Comm, c_int> {
    crate::threads::making_a_communicator();
    // Decided by the thread level alone, which both groups share (a
    // window over one group's communicator must not change the protocol
    // the two groups speak).
    if !crate::threads::multiple() {
        return exclusive(|| c.intercomm_create(local_leader, peer_comm, remote_leader, tag))
            .map_err(|e| vpml_error(h, func, &e));
    }
    let leads = c.rank() == local_leader;
    let root = c_int::try_from(local_leader).unwrap_or(c_int::MAX);
    let remote_leader = c_int::try_from(remote_leader).unwrap_or(-1);
    // The members of the other group, through the leaders: a length (0:
    // the leader failed), then the table.
    let local = c.world_ranks();
    let world_size = crate::state::world_comm().map_or(0, |w| w.size());
    let mine: Vec<u64> = local.iter().map(|&w| w as u64).collect();
    let mut theirs = Vec::new();
    let mut len = [0u64];
    if leads {
        let n = [mine.len() as u64];
        let fits = |n: u64| (1..=(world_size.saturating_sub(local.len()) as u64)).contains(&n);
        if sendrecv_u64(func, peer, remote_leader, tag, &n, &mut len).is_ok() && fits(len[0]) {
            theirs = vec![0u64; len[0] as usize];
            if sendrecv_u64(func, peer, remote_leader, tag, &mine, &mut theirs).is_err() {
                len[0] = 0;
            }
        } else {
            len[0] = 0;
        }
    }
    bcast_u64(func, h, &mut len, root)?;
    let failed = || {
        error(
            h,
            func,
            MPI_ERR_OTHER,
            "the leaders could not exchange their groups",
        )
    };
    if len[0] == 0 || len[0] > world_size as u64 {
        return Err(failed());
    }
    theirs.resize(len[0] as usize, 0);
    bcast_u64(func, h, &mut theirs, root)?;
    // Every member checks the table alike: world ranks, distinct, none
    // of this group.
    let remote: Vec<usize> = theirs.iter().map(|&w| w as usize).collect();
    let mut seen = vec![false; world_size];
    for &w in &remote {
        if w >= world_size || local.contains(&w) || std::mem::replace(&mut seen[w], true) {
            let why = format!(
                "the remote group's table names world rank {w} wrongly (outside the job, twice, or in this group)"
            );
            return Err(error(h, func, MPI_ERR_OTHER, &why));
        }
    }
    let taken = vpml::Comm::contexts_per_intercommunicator();
    // A leader whose swap fails tells its group so (u64::MAX), so no
    // member waits for an answer that never comes.
    const FAILED: u64 = u64::MAX;
    let context = agree_by(func, h, c, taken, |value, op| {
        let ours = allreduce_u32(func, h, value, op)?;
        let mut both = [u64::from(ours)];
        if leads {
            let mut other = [0u64];
            both[0] = match sendrecv_u64(func, peer, remote_leader, tag, &both, &mut other) {
                Ok(()) => {
                    let other = u32::try_from(other[0]).unwrap_or(u32::MAX);
                    u64::from(if op == MPI_MAX {
                        ours.max(other)
                    } else {
                        ours.min(other)
                    })
                }
                Err(_) => FAILED,
            };
        }
        bcast_u64(func, h, &mut both, root)?;
        match both[0] {
            FAILED => Err(failed()),
            v => Ok(u32::try_from(v).unwrap_or(u32::MAX)),
        }
    })?;
    c.intercomm_create_on(context, remote)
        .map_err(|e| vpml_error(h, func, &e))
}

/// Swap `send` for `recv` with rank `other` of `h` by `tag`, waited for
/// without the call lock.
fn sendrecv_u64(
    func: &str,
    h: Comm,
    other: c_int,
    tag: c_int,
    send: &[u64],
    recv: &mut [u64],
) -> Result<(), c_int> {
    let (sn, rn) = (send.len() as c_int, recv.len() as c_int);
    let start = |req| {
        // SAFETY: both buffers hold what the counts say and outlive the
        // wait below.
        unsafe {
            crate::p2p::MPI_Isendrecv(
                send.as_ptr().cast(),
                sn,
                MPI_UINT64_T,
                other,
                tag,
                recv.as_mut_ptr().cast(),
                rn,
                MPI_UINT64_T,
                other,
                tag,
                h,
                req,
            )
        }
    };
    // SAFETY: null is MPI_STATUS_IGNORE.
    match unsafe { crate::p2p::start_and_wait(func, start, std::ptr::null_mut()) } {
        MPI_SUCCESS => Ok(()),
        code => Err(code),
    }
}

/// `MPI_Bcast` of `buf` from `root` over `h`, waited for without the
/// call lock.
fn bcast_u64(func: &str, h: Comm, buf: &mut [u64], root: c_int) -> Result<(), c_int> {
    let n = buf.len() as c_int;
    let start = |req| {
        // SAFETY: `buf` holds `n` words and outlives the wait below.
        unsafe { crate::coll::MPI_Ibcast(buf.as_mut_ptr().cast(), n, MPI_UINT64_T, root, h, req) }
    };
    // SAFETY: null is MPI_STATUS_IGNORE.
    match unsafe { crate::p2p::start_and_wait(func, start, std::ptr::null_mut()) } {
        MPI_SUCCESS => Ok(()),
        code => Err(code),
    }
}

/// `MPI_Intercomm_merge`'s communicator.
pub(crate) fn merge(func: &str, h: Comm, c: &vpml::Comm, high: bool) -> Result<vpml::Comm, c_int> {
    crate::threads::making_a_communicator();
    if !in_rounds(h) || !c.is_inter() {
        return exclusive(|| c.merge(high)).map_err(|e| vpml_error(h, func, &e));
    }
    // Every member of a group passes the same `high`: one round gives
    // each group the other's.
    let their_high = allreduce_u32(func, h, u32::from(high), MPI_MAX)? == 1;
    let context = agree(func, h, c, vpml::Comm::contexts_per_communicator())?;
    c.merge_on(context, high, their_high)
        .map_err(|e| vpml_error(h, func, &e))
}

/// `MPI_Comm_split`'s communicator (`None`: `MPI_UNDEFINED` as color).
pub(crate) fn split(
    func: &str,
    h: Comm,
    c: &vpml::Comm,
    color: Option<u32>,
    key: i64,
) -> Result<Option<vpml::Comm>, c_int> {
    crate::threads::making_a_communicator();
    if !in_rounds(h) || c.is_inter() {
        return exclusive(|| c.split(color, key)).map_err(|e| vpml_error(h, func, &e));
    }
    let context = agree(func, h, c, vpml::Comm::contexts_per_communicator())?;
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
    crate::threads::making_a_communicator();
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
