//! Waiting outside the engine, for programs whose threads share it
//! (`MPI_THREAD_MULTIPLE` in the C library).
//!
//! A blocking call inside the engine holds it for as long as it waits, so
//! a thread that must let other threads call vpml meanwhile waits outside
//! instead: it polls ([`crate::Comm::poll_raw`]), and when nothing
//! happened it arms the doorbell ([`crate::Comm::outside_sleep_raw`]),
//! lets the engine go, and sleeps on the doorbell with
//! [`OutsideSleep::sleep`]. Peers ring the doorbell as they do for a rank
//! sleeping inside the engine; a thread of the same process that did
//! something a sleeper may wait for rings it with a [`Waker`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Engine;
use super::link::Link;
use crate::shm::futex;
use crate::shm::mailbox::Mailbox;

/// How long a sleep lasts when a wake-up may come by another way than the
/// doorbell (a socket, a simulated peer): the thread then polls.
const POLL_SLICE: Duration = Duration::from_millis(1);

/// The longest sleep outside the engine. Sleepers share one doorbell word,
/// which each re-arms, so a wake-up meant for one may be hidden by
/// another's arming: this bounds how late such a sleeper notices.
const OUTSIDE_SLICE: Duration = Duration::from_millis(10);

/// The owner's doorbell, usable from any thread (the mapping lives as
/// long as the `Arc`).
#[derive(Clone)]
struct Bell(Arc<Mailbox>);

/// A sleep armed while the engine was held, taken after letting it go.
pub struct OutsideSleep {
    bell: Option<Bell>,
    timeout: Duration,
}

impl OutsideSleep {
    /// Sleep until the doorbell rings (a peer wrote, a [`Waker`] woke
    /// us) or the slice ends. Spurious returns are part of the contract:
    /// the caller polls again.
    pub fn sleep(self) {
        let timeout = self.timeout;
        self.sleep_at_most(timeout);
    }

    /// [`OutsideSleep::sleep`], at most a millisecond (for a thread that
    /// may have missed a wake-up: the doorbell word is shared).
    pub fn sleep_briefly(self) {
        let timeout = self.timeout.min(POLL_SLICE);
        self.sleep_at_most(timeout);
    }

    fn sleep_at_most(self, timeout: Duration) {
        match &self.bell {
            Some(b) => futex::wait(b.0.doorbell(), 1, timeout),
            None => std::thread::sleep(timeout),
        }
    }
}

/// Rings the owner's doorbell from any thread of the process, waking its
/// outside sleepers (and the engine, if it sleeps inside).
#[derive(Clone)]
pub struct Waker(Option<Bell>);

impl Waker {
    /// Wake every sleeper on the doorbell.
    pub fn wake(&self) {
        if let Some(b) = &self.0 {
            let bell = b.0.doorbell();
            bell.store(0, Ordering::SeqCst);
            futex::wake(bell);
        }
    }
}

impl Engine {
    /// Arm the doorbell for a sleep outside the engine: `None` if something
    /// is already waiting to be read or written (progress instead).
    pub(crate) fn outside_sleep(&mut self) -> Option<OutsideSleep> {
        self.core.stats.sleeps += 1;
        let polled = OutsideSleep {
            bell: None,
            timeout: POLL_SLICE,
        };
        if self.sim.is_some() || self.replay_alone {
            return Some(polled);
        }
        let Some(own) = self.own.clone() else {
            return Some(polled);
        };
        let Some(longest) = self.arm_doorbell() else {
            own.doorbell().store(0, Ordering::Relaxed);
            return None;
        };
        // Sockets do not ring the doorbell: with any, sleep in slices.
        let sockets = !self.idle_fds().is_empty()
            || self
                .peers
                .iter()
                .flatten()
                .any(|p| matches!(p.link, Link::Tcp(_)));
        Some(OutsideSleep {
            bell: Some(Bell(own)),
            timeout: longest.min(if sockets { POLL_SLICE } else { OUTSIDE_SLICE }),
        })
    }

    /// A [`Waker`] for this engine's doorbell (one that does nothing when
    /// the engine has none: a singleton, a replay, a simulation).
    pub(crate) fn waker(&self) -> Waker {
        Waker(self.own.as_ref().map(|m| Bell(m.clone())))
    }
}
