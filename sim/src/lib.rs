//! # vpml-sim — a whole job in one process, from one seed
//!
//! The simulator runs N ranks of a job in one process, each on its own
//! thread with the real engine (`vpml-pml`) and the real protocol
//! (`vpml-vprotocol`'s pessimist), joined by in-memory pipes
//! ([`vpml_pml::sim`]) and served by in-memory event loggers
//! ([`loggers`]). Only one rank runs at a time (`sched`); every choice —
//! which rank runs next, when the loggers make events durable, what the
//! program does ([`program`]) — is drawn from one 64-bit seed, so a seed
//! is an execution, and a failing seed fails again, identically, when it
//! is run again (`vpml-sim --seed SEED` prints the command).
//!
//! Ranks crash — at the protocol's named fault points and at hand-overs,
//! drawn from the seed — and are restarted by `vpml run`'s own supervisor
//! (`vpml_launcher::Supervisor`, acting on the threads through
//! `supervision.rs`), which hears of every start-up, finalize, crash and
//! exit and decides, as it does for processes, whether a rank gets a new
//! incarnation or the job ends (`--max-restarts`): a new process (here,
//! the same thread, unwound) of the next incarnation,
//! which restores its checkpoint, fetches its logged events, links to the
//! running ranks and re-executes, while they re-send what it lacks.
//!
//! While a job runs, the rules of DESIGN.md are checked (`check.rs`): the
//! commit rule at every message that leaves a rank; exactly-once delivery
//! in channel order at every reception (survivors never see a message
//! twice: they never roll back); a re-executing rank sends the bytes its
//! earlier process sent; and the protocol's own checks (divergence, a log
//! or event freed too early) stop the run with their message. A job also
//! has to finish: one that makes no progress within its step budget is
//! reported as a deadlock.
//!
//! This is the approach of FoundationDB's simulation and TigerBeetle's VOPR,
//! applied to an MPI library: the engine and the protocol run unchanged;
//! only the transports, the clock of waiting and the loggers are simulated.

mod check;
mod job;
pub mod loggers;
pub mod program;
mod sched;
mod supervision;

pub use job::run;
pub use loggers::Acknowledge;

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
    /// Crash ranks (at most this many times per run, at fault points and
    /// hand-overs drawn from the seed) and restart them. Fault points
    /// exist only in builds with debug assertions (the dev and `sim`
    /// profiles); a release build crashes at hand-overs only.
    pub max_crashes: u32,
    /// `vpml run --max-restarts`: restarts the supervisor allows (by
    /// default as many as there are crashes).
    pub max_restarts: u32,
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
            max_crashes: 2,
            max_restarts: u32::MAX,
            max_steps: 200_000,
        }
    }
}

/// What one seeded run did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Each rank's final hash (`None` for a rank that did not finish).
    pub outputs: Vec<Option<u64>>,
    /// Hand-overs between ranks.
    pub steps: u64,
    /// The first broken rule or failure, if any.
    pub failure: Option<String>,
    /// The crashes inflicted: (rank, where).
    pub crashes: Vec<(usize, &'static str)>,
    /// Ranks whose crash also took their files (a lost host), in order.
    pub files_lost: Vec<usize>,
    /// The ranks' sender logs were bounded to two one-page segments of
    /// memory (drawn from the seed), so that records move to disk.
    pub bounded: bool,
    /// Sender-log segments found on disk when the job ended. Copies to
    /// disk run on threads of their own, so this count may differ from
    /// run to run of a seed: it is not part of the execution (`==`
    /// ignores it).
    pub disk_segments: usize,
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Outcome) -> bool {
        (
            &self.outputs,
            self.steps,
            &self.failure,
            &self.crashes,
            &self.files_lost,
            self.bounded,
        ) == (
            &other.outputs,
            other.steps,
            &other.failure,
            &other.crashes,
            &other.files_lost,
            other.bounded,
        )
    }
}

impl Eq for Outcome {}

/// The command that runs `seed` again.
pub fn replay_command(seed: u64, opts: &Options) -> String {
    format!(
        "cargo run{} -p vpml-sim -- --seed {seed:#018x} --ranks {} --rounds {} --crashes {}{} --max-steps {} --protocol {}{}",
        // Fault points exist only with debug assertions: a seed runs the
        // same execution in a build of the same kind (dev and `sim` builds
        // are of one kind; `sim` is the faster).
        if cfg!(debug_assertions) {
            " --profile sim"
        } else {
            " --release"
        },
        opts.ranks,
        opts.rounds,
        opts.max_crashes,
        if opts.max_restarts == u32::MAX {
            String::new()
        } else {
            format!(" --max-restarts {}", opts.max_restarts)
        },
        opts.max_steps,
        match opts.protocol {
            Protocol::None => "none",
            Protocol::Pessimist => "pessimist",
        },
        match opts.acknowledge {
            Acknowledge::WhenDurable => "",
            Acknowledge::AtOnce => " --break-commit-rule",
        }
    )
}
