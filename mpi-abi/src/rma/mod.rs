//! One-sided communication (`MPI_Win_*`, `MPI_Put`, `MPI_Get`, the
//! accumulates), carried as messages so that message logging replays it.
//!
//! A window has a private duplicate of its communicator. Every one-sided
//! operation is a request message to its target (`wire`); the target
//! takes requests from any source, in the order they reach it, and applies
//! them to its memory at its next *progress point*: a blocking receive or
//! send, a wait, a test, a probe, `MPI_Barrier` on an intracommunicator,
//! the synchronizing one-sided calls, and the blocking collectives and
//! communicator constructors of a communicator whose members all share a
//! live window (`covers`). What a target sends back — the bytes of a
//! get, a lock grant, an acknowledgement — is a reply the origin receives
//! from that target in the order it asked.
//!
//! Under message logging this is replayed: the source each request came
//! from is the logged match of the target's receive from any source, and
//! where the target took it is the logged completion of the test that
//! took it; a re-executing target takes requests there (`target`, and
//! docs/DESIGN.md for what "there" means). Requests and replies are
//! messages the senders' logs keep.
//! `MPI_Win_allocate_shared` — loads and stores into another process's
//! memory, which no log sees — is refused under a logging protocol.
//!
//! Synchronization (`sync`):
//! * `MPI_Win_fence`: each rank learns how many requests were sent to it
//!   since the last fence (a reduce-scatter of counts), serves until it has
//!   taken that many, waits for its own replies, and meets the others in a
//!   barrier;
//! * post/start/complete/wait: `post` sends a word to each origin, `start`
//!   waits for them, `complete` sends a `Complete` request after the
//!   operations (so it arrives after them), `wait` serves until every
//!   origin's has arrived;
//! * `MPI_Win_lock`/`unlock`/`flush`: the target grants locks in the order
//!   it takes the requests (shared ones together), and acknowledges an
//!   unlock or flush once every earlier request of the origin is done.
//!
//! With no protocol, a window whose memory MPI allocates
//! (`MPI_Win_allocate`, `_allocate_shared`) on members of one host is
//! *direct* (`direct`): its memory is one file every member maps, and
//! origins load and store into their targets themselves, as Open MPI's
//! `osc/sm` does — no request, no progress point. Other windows, and every
//! window under a logging protocol, work as above.
//!
//! Modules: `window` (creation, memory, names, attributes, error
//! handlers), `shared` (windows in memory the members share), `direct`
//! (operations as loads and stores), `origin` (the operations),
//! `target` (serving requests), `sync`, `wire`.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::consts::*;
use crate::state::{STATE, slot_of};

pub(crate) use direct::overlap;

mod direct;
mod origin;
mod shared;
mod sync;
mod target;
mod window;
mod wire;

/// Windows alive in this process that take requests (all but direct
/// ones): while there is one, blocking calls wait in the library, serving
/// requests meanwhile.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Set while a thread serves requests, or waits without serving (a call
/// made meanwhile, by it or — under `MPI_THREAD_MULTIPLE`, while it waits
/// without the call lock — by another thread, does not serve). Only the
/// thread that set it clears it ([`Serving`]).
static SERVING: AtomicBool = AtomicBool::new(false);

/// [`SERVING`], held: cleared when dropped.
struct Serving;

impl Serving {
    /// Take [`SERVING`] if no one holds it. (Made only on success: a
    /// `Serving` dropped clears the flag.)
    fn claim() -> Option<Serving> {
        SERVING
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then(|| Serving)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.store(false, Ordering::Release);
    }
}

/// Another rank's part of a window, as it told at creation.
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct Peer {
    /// Bytes of its window memory.
    len: u64,
    /// Its displacement unit.
    disp_unit: u64,
}

/// The values `MPI_WIN_SIZE`, `MPI_WIN_DISP_UNIT` and
/// `MPI_WIN_CREATE_FLAVOR` point to (boxed: they stay put while the window
/// table grows).
pub(crate) struct Shown {
    size: Aint,
    disp_unit: c_int,
    flavor: c_int,
}

/// Memory a window owns.
pub(crate) enum Memory {
    /// `MPI_Win_allocate`'s.
    Allocated(#[allow(dead_code, reason = "held to be freed with the window")] Allocation),
    /// `MPI_Win_allocate_shared`'s: every member's part.
    Shared(shared::Segment),
}

/// Memory allocated for a window (`MPI_Win_allocate`).
pub(crate) struct Allocation {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout by `Allocation::new`, freed
        // once (the allocation owns it).
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// A target's lock: who holds it, and who waits, in request order.
#[derive(Default)]
pub(crate) struct TargetLock {
    exclusive: bool,
    shared: usize,
    waiting: VecDeque<(usize, bool)>,
}

impl TargetLock {
    fn can_grant(&self, exclusive: bool) -> bool {
        !self.exclusive && (!exclusive || self.shared == 0)
    }

    fn take(&mut self, exclusive: bool) {
        if exclusive {
            self.exclusive = true;
        } else {
            self.shared += 1;
        }
    }

    fn release(&mut self, exclusive: bool) {
        if exclusive {
            self.exclusive = false;
        } else {
            self.shared = self.shared.saturating_sub(1);
        }
    }
}

/// How an origin holds a lock on a target.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    Exclusive,
    Shared,
    /// `MPI_MODE_NOCHECK`: not asked for; unlocking flushes.
    Unchecked,
}

/// The locks an origin holds on a window, by target rank.
#[derive(Default)]
pub(crate) struct HeldLocks {
    by_rank: Vec<Option<Held>>,
    held: usize,
}

impl HeldLocks {
    fn contains(&self, rank: usize) -> bool {
        self.by_rank.get(rank).is_some_and(Option::is_some)
    }

    /// Hold `held` on `rank` (which holds nothing yet).
    fn insert(&mut self, rank: usize, held: Held) {
        if self.by_rank.len() <= rank {
            self.by_rank.resize(rank + 1, None);
        }
        if self.by_rank[rank].replace(held).is_none() {
            self.held += 1;
        }
    }

    fn remove(&mut self, rank: usize) -> Option<Held> {
        let was = self.by_rank.get_mut(rank)?.take();
        if was.is_some() {
            self.held -= 1;
        }
        was
    }

    fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// The targets, in rank order.
    fn ranks(&self) -> Vec<usize> {
        (0..self.by_rank.len())
            .filter(|&r| self.contains(r))
            .collect()
    }

    /// Every lock held, in rank order, let go.
    fn take_all(&mut self) -> Vec<(usize, Held)> {
        self.held = 0;
        self.by_rank
            .iter_mut()
            .enumerate()
            .filter_map(|(r, h)| Some((r, h.take()?)))
            .collect()
    }
}

/// A window.
pub(crate) struct Window {
    /// The private duplicate of the communicator it was made on (errors
    /// return).
    comm: Comm,
    rank: usize,
    size: usize,
    /// Its memory: address and bytes (0 and 0 for a dynamic window).
    base: usize,
    len: usize,
    flavor: c_int,
    /// What the predefined attributes point to.
    shown: Box<Shown>,
    /// What `MPI_Win_allocate` or `_allocate_shared` allocated.
    owned: Option<Memory>,
    /// The world ranks of its members, in order.
    members: Vec<usize>,
    /// Each member's length and displacement unit.
    peers: Vec<Peer>,
    /// Regions attached to a dynamic window: (address, bytes).
    attached: Vec<(usize, usize)>,
    name: String,
    info: Vec<(String, String)>,
    errhandler: Errhandler,
    // The origin side.
    /// Accesses sent to each member since the last fence.
    issued: Vec<u64>,
    /// Receives of replies not yet waited for.
    replies: Vec<Request>,
    /// Reply receives given to the program (`MPI_Rget` …), which the
    /// window's synchronizations also wait for: the handle, and the
    /// engine's id it stood for.
    given: Vec<(Request, vpml::raw::RawRequest)>,
    /// Sends in flight, with their bytes.
    sends: Vec<(Request, Vec<u8>)>,
    /// The targets of the access epoch `MPI_Win_start` opened.
    access: Option<Vec<usize>>,
    /// Locks held, by target.
    locks: HeldLocks,
    // The target side.
    /// The receive of requests from any source, and its buffer
    /// ([`target::INBOX_BYTES`], freed after the receive is cancelled).
    inbox: Request,
    inbox_buf: Vec<u8>,
    /// Accesses served since the last fence.
    served: u64,
    /// The origins of the exposure epoch `MPI_Win_post` opened.
    exposure: Option<Vec<usize>>,
    /// `Complete` requests taken from each member and not yet waited for.
    completed: Vec<u32>,
    lock: TargetLock,
    /// Set when origins load and store into every member's memory
    /// themselves ([`direct`]): no request comes to this rank.
    direct: Option<direct::Direct>,
}

/// Is any window that takes requests alive (so blocking calls serve them
/// while they wait)?
#[inline]
pub(crate) fn live() -> bool {
    LIVE.load(Ordering::Relaxed) > 0
}

/// A progress point: serve the requests that reached this process's
/// windows. Called by every wait in the library.
pub(crate) fn progress() {
    if !live() {
        return;
    }
    let Some(_serving) = Serving::claim() else {
        return;
    };
    let Some(engine) = crate::state::world_comm() else {
        return;
    };
    // Inboxes are first looked at as of the engine's last progress: if
    // nothing progressed it since the last point (a loop of MPI_Iprobe
    // calls that each find a message at once, of tests of inactive
    // requests), progress it here, or no request would ever be taken.
    if engine.progresses_raw() == LAST_SEEN_PROGRESS.get() {
        let _ = engine.poll_raw(&[], true);
    }
    let windows: smallvec::SmallVec<[Win; 4]> = STATE.with(|s| {
        let s = s.borrow();
        (0..s.windows.len())
            .filter(|&i| s.windows[i].is_some())
            .map(|i| crate::state::handle_of(USER_WIN_KIND, i))
            .collect()
    });
    // Re-executing, until a pass serves nothing: the log may say a request
    // of another window comes next. Otherwise one pass, each window a few
    // requests at most, so that a target under steady traffic still gets
    // back to the call that brought it here.
    loop {
        let again = engine.reexecuting();
        let most = if again { usize::MAX } else { SERVED_PER_PASS };
        let served = windows
            .iter()
            .fold(false, |any, &w| target::serve(&engine, w, most) | any);
        if !(served && again) {
            break;
        }
    }
    LAST_SEEN_PROGRESS.set(engine.progresses_raw());
}

thread_local! {
    /// The engine's progress count ([`vpml::Comm::progresses_raw`]) when
    /// this thread's last progress point ended.
    static LAST_SEEN_PROGRESS: std::cell::Cell<u64> = const { std::cell::Cell::new(u64::MAX) };
}

/// Requests a progress point takes from one window at most (once caught
/// up).
const SERVED_PER_PASS: usize = 64;

/// Run `f`, which may wait in the library, without serving requests
/// meanwhile: for waits whose number depends on timing (completing the
/// sends that happen to be done), which must not add progress points a
/// re-execution would not have.
fn without_serving<R>(f: impl FnOnce() -> R) -> R {
    // Held by this thread already (serving), or by another: nothing to do.
    let _held = Serving::claim();
    f()
}

/// Does every member of communicator `h` share a live window that takes
/// requests with this process? Then its blocking collectives wait in the library and serve
/// requests meanwhile, as their nonblocking twins (which every member
/// runs alike: each sees the same windows, made and freed by collectives
/// over all of them, so each decides the same). On other communicators a
/// blocking collective does not serve (`MPI_Barrier` on an
/// intracommunicator always does).
pub(crate) fn covers(h: Comm) -> bool {
    if !live() {
        return false;
    }
    STATE.with(|s| {
        let s = s.borrow();
        let Some(c) = crate::state::comm_slot(h).and_then(|i| s.comms.get(i)?.as_ref()) else {
            return false;
        };
        if c.comm.is_inter() {
            return false;
        }
        let ranks = c.comm.world_ranks();
        // Direct windows take no requests, and do not count in `LIVE`:
        // every member must decide alike from the windows that do.
        s.windows
            .iter()
            .flatten()
            .filter(|w| w.direct.is_none())
            .any(|w| ranks.iter().all(|r| w.members.binary_search(r).is_ok()))
    })
}

/// Run `f` on the window behind `h`; `None` if there is none. `f` must not
/// call the library.
fn with_win<R>(h: Win, f: impl FnOnce(&mut Window) -> R) -> Option<R> {
    let i = slot_of(h, USER_WIN_KIND)?;
    STATE.with(|s| s.borrow_mut().windows.get_mut(i)?.as_mut().map(f))
}

/// Report error `code` of `func` on window `h` through its error handler
/// (`MPI_ERRORS_ARE_FATAL` by default): the code comes back unless the job
/// stops.
fn win_error(h: Win, func: &str, code: c_int, why: &str) -> c_int {
    match with_win(h, |w| w.errhandler) {
        Some(MPI_ERRORS_RETURN) => code,
        Some(handler) => match crate::errhan::handler_fn(handler) {
            Some(f) => {
                // The handler gets the window's handle where a
                // communicator's would get the communicator's.
                crate::errhan::call_user(f, h, code);
                code
            }
            None => crate::state::fatal(func, code, why),
        },
        // No such window: the communicator world's handler decides.
        None => crate::state::error(MPI_COMM_WORLD, func, code, why),
    }
}

/// The window behind `h`, or the error for an invalid handle.
fn window_or_error(func: &str, h: Win) -> Result<(), c_int> {
    match with_win(h, |_| ()) {
        Some(()) => Ok(()),
        None => Err(crate::state::error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_WIN,
            "invalid window",
        )),
    }
}

/// A library call made on a window's private communicator failed: report
/// it on the window.
fn check(h: Win, func: &str, rc: c_int, doing: &str) -> Result<(), c_int> {
    if rc == MPI_SUCCESS {
        Ok(())
    } else {
        Err(win_error(h, func, rc, doing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_claim_leaves_the_serving_flag_to_its_holder() {
        let held = Serving::claim();
        assert!(held.is_some());
        // A second claim fails, and must not clear the holder's flag.
        assert!(Serving::claim().is_none());
        assert!(SERVING.load(Ordering::Acquire));
        drop(held);
        assert!(!SERVING.load(Ordering::Acquire));
        assert!(Serving::claim().is_some());
    }
}
