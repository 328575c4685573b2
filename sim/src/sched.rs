//! The scheduler: one rank runs at a time, the seed picks which.
//!
//! Every rank of a simulated job is a thread, but only the thread holding
//! the baton runs; the others wait on a condition variable. A rank hands
//! the baton on when its engine has nothing to do ([`Sched::yield_now`],
//! reached through `SimHooks::idle`) or when it finishes. At each hand-over
//! the simulated loggers may make events durable, and the next rank is
//! drawn from the seeded generator, so one seed gives one interleaving,
//! every time.
//!
//! A stopped run (an invariant broken, or no progress within the step
//! budget) unwinds every rank thread with a [`Stop`] panic the next time
//! it waits for the baton.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::loggers::SimLoggers;

/// Panic payload that unwinds a rank thread when the run stops (or the
/// rank is crashed on purpose).
#[derive(Debug)]
pub(crate) struct Stop;

struct State {
    /// The rank holding the baton.
    running: Option<usize>,
    /// Ranks whose thread has not finished.
    live: Vec<bool>,
    rng: fastrand::Rng,
    steps: u64,
    max_steps: u64,
    /// Why the run stopped early, if it did (the first reason wins).
    stopped: Option<String>,
}

/// The baton and the seeded choices of one run.
pub(crate) struct Sched {
    state: Mutex<State>,
    turn: Condvar,
    loggers: Arc<SimLoggers>,
}

impl Sched {
    /// A scheduler for `ranks` rank threads; the first to run is drawn now.
    pub(crate) fn new(
        ranks: usize,
        rng: fastrand::Rng,
        max_steps: u64,
        loggers: Arc<SimLoggers>,
    ) -> Sched {
        let mut rng = rng;
        let first = rng.usize(..ranks);
        Sched {
            state: Mutex::new(State {
                running: Some(first),
                live: vec![true; ranks],
                rng,
                steps: 0,
                max_steps,
                stopped: None,
            }),
            turn: Condvar::new(),
            loggers,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Rank threads unwind (Stop) without holding this lock; a poisoned
        // lock can only come from a bug in the scheduler itself, and the
        // state is still consistent: keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Block until rank `me` holds the baton; unwind if the run stopped.
    pub(crate) fn wait_turn(&self, me: usize) {
        let mut st = self.lock();
        while st.running != Some(me) && st.stopped.is_none() {
            st = self.turn.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.stopped.is_some() {
            drop(st);
            std::panic::panic_any(Stop);
        }
    }

    /// Rank `me` has nothing to do: let the loggers act, pass the baton to
    /// a rank drawn from the seed (possibly `me` again) and wait for it to
    /// come back.
    pub(crate) fn yield_now(&self, me: usize) {
        {
            let mut st = self.lock();
            st.steps += 1;
            if st.steps > st.max_steps && st.stopped.is_none() {
                st.stopped = Some(format!(
                    "no rank finished within {} steps (a deadlock, or a livelock)",
                    st.max_steps
                ));
            }
            self.loggers.tick(&mut st.rng);
            Self::pass_baton(&mut st);
            self.turn.notify_all();
        }
        self.wait_turn(me);
    }

    /// A point where a real rank could be preempted (a frame just left):
    /// hand the baton on one time in `one_in`, drawn from the seed.
    pub(crate) fn maybe_yield(&self, me: usize, one_in: u32) {
        let switch = self.lock().rng.u32(..one_in) == 0;
        if switch {
            self.yield_now(me);
        }
    }

    /// Rank `me`'s thread ends (finished, failed or crashed).
    pub(crate) fn finish(&self, me: usize) {
        let mut st = self.lock();
        st.live[me] = false;
        Self::pass_baton(&mut st);
        self.turn.notify_all();
    }

    /// Stop the run: every rank unwinds at its next turn.
    pub(crate) fn stop(&self, why: String) {
        let mut st = self.lock();
        st.stopped.get_or_insert(why);
        self.turn.notify_all();
    }

    /// Why the run stopped early, if it did.
    pub(crate) fn stopped(&self) -> Option<String> {
        self.lock().stopped.clone()
    }

    /// Hand-overs so far.
    pub(crate) fn steps(&self) -> u64 {
        self.lock().steps
    }

    fn pass_baton(st: &mut State) {
        let live: Vec<usize> = (0..st.live.len()).filter(|&r| st.live[r]).collect();
        st.running = if live.is_empty() {
            None
        } else {
            Some(live[st.rng.usize(..live.len())])
        };
    }
}
