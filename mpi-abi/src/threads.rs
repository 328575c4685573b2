//! Threads: the call lock, and waiting without it under
//! `MPI_THREAD_MULTIPLE`.
//!
//! Under `MPI_THREAD_SERIALIZED` and `MPI_THREAD_MULTIPLE` every call takes
//! one process-wide lock (`enter`), so one thread at a time touches the
//! library's state and the engine. Under `MPI_THREAD_MULTIPLE` a call
//! that would block — a receive, a wait, a probe, a blocking collective —
//! must not keep it, or a thread waiting for a message would stop the
//! thread that sends it: such a call starts its requests, then waits for
//! them with `block_until`, which polls the engine under the lock and
//! sleeps on the engine's doorbell without it. A thread that ends a call
//! while others sleep rings the doorbell, so a sleeper whose request that
//! call completed (a message between two threads of one rank) notices.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::ThreadId;

use vpml::raw::{Polled, RawRequest, RecvNow, Waker};

/// Set by `MPI_Init_thread` when the program asked for
/// `MPI_THREAD_SERIALIZED` or more: calls then take the call lock.
pub(crate) static LOCKED: AtomicBool = AtomicBool::new(false);

/// Set by `MPI_Init_thread` when the program asked for
/// `MPI_THREAD_MULTIPLE`: blocking calls wait without the lock.
static MULTIPLE: AtomicBool = AtomicBool::new(false);

/// Threads sleeping in [`block_until`] right now.
static SLEEPERS: AtomicUsize = AtomicUsize::new(0);

/// Set at init when this process re-executes a rank under a logging
/// protocol (see [`other_thread_while_reexecuting`]); cleared once it has
/// caught up.
static REEXECUTING: AtomicBool = AtomicBool::new(false);

/// Threads other than [`INIT_THREAD`] that called MPI while this process
/// re-executes and have not exited (see [`making_a_communicator`]).
static LIVE_OTHER_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Set on a thread counted in [`LIVE_OTHER_THREADS`], which it leaves
/// when the thread ends (thread-local destructors run for threads made by
/// C programs too).
struct Counted(std::cell::Cell<bool>);

impl Drop for Counted {
    fn drop(&mut self) {
        if self.0.get() {
            LIVE_OTHER_THREADS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

thread_local! {
    static COUNTED: Counted = const { Counted(std::cell::Cell::new(false)) };
}

/// The thread that initialized MPI (the only one that may make
/// communicators while the process re-executes).
static INIT_THREAD: OnceLock<ThreadId> = OnceLock::new();

/// Rings the engine's doorbell, waking the sleepers.
static WAKER: OnceLock<Waker> = OnceLock::new();

/// Rounds of polling, letting the lock go and yielding between them,
/// before a waiting thread sleeps.
const POLLS_BEFORE_SLEEP: u32 = 64;

/// Polls a thread woken from its sleep spins through again, at most (as
/// the engine's own waits do after a wake-up).
const RESPIN: u32 = 1000;

/// The call lock: re-entrant (a user reduction may call MPI), so it
/// records its owner and depth.
static CALL_LOCK: Mutex<(Option<ThreadId>, usize)> = Mutex::new((None, 0));
/// Signalled when the call lock is let go.
static CALL_FREE: Condvar = Condvar::new();
/// Threads waiting for the call lock: while there are none, a thread
/// that waits for a message polls without letting the lock go.
static LOCK_WANTED: AtomicUsize = AtomicUsize::new(0);

/// Wait on [`CALL_FREE`] until `free` says the lock may be taken,
/// counted in [`LOCK_WANTED`] meanwhile.
fn wait_for_lock<'a>(
    mut g: MutexGuard<'a, (Option<ThreadId>, usize)>,
    free: impl Fn(&(Option<ThreadId>, usize)) -> bool,
) -> MutexGuard<'a, (Option<ThreadId>, usize)> {
    if free(&g) {
        return g;
    }
    LOCK_WANTED.fetch_add(1, Ordering::SeqCst);
    while !free(&g) {
        g = CALL_FREE.wait(g).unwrap_or_else(PoisonError::into_inner);
    }
    LOCK_WANTED.fetch_sub(1, Ordering::SeqCst);
    g
}

/// Record the thread support granted at init: `serialized` takes the call
/// lock in every call, `multiple` lets blocking calls wait without it,
/// woken through `waker`.
pub(crate) fn init(serialized: bool, multiple: bool, waker: Waker, reexecuting: bool) {
    let _ = WAKER.set(waker);
    let _ = INIT_THREAD.set(std::thread::current().id());
    REEXECUTING.store(reexecuting, Ordering::Release);
    MULTIPLE.store(multiple, Ordering::Release);
    LOCKED.store(serialized || multiple, Ordering::Release);
}

/// Do blocking calls wait without the call lock (`MPI_THREAD_MULTIPLE`)?
#[inline]
pub(crate) fn multiple() -> bool {
    MULTIPLE.load(Ordering::Relaxed)
}

/// Do blocking calls wait in the library — polling the engine, and
/// sleeping on its doorbell — rather than inside the engine? Under
/// `MPI_THREAD_MULTIPLE` (so other threads may call meanwhile), and while
/// a one-sided window is alive (so the requests of other ranks are served
/// meanwhile: [`crate::rma::progress`]).
#[inline]
pub(crate) fn waits_in_library() -> bool {
    multiple() || crate::rma::live()
}

/// One pass of the engine's progress (a test that should let messages in).
pub(crate) fn poll_once() {
    if let Some(world) = crate::state::world_comm() {
        let _ = world.poll_raw(&[], true);
    }
}

/// Held for the duration of one MPI call.
pub(crate) struct CallGuard(bool);

/// Enter an MPI call: under `MPI_THREAD_SERIALIZED` or `_MULTIPLE`, wait
/// until no other thread holds the call lock.
#[inline(always)]
pub(crate) fn enter() -> CallGuard {
    if !LOCKED.load(Ordering::Acquire) {
        return CallGuard(false);
    }
    enter_locked()
}

/// [`enter`] under `MPI_THREAD_SERIALIZED` or `_MULTIPLE` (out of line:
/// single-threaded calls pay one load).
#[cold]
#[inline(never)]
fn enter_locked() -> CallGuard {
    let me = this_thread();
    let g = CALL_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    let mut g = wait_for_lock(g, |&(owner, _)| owner.is_none_or(|t| t == me));
    match g.0 {
        None => *g = (Some(me), 1),
        _ => g.1 += 1,
    }
    if REEXECUTING.load(Ordering::Relaxed) && INIT_THREAD.get() != Some(&me) {
        other_thread_while_reexecuting();
    }
    CallGuard(true)
}

/// Is this process still re-executing a rank (clearing the flag once it
/// has caught up)? Under the call lock, with the state free.
fn still_reexecuting() -> Option<vpml::Comm> {
    if !REEXECUTING.load(Ordering::Relaxed) {
        return None;
    }
    // (The state may be borrowed by a call that makes a communicator.)
    let world = crate::state::STATE.with(|s| {
        s.try_borrow()
            .ok()
            .and_then(|s| s.world.as_ref().map(|w| (**w).clone()))
    })?;
    if world.reexecuting() {
        Some(world)
    } else {
        REEXECUTING.store(false, Ordering::Relaxed);
        None
    }
}

/// A thread other than the one that initialized MPI calls it while this
/// process re-executes a rank. Calls are numbered per communicator, so
/// threads that each use their own communicators replay exactly whatever
/// their order (the engine stops the job if two threads call on one);
/// the thread is counted until it ends ([`making_a_communicator`]).
/// (Once caught up, any thread may call again.) Runs under the call lock,
/// with the state free.
#[cold]
fn other_thread_while_reexecuting() {
    if still_reexecuting().is_none() {
        return;
    }
    let _ = COUNTED.try_with(|c| {
        if !c.0.replace(true) {
            LIVE_OTHER_THREADS.fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// A communicator is about to be agreed on while this process may
/// re-execute a rank. Under `MPI_THREAD_SERIALIZED` or `_MULTIPLE` its
/// context depends on the communicators other threads of the process make
/// at the same time (the order they take turns in, or the rounds of
/// agreements in flight together), which the log does not hold.
/// Re-executed exactly when made by the thread that initialized MPI while
/// no other thread that called MPI since the restart is alive; otherwise
/// the job stops with one line.
pub(crate) fn making_a_communicator() {
    if !LOCKED.load(Ordering::Relaxed) || !REEXECUTING.load(Ordering::Relaxed) {
        return;
    }
    let me = std::thread::current().id();
    if INIT_THREAD.get() == Some(&me) && LIVE_OTHER_THREADS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let Some(world) = still_reexecuting() else {
        return;
    };
    stop_reexecution(
        &world,
        "a communicator is made while several threads call MPI and the rank re-executes: its context depends on the communicators other threads made at the same time, which vpml does not record",
    );
}

/// A one-sided window is about to be made while this process may
/// re-execute a rank under `MPI_THREAD_SERIALIZED` or `_MULTIPLE`. Its
/// requests are applied at points among all of the process's calls (the
/// process lane), whose order the log holds for one thread only; the job
/// stops with one line (whichever threads call: the logged execution's
/// may have called while the window lived).
pub(crate) fn making_a_window() {
    if !LOCKED.load(Ordering::Relaxed) || !REEXECUTING.load(Ordering::Relaxed) {
        return;
    }
    let Some(world) = still_reexecuting() else {
        return;
    };
    stop_reexecution(
        &world,
        "a one-sided window is made under MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE while the rank re-executes: vpml applies one-sided requests at points among all of the process's calls, and does not record how threads interleaved them",
    );
}

/// This process re-executes a rank and met what it cannot replay: stop the
/// job with one line saying `why` (the launcher says it, once; a rank
/// replayed alone prints it), as a divergence does.
pub(crate) fn stop_reexecution(world: &vpml::Comm, why: &str) -> ! {
    if let Some(line) = world.stop_diverged(why) {
        eprintln!("vpml: {line}");
    }
    std::process::exit(crate::state::DIVERGED_EXIT_CODE)
}

impl Drop for CallGuard {
    #[inline(always)]
    fn drop(&mut self) {
        if self.0 {
            leave_locked();
        }
    }
}

/// The call lock just became free (under its mutex): wake a thread that
/// waits for it, if any. (A waiter counts itself in `LOCK_WANTED` under
/// the mutex before it waits, so one that waits is seen here; without
/// one, no wake-up, which would cost a system call per MPI call.)
fn lock_free_now() {
    if LOCK_WANTED.load(Ordering::SeqCst) > 0 {
        CALL_FREE.notify_one();
    }
}

thread_local! {
    /// This thread's id (asking `std::thread::current` each call costs
    /// more than the lock).
    static THIS_THREAD: ThreadId = std::thread::current().id();
}

/// The calling thread's id.
fn this_thread() -> ThreadId {
    // (While the thread's locals are torn down, the slow way.)
    THIS_THREAD
        .try_with(|t| *t)
        .unwrap_or_else(|_| std::thread::current().id())
}

/// Let the call lock go at the end of a call that took it.
#[cold]
#[inline(never)]
fn leave_locked() {
    let mut g = CALL_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    g.1 = g.1.saturating_sub(1);
    if g.1 == 0 {
        g.0 = None;
        lock_free_now();
    }
    drop(g);
    // The call may have completed what a sleeper waits for.
    wake_sleepers();
}

/// Ring the doorbell if any thread sleeps in [`block_until`].
fn wake_sleepers() {
    if SLEEPERS.load(Ordering::SeqCst) > 0
        && let Some(w) = WAKER.get()
    {
        w.wake();
    }
}

/// Run `f` (which touches neither the state nor the engine) without the
/// call lock, letting other threads call MPI meanwhile.
pub(crate) fn without_lock<R>(f: impl FnOnce() -> R) -> R {
    unlocked(f)
}

/// Run `f` without the call lock, if this thread holds it, and take it
/// back afterwards, as deep as it was. It is let go at any depth: the
/// library's calls call each other (`MPI_Sendrecv` waits with `MPI_Wait`),
/// and a call made from a user function (a reduction, an error handler)
/// finds the state as consistent as at any call's start, since no call
/// keeps it borrowed while user code runs.
pub(crate) fn unlocked<R>(f: impl FnOnce() -> R) -> R {
    let me = this_thread();
    let mut g = CALL_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    if g.0 != Some(me) {
        drop(g);
        return f();
    }
    let depth = g.1;
    *g = (None, 0);
    lock_free_now();
    drop(g);
    let r = f();
    let g = CALL_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
    let mut g = wait_for_lock(g, |&(owner, _)| owner.is_none());
    *g = (Some(me), depth);
    r
}

/// Under `MPI_THREAD_MULTIPLE`, wait until the requests of `reqs`
/// (`None`: inactive) are all done (`all`) or any is, letting other
/// threads call MPI meanwhile; the completion call that follows then
/// finds them done. Otherwise return at once (the completion call waits
/// inside the engine). The caller holds no borrow of the state.
pub(crate) fn block_until(
    engine: &vpml::Comm,
    reqs: &[Option<RawRequest>],
    all: bool,
) -> vpml::Result<()> {
    if !waits_in_library() {
        return Ok(());
    }
    wait_for(engine, || engine.poll_raw(reqs, all))
}

/// Call `poll` (under the call lock) until it says done, letting other
/// threads call MPI between calls: while no other thread waits for the
/// lock, as many polls back to back as the
/// engine's own waits spin
/// through ([`vpml::Comm::spin_polls_raw`]: a message is noticed as soon
/// as it lands, as in a single-threaded wait); then rounds with the lock
/// let go and a yield, then sleeps on `engine`'s doorbell. The caller
/// holds no borrow of the state.
pub(crate) fn wait_for(
    engine: &vpml::Comm,
    mut poll: impl FnMut() -> vpml::Result<Polled>,
) -> vpml::Result<()> {
    let spin_polls = engine.spin_polls_raw();
    let mut spins = if SPUN.replace(false) { spin_polls } else { 0 };
    let mut polls = 0;
    loop {
        // A progress point for the windows of this process.
        crate::rma::progress();
        let polled = poll()?;
        if polled.progressed {
            // What arrived may be another thread's.
            wake_sleepers();
        }
        if polled.done {
            return Ok(());
        }
        if spins < spin_polls && LOCK_WANTED.load(Ordering::SeqCst) == 0 {
            spins += 1;
            std::hint::spin_loop();
            continue;
        }
        if polled.progressed || polls < POLLS_BEFORE_SLEEP {
            polls += 1;
            unlocked(std::thread::yield_now);
            continue;
        }
        let Some(sleep) = engine.outside_sleep_raw() else {
            // Something arrived meanwhile: poll again, after a yield.
            unlocked(std::thread::yield_now);
            continue;
        };
        // Sleepers share one doorbell word, which each re-arms: a thread
        // that arms it after another was woken can make that one miss its
        // wake-up. With another sleeper about, sleep briefly.
        let others = SLEEPERS.fetch_add(1, Ordering::SeqCst) > 0;
        unlocked(|| {
            if others {
                sleep.sleep_briefly();
            } else {
                sleep.sleep();
            }
        });
        SLEEPERS.fetch_sub(1, Ordering::SeqCst);
        polls = 0;
        // After a wake-up, spin briefly again before yielding: at most
        // RESPIN polls, half the budget when it is smaller.
        spins = spin_polls - (spin_polls / 2).min(RESPIN);
    }
}

/// Under `MPI_THREAD_MULTIPLE`, with no window alive (a wait is a
/// progress point that serves a window's requests): before a blocking
/// receive is posted, `look` for its message straight off the ring
/// ([`vpml::Comm::recv_now_raw`]) as many times back to back as a wait
/// spins, while no other thread waits for the call lock. Its status if it
/// was taken; `None` to post the receive and wait as usual.
pub(crate) fn spin_for_message(
    engine: &vpml::Comm,
    mut look: impl FnMut() -> vpml::Result<RecvNow>,
) -> vpml::Result<Option<vpml::Status>> {
    if !multiple() || crate::rma::live() {
        return Ok(None);
    }
    for _ in 0..engine.spin_polls_raw().max(1) {
        match look()? {
            RecvNow::Took(st) => return Ok(Some(st)),
            RecvNow::NotNow => return Ok(None),
            RecvNow::Spun => {}
        }
        if LOCK_WANTED.load(Ordering::SeqCst) != 0 {
            return Ok(None);
        }
        std::hint::spin_loop();
    }
    // Spun as long as a wait would: the receive's wait need not again.
    SPUN.set(true);
    Ok(None)
}

thread_local! {
    /// This thread just spun a wait's budget looking for a message
    /// ([`spin_for_message`]): its next [`wait_for`] yields or sleeps at
    /// once, as a single-threaded receive's wait does after `recv_now`.
    static SPUN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Under `MPI_THREAD_MULTIPLE`, wait until `ready` holds (it changes only
/// through other threads' calls), letting them run meanwhile.
pub(crate) fn wait_until(mut ready: impl FnMut() -> bool) {
    let world = crate::state::world_comm();
    let Some(world) = world else {
        return;
    };
    // A failed engine ends the wait: the call that follows reports it.
    let _ = wait_for(&world, || {
        let progressed = world.poll_raw(&[], true)?.progressed;
        Ok(Polled {
            progressed,
            done: ready(),
        })
    });
}
