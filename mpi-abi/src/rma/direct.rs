//! Windows every member maps: one-sided operations as loads and stores.
//!
//! When no protocol logs the job (`--protocol none`) and every member of a
//! window made by `MPI_Win_allocate` or `MPI_Win_allocate_shared` is on
//! one host, the window's memory is one file in `/dev/shm` that every
//! member maps ([`super::shared`]), as Open MPI's `osc/sm` does. An origin
//! then applies its operations to the target's memory itself — a put is a
//! copy, an accumulate a read, a combine and a write under the target's
//! accumulate lock — with no message and no help from the target, which
//! may be computing. Every operation is complete when its call returns, so
//! flushes only order memory.
//!
//! Each member has a [`Control`] block in the file, after the parts:
//! * its passive-target lock: a word holding the exclusive bit and the
//!   count of shared holders, taken and released by the origins;
//! * its accumulate lock, held while an accumulate reads and writes, so
//!   that accumulates to one target are atomic with each other (MPI's
//!   rule for accumulates of one predefined type).
//!
//! Fences are barriers; post/start/complete/wait travel as empty messages
//! on the window's communicator, as for other windows.
//!
//! Under a logging protocol no window is direct: loads and stores into
//! another process's memory pass no message, so no log could replay them.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::consts::*;

/// A member's control block in the window's file (one cache line each,
/// so that members' locks do not share one).
#[repr(C, align(64))]
pub(crate) struct Control {
    /// [`EXCLUSIVE`] while an origin holds the exclusive lock, plus one
    /// per origin holding (or trying for) a shared lock.
    lock: AtomicU64,
    /// 1 while an accumulate to this member reads and writes.
    accumulate: AtomicU32,
}

/// Bytes of the control blocks of `members` members.
pub(crate) fn control_bytes(members: usize) -> usize {
    members.saturating_mul(size_of::<Control>())
}

/// The lock word's bit for an exclusive holder.
const EXCLUSIVE: u64 = 1 << 63;

/// What a direct window knows beyond the window itself: where each
/// member's part and control block lie in this process's mapping.
pub(crate) struct Direct {
    /// The address of each member's part.
    bases: Vec<usize>,
    /// The first member's control block (`bases.len()` follow it).
    control: *const Control,
    /// The receives of each origin's end of access epoch, posted by
    /// `MPI_Win_post` and waited for by `MPI_Win_wait`/`_test`.
    pub completions: Vec<Request>,
}

impl Direct {
    /// A direct window over a mapping whose parts start at `bases`, and
    /// whose control blocks start at `control`.
    ///
    /// # Safety
    /// `control` points to `bases.len()` control blocks (zeroed when the
    /// file was made) in a mapping that lives as long as this value, and
    /// each base is the address of its member's part in that mapping.
    pub(crate) unsafe fn new(bases: Vec<usize>, control: *const Control) -> Direct {
        Direct {
            bases,
            control,
            completions: Vec::new(),
        }
    }

    /// The address of byte `at` of member `rank`'s part (the caller checked
    /// the operation's bytes lie in that part).
    pub(crate) fn at(&self, rank: usize, at: i64) -> *mut u8 {
        (self.bases[rank] as isize).wrapping_add(at as isize) as *mut u8
    }

    /// Member `rank`'s control block.
    fn control(&self, rank: usize) -> &Control {
        assert!(rank < self.bases.len(), "rank {rank} outside the window");
        // SAFETY: `new`'s contract: `bases.len()` blocks live in the
        // mapping as long as `self`; they are only used through atomics.
        unsafe { &*self.control.add(rank) }
    }

    /// A handle on member `rank`'s locks, usable without borrowing the
    /// window (waits call the library).
    pub(crate) fn locks(&self, rank: usize) -> Locks {
        Locks(self.control(rank))
    }
}

/// A member's locks. Valid while its window lives (the program may not
/// free a window while it waits on one of its locks).
#[derive(Clone, Copy)]
pub(crate) struct Locks(*const Control);

// SAFETY: a `Locks` only reaches its control block through atomics, which
// any thread may use; the block outlives it (see `Locks`).
unsafe impl Send for Locks {}
// SAFETY: as above.
unsafe impl Sync for Locks {}

impl Locks {
    fn get(&self) -> &Control {
        // SAFETY: made from a live window's control block (see `Locks`).
        unsafe { &*self.0 }
    }

    /// Take the passive-target lock, waiting until it is free (shared
    /// holders share it).
    pub(crate) fn lock(self, exclusive: bool) {
        let mut wait = Backoff::default();
        while !self.try_lock(exclusive) {
            wait.pause(true);
        }
    }

    fn try_lock(self, exclusive: bool) -> bool {
        let word = &self.get().lock;
        if exclusive {
            word.compare_exchange(0, EXCLUSIVE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        } else if word.fetch_add(1, Ordering::Acquire) & EXCLUSIVE == 0 {
            true
        } else {
            // An exclusive holder: take the count back and wait.
            word.fetch_sub(1, Ordering::Relaxed);
            false
        }
    }

    /// Let the passive-target lock go.
    pub(crate) fn unlock(self, exclusive: bool) {
        // Subtracted, not stored: shared lockers that found it exclusive
        // may still hold a count they are about to take back.
        let held = if exclusive { EXCLUSIVE } else { 1 };
        self.get().lock.fetch_sub(held, Ordering::Release);
    }

    /// Hold the accumulate lock until the guard drops.
    pub(crate) fn accumulating(self) -> Accumulating {
        let word = &self.get().accumulate;
        let mut wait = Backoff::default();
        while word
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Held for a copy and a combine only: no engine progress.
            wait.pause(false);
        }
        Accumulating(self)
    }
}

/// The accumulate lock of a member, held.
pub(crate) struct Accumulating(Locks);

impl Drop for Accumulating {
    fn drop(&mut self) {
        self.0.get().accumulate.store(0, Ordering::Release);
    }
}

/// (Exclusive lockers are not queued: a steady stream of shared lockers
/// can keep one waiting, in sleeps, as long as it lasts.)
///
/// Waiting for a lock another process holds: a few spins, then yields,
/// then sleeps growing to a millisecond (the holder may be descheduled
/// when ranks share cores, and a wait never spins without bound).
#[derive(Default)]
struct Backoff(u32);

impl Backoff {
    const SPINS: u32 = 32;
    const YIELDS: u32 = 64;
    const LONGEST_SLEEP_US: u64 = 1000;

    /// Wait a little longer than last time; with `progress`, let the
    /// engine and the other windows progress first (MPI's progress rule:
    /// a rank blocked here must not hold up the messages of others).
    fn pause(&mut self, progress: bool) {
        self.0 = self.0.saturating_add(1);
        if self.0 <= Self::SPINS {
            std::hint::spin_loop();
            return;
        }
        if progress {
            super::progress();
            crate::threads::poll_once();
        }
        if self.0 <= Self::SPINS + Self::YIELDS {
            std::thread::yield_now();
            return;
        }
        let step = (self.0 - Self::SPINS - Self::YIELDS).min(10);
        let us = (1u64 << step).min(Self::LONGEST_SLEEP_US);
        crate::threads::unlocked(|| std::thread::sleep(Duration::from_micros(us)));
    }
}

/// Copy the bytes of runs `src` (`off`, `len`) after `from` into runs
/// `dst` after `to`, in order; both hold as many bytes.
///
/// # Safety
/// Every run of `src` lies in readable memory `from` points into, every
/// run of `dst` in writable memory `to` points into. (They may overlap: a
/// rank may put from its own window into itself.)
pub(crate) unsafe fn copy_runs(
    to: *mut u8,
    dst: &[(i64, u64)],
    from: *const u8,
    src: &[(i64, u64)],
) {
    let (mut d, mut s) = (dst.iter().copied(), src.iter().copied());
    let (mut dr, mut sr) = (d.next(), s.next());
    while let (Some((doff, dlen)), Some((soff, slen))) = (dr, sr) {
        let n = dlen.min(slen);
        // SAFETY: the caller's contract; `n` bytes remain in both runs.
        unsafe {
            std::ptr::copy(
                from.wrapping_offset(soff as isize),
                to.wrapping_offset(doff as isize),
                n as usize,
            )
        };
        let step = n as i64;
        dr = if dlen > n {
            Some((doff + step, dlen - n))
        } else {
            d.next()
        };
        sr = if slen > n {
            Some((soff + step, slen - n))
        } else {
            s.next()
        };
    }
}

/// Copy the `data` bytes over the runs (`off`, `len`) after `at`, in order.
///
/// # Safety
/// Every run lies in the memory `at` points into; `data` holds the runs'
/// bytes together (it may overlap them: a rank may write from its own
/// window into itself).
pub(crate) unsafe fn write_runs(at: *mut u8, runs: &[(i64, u64)], data: &[u8]) {
    let mut pos = 0usize;
    for &(off, len) in runs {
        let len = len as usize;
        // SAFETY: the caller's contract.
        unsafe {
            std::ptr::copy(
                data.as_ptr().add(pos),
                at.wrapping_offset(off as isize),
                len,
            )
        };
        pos += len;
    }
}

/// Do `a_len` bytes at `a` and `b_len` bytes at `b` overlap?
pub(crate) fn overlap(a: *const u8, a_len: usize, b: *const u8, b_len: usize) -> bool {
    let (a, b) = (a as usize, b as usize);
    a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

/// The bytes of the runs (`off`, `len`) after `at`, in order.
///
/// # Safety
/// Every run lies in readable memory `at` points into.
pub(crate) unsafe fn read_runs(at: *const u8, runs: &[(i64, u64)], bytes: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes as usize);
    for &(off, len) in runs {
        // SAFETY: the caller's contract.
        out.extend_from_slice(unsafe {
            std::slice::from_raw_parts(at.wrapping_offset(off as isize), len as usize)
        });
    }
    out
}

/// Is `op` one an accumulate applies without reading (`MPI_REPLACE`), or
/// one that changes nothing (`MPI_NO_OP`)?
pub(crate) fn writes_only(op: Op) -> Option<bool> {
    match op {
        MPI_REPLACE => Some(true),
        MPI_NO_OP => Some(false),
        _ => None,
    }
}

/// Does no protocol log the job? Then windows whose members are all on
/// one host and whose memory MPI allocates are direct.
pub(crate) fn unlogged() -> bool {
    crate::state::world_comm().is_some_and(|w| w.protocol() == "none")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> Box<Control> {
        Box::new(Control {
            lock: AtomicU64::new(0),
            accumulate: AtomicU32::new(0),
        })
    }

    #[test]
    fn shared_holders_share_and_exclude_an_exclusive_one() {
        let c = block();
        let l = Locks(&*c);
        assert!(l.try_lock(false));
        assert!(l.try_lock(false));
        assert!(!l.try_lock(true));
        l.unlock(false);
        assert!(!l.try_lock(true));
        l.unlock(false);
        assert!(l.try_lock(true));
        assert!(!l.try_lock(false));
        assert!(!l.try_lock(true));
        // A failed shared attempt took its count back.
        l.unlock(true);
        assert_eq!(c.lock.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn accumulates_exclude_each_other_across_threads() {
        let c = block();
        let locks = Locks(&*c);
        // A read and a write apart, as an accumulate does: without the
        // lock, threads would lose each other's increments.
        let total = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        let _held = locks.accumulating();
                        let v = total.load(Ordering::Relaxed);
                        std::hint::black_box(());
                        total.store(v + 1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 40_000);
        assert_eq!(c.accumulate.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn runs_of_different_shapes_copy_in_order() {
        let src: Vec<u8> = (1..=12).collect();
        let mut dst = [0u8; 16];
        // Three runs of 4 into two of 6 (one crossing the other's seams).
        let from = [(0i64, 4u64), (4, 4), (8, 4)];
        let to = [(1i64, 6u64), (10, 6)];
        // SAFETY: the runs lie in `src` and `dst`.
        unsafe { copy_runs(dst.as_mut_ptr(), &to, src.as_ptr(), &from) };
        assert_eq!(dst, [0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 7, 8, 9, 10, 11, 12]);
    }

    #[test]
    fn runs_are_written_and_read_in_order() {
        let mut mem = [0u8; 16];
        let runs = [(1i64, 2u64), (8, 3)];
        // SAFETY: the runs lie in `mem`.
        unsafe { write_runs(mem.as_mut_ptr(), &runs, &[1, 2, 3, 4, 5]) };
        assert_eq!(mem[..11], [0, 1, 2, 0, 0, 0, 0, 0, 3, 4, 5]);
        // SAFETY: as above.
        let back = unsafe { read_runs(mem.as_ptr(), &runs, 5) };
        assert_eq!(back, [1, 2, 3, 4, 5]);
    }
}
