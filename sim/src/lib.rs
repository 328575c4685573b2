//! # vpml-sim — a whole job in one process, from one seed
//!
//! The simulator runs N ranks of a job in one process, each on its own
//! thread with the real engine (`vpml-pml`) and the real protocol
//! (`vpml-vprotocol`'s pessimist), joined by in-memory pipes
//! ([`vpml_pml::sim`]) and served by in-memory event loggers
//! ([`loggers`]). Only one rank runs at a time ([`sched`]); every choice —
//! which rank runs next, when the loggers make events durable, what the
//! program does ([`program`]) — is drawn from one 64-bit seed, so a seed
//! is an execution, and a failing seed fails again, identically, when it
//! is run again (`vpml-sim --seed SEED` prints the command).
//!
//! While a job runs, the rules of DESIGN.md are checked ([`check`]): the
//! commit rule at every message that leaves a rank; exactly-once delivery
//! in channel order at every reception. A job also has to finish: one that
//! makes no progress within its step budget is reported as a deadlock.
//!
//! This is the approach of FoundationDB's simulation and TigerBeetle's VOPR,
//! applied to an MPI library: the engine and the protocol run unchanged;
//! only the transports, the clock of waiting and the loggers are simulated.

mod check;
pub mod loggers;
pub mod program;
mod sched;

use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::{Arc, Once};

use vpml_pml::sim::{SimHooks, SimNet};
use vpml_vprotocol::pessimist::{Config, Pessimist};

use check::Checker;
pub use loggers::Acknowledge;
use loggers::{SimClient, SimLoggers};
use program::{Plan, RankEnv};
use sched::{Sched, Stop};

/// Which protocol the simulated ranks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// No protocol: the bare engine.
    None,
    /// Pessimistic sender-based message logging.
    Pessimist,
}

/// What to simulate.
#[derive(Clone, Debug)]
pub struct Options {
    /// Ranks of the job.
    pub ranks: usize,
    /// Rounds of the program.
    pub rounds: usize,
    /// The protocol.
    pub protocol: Protocol,
    /// How the ranks' logger clients treat durability (a broken one shows
    /// that the checks catch a broken rule).
    pub acknowledge: Acknowledge,
    /// Hand-overs before a run counts as stuck.
    pub max_steps: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            ranks: 3,
            rounds: 6,
            protocol: Protocol::Pessimist,
            acknowledge: Acknowledge::WhenDurable,
            max_steps: 200_000,
        }
    }
}

/// What one seeded run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Each rank's final hash (`None` for a rank that did not finish).
    pub outputs: Vec<Option<u64>>,
    /// Hand-overs between ranks.
    pub steps: u64,
    /// The first broken rule or failure, if any.
    pub failure: Option<String>,
}

/// The command that runs `seed` again.
pub fn replay_command(seed: u64, opts: &Options) -> String {
    format!(
        "cargo run --release -p vpml-sim -- --seed {seed:#018x} --ranks {} --rounds {} --protocol {}",
        opts.ranks,
        opts.rounds,
        match opts.protocol {
            Protocol::None => "none",
            Protocol::Pessimist => "pessimist",
        }
    )
}

/// The engine's hooks for one simulated rank.
struct RankHooks {
    me: usize,
    sched: Arc<Sched>,
    checker: Arc<Checker>,
}

impl SimHooks for RankHooks {
    fn idle(&self) {
        self.sched.yield_now(self.me);
    }

    fn frame_written(&self, from: usize, to: usize, message: Option<u64>) {
        if let Some(seq) = message {
            self.checker.message_leaves(from, to, seq);
        }
        // Let the receiver (or a third rank) run before the sender goes
        // on, now and then: other orders of arrival.
        self.sched.maybe_yield(self.me, 4);
    }
}

impl RankEnv for RankHooks {
    fn send_begins(&self, to: usize, seq: u64) {
        self.checker.send_begins(self.me, to, seq);
    }
    fn send_ends(&self) {
        self.checker.send_ends(self.me);
    }
    fn pause(&self) {
        self.sched.yield_now(self.me);
    }
}

/// Stop panics are how the scheduler unwinds rank threads: keep them out
/// of the output.
fn quiet_stop_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Stop>().is_none() {
                previous(info);
            }
        }));
    });
}

/// Run the job of `seed`.
pub fn run(seed: u64, opts: &Options) -> Outcome {
    quiet_stop_panics();
    let mut rng = fastrand::Rng::with_seed(seed);
    let plan = Plan::draw(&mut rng, opts.ranks, opts.rounds);
    let net = SimNet::new(opts.ranks, rng.usize(4..=16));
    let loggers = Arc::new(SimLoggers::new(opts.ranks));
    let sched = Arc::new(Sched::new(
        opts.ranks,
        rng.fork(),
        opts.max_steps,
        Arc::clone(&loggers),
    ));
    let checker = Arc::new(Checker::new(Arc::clone(&loggers), Arc::clone(&sched)));
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            return Outcome {
                outputs: vec![None; opts.ranks],
                steps: 0,
                failure: Some(format!("cannot create a temporary directory: {e}")),
            };
        }
    };
    let outputs: Vec<Option<u64>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..opts.ranks)
            .map(|me| {
                let (net, plan, sched, checker, loggers) =
                    (&net, &plan, &sched, &checker, &loggers);
                let dir = dir.path().join(format!("rank-{me}"));
                s.spawn(move || {
                    let body = AssertUnwindSafe(|| {
                        sched.wait_turn(me);
                        let hooks = Rc::new(RankHooks {
                            me,
                            sched: Arc::clone(sched),
                            checker: Arc::clone(checker),
                        });
                        let result = run_rank(me, net, plan, &hooks, loggers, opts, dir);
                        if let Err(e) = &result {
                            sched.stop(format!("rank {me}: {e}"));
                        }
                        result.ok()
                    });
                    let out = std::panic::catch_unwind(body).unwrap_or_else(|payload| {
                        if payload.downcast_ref::<Stop>().is_none() {
                            sched.stop(format!("rank {me} panicked"));
                        }
                        None
                    });
                    sched.finish(me);
                    out
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().ok().flatten())
            .collect()
    });
    Outcome {
        outputs,
        steps: sched.steps(),
        failure: sched.stopped(),
    }
}

/// One rank's thread: join, run the program, finalize.
fn run_rank(
    me: usize,
    net: &SimNet,
    plan: &Plan,
    hooks: &Rc<RankHooks>,
    loggers: &Arc<SimLoggers>,
    opts: &Options,
    dir: std::path::PathBuf,
) -> Result<u64, String> {
    let protocol: Option<Box<dyn vpml_pml::protocol::Protocol>> = match opts.protocol {
        Protocol::None => None,
        Protocol::Pessimist => {
            let cfg = Config {
                job: "sim".into(),
                rank: me,
                incarnation: 0,
                token: String::new(),
                loggers: Vec::new(),
                replicas: 1,
                log_dir: dir,
                segment_size: 1 << 20,
                log_in_memory: true,
                keep_logs: false,
                send_eagerly: false,
                loggers_restarted: false,
                copies: false,
            };
            let client = SimClient {
                rank: me,
                loggers: Arc::clone(loggers),
                sched: Arc::clone(&hooks.sched),
                acknowledge: opts.acknowledge,
            };
            let p = Pessimist::start_with(cfg, Box::new(client))
                .map_err(|e| format!("starting the protocol: {e}"))?;
            Some(Box::new(p))
        }
    };
    let shared: Rc<dyn SimHooks> = Rc::clone(hooks) as Rc<dyn SimHooks>;
    let world =
        vpml_pml::sim::join(me, net, shared, protocol).map_err(|e| format!("joining: {e}"))?;
    let out = program::run(&world, hooks.as_ref(), plan)?;
    world.finalize().map_err(|e| format!("finalize: {e}"))?;
    Ok(out)
}
