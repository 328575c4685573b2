//! Synchronization: `MPI_Win_fence`; `MPI_Win_post`/`start`/`complete`/
//! `wait`/`test`; `MPI_Win_lock`/`unlock` (and `_all`), the flushes and
//! `MPI_Win_sync`. Every wait here serves the process's windows meanwhile.

use std::ffi::c_int;

use super::direct::Locks;
use super::origin::send_request;
use super::window::{drain, wait_all};
use super::wire::{self, Kind, TAG_COMPLETE, TAG_POST, TAG_REPLY};
use super::{Held, check, win_error, window_or_error, with_win};
use crate::consts::*;

/// Serve requests until `ready` holds for window `h`.
fn serve_until(h: Win, mut ready: impl FnMut(&super::Window) -> bool) {
    crate::threads::wait_until(|| {
        super::progress();
        with_win(h, |w| ready(w)).unwrap_or(true)
    });
}

/// Member `rank`'s locks, if window `h` is direct ([`super::direct`]).
fn direct_locks(h: Win, rank: usize) -> Option<Locks> {
    with_win(h, |w| Some(w.direct.as_ref()?.locks(rank))).flatten()
}

/// Is window `h` direct?
fn is_direct(h: Win) -> bool {
    with_win(h, |w| w.direct.is_some()).unwrap_or(false)
}

/// Order this process's loads and stores into a direct window's memory
/// before what follows (its operations are complete when they return).
fn memory_fence() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Let go of the lock held as `held` on member `rank` of a direct window.
///
/// A lock's release (`Locks::unlock`) already orders this process's
/// accesses to the window before it; only an unchecked epoch, which has
/// no lock word, needs the fence. (A fence before the release took half
/// of `MPI_Win_unlock`'s time in a 2-rank lock/`MPI_Fetch_and_op`/unlock
/// loop.)
fn release_direct(locks: Locks, held: Held) {
    match held {
        Held::Exclusive => locks.unlock(true),
        Held::Shared => locks.unlock(false),
        Held::Unchecked => memory_fence(),
    }
}

/// Post an empty receive from each of `ranks` with `tag` on `comm`.
fn expect_words(
    h: Win,
    func: &str,
    comm: Comm,
    ranks: &[usize],
    tag: c_int,
) -> Result<Vec<Request>, c_int> {
    ranks
        .iter()
        .map(|&r| expect_word(h, func, comm, r, tag))
        .collect()
}

/// Send an empty message with `tag` to each of `ranks` on `comm`, at once
/// (an empty send completes when it starts).
fn send_words(h: Win, func: &str, comm: Comm, ranks: &[usize], tag: c_int) -> Result<(), c_int> {
    for &r in ranks {
        // SAFETY: no bytes are sent.
        let rc =
            unsafe { crate::p2p::MPI_Send(std::ptr::null(), 0, MPI_BYTE, r as c_int, tag, comm) };
        check(h, func, rc, "telling a member")?;
    }
    Ok(())
}

/// Post an empty receive from `rank` with `tag` on `comm`.
fn expect_word(h: Win, func: &str, comm: Comm, rank: usize, tag: c_int) -> Result<Request, c_int> {
    let mut req: Request = MPI_REQUEST_NULL;
    // SAFETY: no bytes are received.
    let rc = unsafe {
        crate::p2p::MPI_Irecv(
            std::ptr::null_mut(),
            0,
            MPI_BYTE,
            rank as c_int,
            tag,
            comm,
            &mut req,
        )
    };
    check(h, func, rc, "hearing from a member").map(|()| req)
}

/// The window's communicator, or the error for an invalid handle.
fn comm_of(func: &str, h: Win) -> Result<Comm, c_int> {
    window_or_error(func, h)?;
    Ok(with_win(h, |w| w.comm).unwrap_or(MPI_COMM_NULL))
}

/// `MPI_Win_fence`: every request sent to this rank since the last fence
/// served, its own transfers done, then a barrier (so no request of the
/// next epoch is taken for one of this one).
fn fence(h: Win) -> Result<(), c_int> {
    let func = "MPI_Win_fence";
    let comm = comm_of(func, h)?;
    if is_direct(h) {
        // Every operation of the epoch is done: order memory, and meet.
        memory_fence();
        // SAFETY: a valid communicator.
        let rc = unsafe { crate::coll::MPI_Barrier(comm) };
        memory_fence();
        return check(h, func, rc, "meeting the other members");
    }
    let issued =
        with_win(h, |w| std::mem::replace(&mut w.issued, vec![0; w.size])).unwrap_or_default();
    let mut expected: u64 = 0;
    // SAFETY: `issued` holds one count per member; `expected` one.
    let rc = unsafe {
        crate::coll::MPI_Reduce_scatter_block(
            issued.as_ptr().cast(),
            (&mut expected as *mut u64).cast(),
            1,
            MPI_UINT64_T,
            MPI_SUM,
            comm,
        )
    };
    check(h, func, rc, "counting the operations of the epoch")?;
    serve_until(h, |w| w.served >= expected);
    with_win(h, |w| w.served -= expected);
    drain(h, func)?;
    // SAFETY: a valid communicator.
    let rc = unsafe { crate::coll::MPI_Barrier(comm) };
    check(h, func, rc, "meeting the other members")
}

/// The ranks in the window of the members of `group`.
fn ranks_of(func: &str, h: Win, group: Group) -> Result<Vec<usize>, c_int> {
    let comm = comm_of(func, h)?;
    let mut n: c_int = 0;
    // SAFETY: an int pointer to a local.
    let rc = unsafe { crate::group::MPI_Group_size(group, &mut n) };
    check(h, func, rc, "reading the group")?;
    let mut mine: Group = MPI_GROUP_NULL;
    // SAFETY: as above.
    unsafe { crate::group::MPI_Comm_group(comm, &mut mine) };
    let from: Vec<c_int> = (0..n).collect();
    let mut to = vec![MPI_UNDEFINED; from.len()];
    // SAFETY: `from` and `to` hold `n` ranks.
    let rc = unsafe {
        crate::group::MPI_Group_translate_ranks(group, n, from.as_ptr(), mine, to.as_mut_ptr())
    };
    // SAFETY: the group made above.
    unsafe { crate::group::MPI_Group_free(&mut mine) };
    check(h, func, rc, "reading the group")?;
    to.into_iter()
        .map(|r| {
            usize::try_from(r).map_err(|_| {
                win_error(
                    h,
                    func,
                    MPI_ERR_GROUP,
                    "a member of the group is not in the window",
                )
            })
        })
        .collect()
}

/// Send control request `kind` to each of `targets` and wait for each's
/// acknowledgement, with the replies of earlier operations.
fn ask_all(h: Win, func: &str, targets: &[(usize, Kind, c_int)]) -> Result<(), c_int> {
    let comm = comm_of(func, h)?;
    let mut acks = Vec::with_capacity(targets.len());
    for &(rank, kind, arg) in targets {
        send_request(h, func, comm, rank, wire::control(kind, arg), false)?;
        acks.push(expect_word(h, func, comm, rank, TAG_REPLY)?);
    }
    super::window::await_given(h, func)?;
    let mut replies = with_win(h, |w| std::mem::take(&mut w.replies)).unwrap_or_default();
    replies.append(&mut acks);
    wait_all(h, func, &mut replies)
}

/// A target rank argument, checked; `None` for `MPI_PROC_NULL`.
fn target_rank(func: &str, h: Win, rank: c_int) -> Result<Option<usize>, c_int> {
    let size = with_win(h, |w| w.size)
        .ok_or_else(|| window_or_error(func, h).err().unwrap_or(MPI_ERR_WIN))?;
    if rank == MPI_PROC_NULL {
        return Ok(None);
    }
    usize::try_from(rank)
        .ok()
        .filter(|&r| r < size)
        .map(Some)
        .ok_or_else(|| {
            win_error(
                h,
                func,
                MPI_ERR_RANK,
                &format!("invalid target rank {rank}"),
            )
        })
}

/// `MPI_Win_lock`.
fn lock(h: Win, kind: c_int, rank: c_int, assert: c_int) -> Result<(), c_int> {
    let func = "MPI_Win_lock";
    let Some(rank) = target_rank(func, h, rank)? else {
        return Ok(());
    };
    let held = match kind {
        MPI_LOCK_EXCLUSIVE => Held::Exclusive,
        MPI_LOCK_SHARED => Held::Shared,
        _ => {
            return Err(win_error(
                h,
                func,
                MPI_ERR_LOCKTYPE,
                &format!("invalid lock type {kind}"),
            ));
        }
    };
    if with_win(h, |w| w.locks.contains(rank)).unwrap_or(false) {
        return Err(win_error(
            h,
            func,
            MPI_ERR_RMA_SYNC,
            &format!("rank {rank} is already locked"),
        ));
    }
    if assert & MPI_MODE_NOCHECK != 0 {
        with_win(h, |w| w.locks.insert(rank, Held::Unchecked));
        return Ok(());
    }
    match direct_locks(h, rank) {
        Some(locks) => locks.lock(held == Held::Exclusive),
        None => ask_all(h, func, &[(rank, Kind::Lock, kind)])?,
    }
    with_win(h, |w| w.locks.insert(rank, held));
    Ok(())
}

/// What releasing a lock held as `held` sends.
fn release_of(held: Held) -> (Kind, c_int) {
    match held {
        Held::Exclusive => (Kind::Unlock, MPI_LOCK_EXCLUSIVE),
        Held::Shared => (Kind::Unlock, MPI_LOCK_SHARED),
        Held::Unchecked => (Kind::Flush, 0),
    }
}

/// `MPI_Win_unlock`.
fn unlock(h: Win, rank: c_int) -> Result<(), c_int> {
    let func = "MPI_Win_unlock";
    let Some(rank) = target_rank(func, h, rank)? else {
        return Ok(());
    };
    let Some(held) = with_win(h, |w| w.locks.remove(rank)).flatten() else {
        return Err(win_error(
            h,
            func,
            MPI_ERR_RMA_SYNC,
            &format!("rank {rank} is not locked"),
        ));
    };
    if let Some(locks) = direct_locks(h, rank) {
        release_direct(locks, held);
        return Ok(());
    }
    let (kind, arg) = release_of(held);
    ask_all(h, func, &[(rank, kind, arg)])
}

/// `MPI_Win_lock_all`: a shared lock on every member.
fn lock_all(h: Win, assert: c_int) -> Result<(), c_int> {
    let func = "MPI_Win_lock_all";
    let size = with_win(h, |w| w.size)
        .ok_or_else(|| window_or_error(func, h).err().unwrap_or(MPI_ERR_WIN))?;
    if with_win(h, |w| !w.locks.is_empty()).unwrap_or(false) {
        return Err(win_error(
            h,
            func,
            MPI_ERR_RMA_SYNC,
            "a lock is already held",
        ));
    }
    let held = if assert & MPI_MODE_NOCHECK != 0 {
        Held::Unchecked
    } else {
        Held::Shared
    };
    if held == Held::Shared && is_direct(h) {
        for r in 0..size {
            if let Some(locks) = direct_locks(h, r) {
                locks.lock(false);
            }
        }
    } else if held == Held::Shared {
        let all: Vec<_> = (0..size)
            .map(|r| (r, Kind::Lock, MPI_LOCK_SHARED))
            .collect();
        ask_all(h, func, &all)?;
    }
    with_win(h, |w| (0..size).for_each(|r| w.locks.insert(r, held)));
    Ok(())
}

/// `MPI_Win_unlock_all`.
fn unlock_all(h: Win) -> Result<(), c_int> {
    let func = "MPI_Win_unlock_all";
    let held = with_win(h, |w| w.locks.take_all())
        .ok_or_else(|| window_or_error(func, h).err().unwrap_or(MPI_ERR_WIN))?;
    if held.is_empty() {
        return Err(win_error(h, func, MPI_ERR_RMA_SYNC, "no lock is held"));
    }
    if is_direct(h) {
        for (r, held) in held {
            if let Some(locks) = direct_locks(h, r) {
                release_direct(locks, held);
            }
        }
        return Ok(());
    }
    let all: Vec<_> = held
        .into_iter()
        .map(|(r, held)| {
            let (k, a) = release_of(held);
            (r, k, a)
        })
        .collect();
    ask_all(h, func, &all)
}

/// `MPI_Win_flush` (`rank`) and `MPI_Win_flush_all` (`None`): every
/// operation to the target(s) done there.
fn flush(h: Win, func: &str, rank: Option<c_int>) -> Result<(), c_int> {
    let targets: Vec<usize> = match rank {
        Some(r) => match target_rank(func, h, r)? {
            Some(r) if with_win(h, |w| w.locks.contains(r)).unwrap_or(false) => vec![r],
            Some(r) => {
                let why = format!("rank {r} is not locked");
                return Err(win_error(h, func, MPI_ERR_RMA_SYNC, &why));
            }
            None => return Ok(()),
        },
        None => with_win(h, |w| w.locks.ranks()).unwrap_or_default(),
    };
    if is_direct(h) {
        // Every operation is done when it returns.
        memory_fence();
        return Ok(());
    }
    let all: Vec<_> = targets.into_iter().map(|r| (r, Kind::Flush, 0)).collect();
    ask_all(h, func, &all)
}

/// `MPI_Win_flush_local` and `_local_all`: the origin's buffers are free
/// again (puts copied theirs already; gets' replies have come).
fn flush_local(h: Win, func: &str) -> Result<(), c_int> {
    window_or_error(func, h)?;
    super::window::await_given(h, func)?;
    let mut replies = with_win(h, |w| std::mem::take(&mut w.replies)).unwrap_or_default();
    wait_all(h, func, &mut replies)
}

/// `MPI_Win_post`: tell each origin of `group` it may start.
fn post(h: Win, group: Group, assert: c_int) -> Result<(), c_int> {
    let func = "MPI_Win_post";
    let origins = ranks_of(func, h, group)?;
    let comm = comm_of(func, h)?;
    let direct = is_direct(h);
    if assert & MPI_MODE_NOCHECK == 0 && direct {
        // Nothing reaps a direct window's sends: empty words, sent at once.
        send_words(h, func, comm, &origins, TAG_POST)?;
    } else if assert & MPI_MODE_NOCHECK == 0 {
        for &o in &origins {
            let mut req: Request = MPI_REQUEST_NULL;
            // SAFETY: no bytes are sent.
            let rc = unsafe {
                crate::p2p::MPI_Isend(
                    std::ptr::null(),
                    0,
                    MPI_BYTE,
                    o as c_int,
                    TAG_POST,
                    comm,
                    &mut req,
                )
            };
            check(h, func, rc, "telling an origin")?;
            with_win(h, |w| w.sends.push((req, Vec::new())));
        }
    }
    if direct {
        // No `Complete` request will come: each origin's word instead.
        let words = expect_words(h, func, comm, &origins, TAG_COMPLETE)?;
        with_win(h, |w| {
            if let Some(d) = &mut w.direct {
                d.completions = words;
            }
        });
    }
    with_win(h, |w| w.exposure = Some(origins));
    Ok(())
}

/// `MPI_Win_start`: wait until each target of `group` posted.
fn start(h: Win, group: Group, assert: c_int) -> Result<(), c_int> {
    let func = "MPI_Win_start";
    let targets = ranks_of(func, h, group)?;
    let comm = comm_of(func, h)?;
    if assert & MPI_MODE_NOCHECK == 0 {
        let mut posts = expect_words(h, func, comm, &targets, TAG_POST)?;
        wait_all(h, func, &mut posts)?;
    }
    with_win(h, |w| w.access = Some(targets));
    Ok(())
}

/// `MPI_Win_complete`: end the access epoch; its operations were sent
/// before the `Complete` each target waits for.
fn complete(h: Win) -> Result<(), c_int> {
    let func = "MPI_Win_complete";
    let comm = comm_of(func, h)?;
    let Some(targets) = with_win(h, |w| w.access.take()).flatten() else {
        return Err(win_error(
            h,
            func,
            MPI_ERR_RMA_SYNC,
            "no access epoch was started",
        ));
    };
    if is_direct(h) {
        // The operations are done: tell each target.
        memory_fence();
        send_words(h, func, comm, &targets, TAG_COMPLETE)?;
        return Ok(());
    }
    for t in targets {
        send_request(h, func, comm, t, wire::control(Kind::Complete, 0), false)?;
    }
    flush_local(h, func)
}

/// Has every origin of the exposure epoch completed? Then end it.
fn exposure_done(w: &mut super::Window) -> bool {
    let Some(origins) = &w.exposure else {
        return true;
    };
    if origins.iter().any(|&o| w.completed[o] == 0) {
        return false;
    }
    for &o in origins {
        w.completed[o] -= 1;
    }
    w.exposure = None;
    true
}

/// `MPI_Win_test` on a direct window: has each origin's word come? Then
/// the exposure epoch ends.
fn test_direct(h: Win, flag: *mut c_int) -> c_int {
    let mut words = with_win(h, |w| {
        w.direct
            .as_mut()
            .map(|d| std::mem::take(&mut d.completions))
    })
    .flatten()
    .unwrap_or_default();
    let mut done: c_int = 1;
    if !words.is_empty() {
        // SAFETY: `words` holds that many requests; statuses are ignored.
        let rc = unsafe {
            crate::p2p::MPI_Testall(
                words.len() as c_int,
                words.as_mut_ptr(),
                &mut done,
                std::ptr::null_mut(),
            )
        };
        if rc != MPI_SUCCESS {
            return win_error(h, "MPI_Win_test", rc, "hearing from the origins");
        }
    }
    if done != 0 {
        memory_fence();
        with_win(h, |w| w.exposure = None);
    } else {
        with_win(h, |w| {
            if let Some(d) = &mut w.direct {
                d.completions = words;
            }
        });
    }
    // SAFETY: an int pointer (caller contract).
    unsafe { crate::state::put(flag, done) };
    MPI_SUCCESS
}

export! {
    fn MPI_Win_fence / PMPI_Win_fence(_assert: c_int, h: Win) -> c_int {
        fence(h).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_lock / PMPI_Win_lock(kind: c_int, rank: c_int, assert: c_int, h: Win) -> c_int {
        lock(h, kind, rank, assert).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, h: Win) -> c_int {
        unlock(h, rank).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_lock_all / PMPI_Win_lock_all(assert: c_int, h: Win) -> c_int {
        lock_all(h, assert).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_unlock_all / PMPI_Win_unlock_all(h: Win) -> c_int {
        unlock_all(h).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_flush / PMPI_Win_flush(rank: c_int, h: Win) -> c_int {
        flush(h, "MPI_Win_flush", Some(rank)).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_flush_all / PMPI_Win_flush_all(h: Win) -> c_int {
        flush(h, "MPI_Win_flush_all", None).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_flush_local / PMPI_Win_flush_local(_rank: c_int, h: Win) -> c_int {
        flush_local(h, "MPI_Win_flush_local").err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(h: Win) -> c_int {
        flush_local(h, "MPI_Win_flush_local_all").err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_sync / PMPI_Win_sync(h: Win) -> c_int {
        // One copy of memory: nothing to reconcile but the compiler's and
        // the processor's ordering.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        window_or_error("MPI_Win_sync", h).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_post / PMPI_Win_post(group: Group, assert: c_int, h: Win) -> c_int {
        post(h, group, assert).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_start / PMPI_Win_start(group: Group, assert: c_int, h: Win) -> c_int {
        start(h, group, assert).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_complete / PMPI_Win_complete(h: Win) -> c_int {
        complete(h).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_wait / PMPI_Win_wait(h: Win) -> c_int {
        if let Err(code) = window_or_error("MPI_Win_wait", h) {
            return code;
        }
        if with_win(h, |w| w.exposure.is_none()).unwrap_or(true) {
            return win_error(h, "MPI_Win_wait", MPI_ERR_RMA_SYNC, "no exposure epoch was posted");
        }
        if is_direct(h) {
            let mut words = with_win(h, |w| w.direct.as_mut().map(|d| std::mem::take(&mut d.completions))).flatten().unwrap_or_default();
            if let Err(code) = wait_all(h, "MPI_Win_wait", &mut words) {
                return code;
            }
            memory_fence();
            with_win(h, |w| w.exposure = None);
            return MPI_SUCCESS;
        }
        serve_until(h, |w| w.exposure.as_ref().is_none_or(|o| o.iter().all(|&r| w.completed[r] > 0)));
        with_win(h, exposure_done);
        MPI_SUCCESS
    }

    fn MPI_Win_test / PMPI_Win_test(h: Win, flag: *mut c_int) -> c_int {
        if let Err(code) = window_or_error("MPI_Win_test", h) {
            return code;
        }
        if is_direct(h) {
            return test_direct(h, flag);
        }
        crate::threads::poll_once();
        super::progress();
        let done = with_win(h, exposure_done).unwrap_or(true);
        // SAFETY: an int pointer (caller contract).
        unsafe { crate::state::put(flag, c_int::from(done)) };
        MPI_SUCCESS
    }
}
