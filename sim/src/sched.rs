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

/// Panic payload that unwinds a rank thread when the run stops.
#[derive(Debug)]
pub(crate) struct Stop;

/// Panic payload that unwinds a rank thread to crash its process: the
/// thread then starts the rank's next incarnation, as `vpml run` would
/// restart it.
#[derive(Debug)]
pub(crate) struct Crash;

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
    /// `steps` when it stopped.
    steps_at_stop: u64,
    /// Crashes still to inflict, and the odds (one in `crash_one_in`) at
    /// each chance: a fault point reached or a hand-over.
    crashes_left: u32,
    crash_one_in: u32,
    /// Crashes start once every rank has joined (as `vpml run` stops a
    /// job whose rank dies in the start-up fences) and stop once the job
    /// is finalized (nothing restarts then).
    crashes_started: bool,
    no_more_crashes: bool,
    /// Where each crash happened: (rank, point).
    crashes: Vec<(usize, &'static str)>,
    /// Ranks whose files a crash took (a lost host), in order.
    lost_files: Vec<usize>,
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
                steps_at_stop: 0,
                crashes_left: 0,
                crash_one_in: u32::MAX,
                crashes_started: false,
                no_more_crashes: false,
                crashes: Vec::new(),
                lost_files: Vec::new(),
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

    /// Inflict up to `crashes` crashes, each chance taking one with odds
    /// of one in `one_in`.
    pub(crate) fn plan_crashes(&self, crashes: u32, one_in: u32) {
        let mut st = self.lock();
        st.crashes_left = crashes;
        st.crash_one_in = one_in.max(1);
    }

    /// Every rank joined the job: crashes may start.
    pub(crate) fn start_crashes(&self) {
        self.lock().crashes_started = true;
    }

    /// The job is finalized: no crash from now on.
    pub(crate) fn end_crashes(&self) {
        self.lock().no_more_crashes = true;
    }

    /// Rank `me` crashed: settle what the loggers kept of its events.
    pub(crate) fn crash_loggers(&self, me: usize) {
        let mut st = self.lock();
        self.loggers.crash(me, &mut st.rng);
    }

    /// A number below `n`, drawn from the seed.
    pub(crate) fn below(&self, n: usize) -> usize {
        self.lock().rng.usize(..n.max(1))
    }

    /// True one time in `n`, drawn from the seed.
    pub(crate) fn one_in(&self, n: u32) -> bool {
        self.lock().rng.u32(..n.max(1)) == 0
    }

    /// Rank `me`'s crash took its files.
    pub(crate) fn lost_files(&self, me: usize) {
        self.lock().lost_files.push(me);
    }

    /// Ranks whose files crashes took.
    pub(crate) fn files_lost(&self) -> Vec<usize> {
        self.lock().lost_files.clone()
    }

    /// Where the crashes of this run happened.
    pub(crate) fn crashes(&self) -> Vec<(usize, &'static str)> {
        self.lock().crashes.clone()
    }

    /// A chance for rank `me` (which holds the baton) to crash, at `at`:
    /// unwinds with [`Crash`] if the seed says so.
    pub(crate) fn maybe_crash(&self, me: usize, at: &'static str) {
        let crash = {
            let mut st = self.lock();
            let one_in = st.crash_one_in;
            let hit = st.crashes_left > 0
                && st.crashes_started
                && !st.no_more_crashes
                && st.stopped.is_none()
                && st.rng.u32(..one_in) == 0;
            if hit {
                st.crashes_left -= 1;
                st.crashes.push((me, at));
            }
            hit
        };
        if crash {
            std::panic::panic_any(Crash);
        }
    }

    /// Rank `me` has nothing to do: let the loggers act, pass the baton to
    /// a rank drawn from the seed (possibly `me` again) and wait for it to
    /// come back — or crash there, if the seed says so.
    pub(crate) fn yield_now(&self, me: usize) {
        self.pass(me);
        self.maybe_crash(me, "a hand-over");
    }

    /// Hand the baton on and wait for it to come back, with no chance of
    /// a crash (a dead rank waiting to be restarted passes this way).
    pub(crate) fn pass(&self, me: usize) {
        {
            let mut st = self.lock();
            if st.stopped.is_some() {
                drop(st);
                std::panic::panic_any(Stop);
            }
            st.steps += 1;
            if st.steps > st.max_steps {
                let why = format!(
                    "no rank finished within {} steps (a deadlock, or a livelock)",
                    st.max_steps
                );
                drop(st);
                self.stop(why);
                std::panic::panic_any(Stop);
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
        let switch = {
            let mut st = self.lock();
            st.stopped.is_none() && st.rng.u32(..one_in) == 0
        };
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

    /// Stop the run: every rank unwinds at its next turn, and nothing is
    /// drawn from the seed any more (what the threads do while they unwind
    /// does not depend on it, nor does the step count reported).
    pub(crate) fn stop(&self, why: String) {
        let mut st = self.lock();
        if st.stopped.is_none() {
            st.stopped = Some(why);
            st.steps_at_stop = st.steps;
        }
        st.running = None;
        self.turn.notify_all();
    }

    /// Why the run stopped early, if it did.
    pub(crate) fn stopped(&self) -> Option<String> {
        self.lock().stopped.clone()
    }

    /// Hand-overs so far (until the run stopped, if it did).
    pub(crate) fn steps(&self) -> u64 {
        let st = self.lock();
        if st.stopped.is_some() {
            st.steps_at_stop
        } else {
            st.steps
        }
    }

    fn pass_baton(st: &mut State) {
        if st.stopped.is_some() {
            st.running = None;
            return;
        }
        let live: Vec<usize> = (0..st.live.len()).filter(|&r| st.live[r]).collect();
        st.running = if live.is_empty() {
            None
        } else {
            Some(live[st.rng.usize(..live.len())])
        };
    }
}
