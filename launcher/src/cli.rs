//! The options of `vpml run` (clap).

use std::ffi::OsString;
use std::path::PathBuf;

/// Options of `vpml run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Number of ranks to start.
    #[arg(short = 'n', long = "np", value_name = "N")]
    pub ranks: usize,
    /// Prefix every output line with the rank that printed it.
    #[arg(long)]
    pub tag_output: bool,
    /// Coordinated checkpointing: ask for a global checkpoint this often
    /// (the ranks take it at their next checkpoint call). Also: SIGUSR1
    /// to the launcher, `vpml checkpoint`.
    #[arg(long, value_name = "SECONDS")]
    pub checkpoint_interval: Option<f64>,
    /// Stop the job after this many seconds (exit code 124); MPICH's
    /// and Open MPI's `MPIEXEC_TIMEOUT` sets it too.
    #[arg(long, value_name = "SECONDS", env = "MPIEXEC_TIMEOUT")]
    pub timeout: Option<f64>,
    /// Pin each rank to one core: `core`, `none`, or `auto` (pin when
    /// there are no more ranks than cores).
    #[arg(long, value_name = "POLICY", default_value = "auto")]
    pub bind_to: BindPolicy,
    /// How ranks talk: `shm` (shared memory on one host) or `tcp` (every
    /// pair over TCP, also on one host).
    #[arg(
        long,
        value_name = "KIND",
        env = "VPML_TRANSPORT",
        default_value = "shm"
    )]
    pub transport: Transport,
    /// Testing aid: place the ranks on K pseudo-hosts of this machine
    /// (rank i on host i·K/N), so pairs across them talk over TCP as
    /// between real hosts while pairs within one use shared memory.
    #[arg(long, value_name = "K", hide = true)]
    pub simulate_hosts: Option<usize>,
    /// Fault-tolerance protocol: `none`, `pessimist` (message logging: a
    /// crashed rank restarts alone) or `coordinated` (global checkpoints
    /// at the program's checkpoint calls: every rank restarts from the
    /// last one) (default: the `VPML_PROTOCOL` environment variable, else
    /// none).
    #[arg(
        long,
        value_name = "NAME",
        env = "VPML_PROTOCOL",
        default_value = "none"
    )]
    // Checked by hand (`ProtocolSetup::start`), not by clap: an unknown
    // name ends the job with `vpml run: unknown protocol …` and status 1,
    // where clap would print its own error and exit with 2.
    pub protocol: String,
    /// Number of event loggers to start (pessimist; coordinated across
    /// hosts, where they keep the checkpoints' copies).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub event_loggers: usize,
    /// Use these running event loggers instead of starting some
    /// (comma-separated addresses).
    #[arg(long, value_name = "ADDRS")]
    pub event_logger_addrs: Option<String>,
    /// Loggers that must hold an event before it counts as durable (and
    /// that get each checkpoint's copy).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub replicas: usize,
    /// Keep sender logs (and started loggers' data) here instead of a
    /// temporary directory removed after the job.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Where senders keep their logs: `file` (memory-mapped files under
    /// the log directory, which survive the process: a checkpoint adds
    /// nothing, freed segments are reused; kept with `--log-dir` for
    /// reading after the job) or `memory` (anonymous memory; each
    /// checkpoint writes the records peers may still need to a file).
    #[arg(
        long,
        value_name = "KIND",
        env = "VPML_SENDER_LOG",
        default_value = "file"
    )]
    pub sender_log: SenderLogKind,
    /// Memory each rank's sender log may hold (`512M`, `2G`: binary
    /// units); beyond it, full segments move to files in the spill
    /// directory, in the background, and are read back only to re-send
    /// them to a restarted rank. When that disk is full too, the send
    /// fails with a message naming both. Default: a quarter of the host's
    /// memory, shared by its ranks.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub sender_log_limit: Option<u64>,
    /// Where sender logs move segments out of memory (each rank under
    /// `rank-R/spilled/`). Default: the log directory when `--log-dir` is
    /// given, else a new directory under $TMPDIR (or /var/tmp), removed
    /// after the job.
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Job token from a file in the event logger's format (`* TOKEN`), for
    /// loggers started separately.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Print each rank's counters (engine and protocol) at the end.
    #[arg(long)]
    pub stats: bool,
    /// Say how the job is set up before it starts: its id, the protocol's
    /// event loggers and logs, the MPI library a C program runs on.
    /// (Without it a job prints only what its ranks print, and what goes
    /// wrong.)
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Record the job for `vpml replay` (implies the pessimist protocol):
    /// keep sender logs, events and checkpoints in DIR (`--record=DIR`;
    /// plain `--record`: a new directory under
    /// ~/.local/share/vpml/recordings, linked as `latest`).
    #[arg(long, value_name = "DIR", num_args = 0..=1, require_equals = true, default_missing_value = "@default")]
    pub record: Option<PathBuf>,
    /// With a protocol: how many times crashed ranks (and event loggers
    /// this launcher started) may be restarted in all before the job is
    /// given up.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_restarts: u32,
    /// Kill a rank for testing: `RANK@SECONDS` (SIGKILL to RANK that many
    /// seconds after the start; repeatable; `RANK@SECONDS:corrupt-checkpoint`
    /// also damages its newest checkpoint before the restart;
    /// `RANK@restart+SECONDS` kills it that long after its next restart,
    /// i.e. while it recovers; `agent:HOST@SECONDS` kills the agent of
    /// host number HOST; `…@SECONDS:lose-files` also removes the files of
    /// the rank (or of the host's ranks) as the loss of the machine would;
    /// `RANK@…:corrupt-sender-log` damages the newest message each other
    /// rank's sender log keeps for RANK before its restart;
    /// `logger:I@SECONDS`
    /// kills event logger I), or
    /// `random:K` / `random:K@SECONDS`
    /// (K kills of random ranks at random instants within SECONDS after
    /// every rank has joined the job, default 2; the seed is printed). At
    /// a protocol step instead of an instant (debug builds):
    /// `RANK@point:NAME[#N]` — the rank's process
    /// dies the N-th time it reaches fault point NAME;
    /// `RANK@restart+point:NAME[#N]` arms it in the rank's next restarted
    /// process; `logger:I@point:NAME[#N]` in event logger I;
    /// `:corrupt-checkpoint`, `:corrupt-sender-log` and `:lose-files` apply
    /// to rank points too. A
    /// wrong name lists the known points.
    #[arg(long, value_name = "SPEC")]
    pub inject_failure: Vec<String>,
    /// Run on several hosts: `h1:2,h2:2` (name:slots). Each host's agent
    /// starts by `--via` (default: fork for `localhost`, ssh otherwise).
    #[arg(long, value_name = "LIST")]
    pub hosts: Option<String>,
    /// Hosts from a file: lines `host slots=N [via=fork|netns|ssh]`.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// How host agents start: `fork` (this machine), `netns` (inside the
    /// network namespace named like the host), `ssh`.
    #[arg(long, value_name = "METHOD")]
    pub via: Option<String>,
    /// Hosts with agents but no ranks, where ranks of a lost host are
    /// restarted (with a protocol): `h3,h4`.
    #[arg(long, value_name = "LIST")]
    pub spare_hosts: Option<String>,
    /// Address the launcher listens on (key/value service, agents, event
    /// loggers): the interface that reaches the other hosts.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: String,
    /// How long agents get to connect before a host counts as unreachable.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub agent_timeout: f64,
    /// Run an MPI C program (built against MPICH) on vpml's MPICH-ABI
    /// library; detected automatically for programs that link
    /// `libmpich.so.12`.
    #[arg(long)]
    pub mpi_abi: bool,
    /// Perturb message delivery timing (deterministically from SEED), to
    /// expose races: each rank skips reading from a random subset of its
    /// peers on each progress pass.
    #[arg(long, value_name = "SEED")]
    pub chaos: Option<u64>,
    /// Seed for `--inject-failure random:…` (default: random, printed).
    #[arg(long, value_name = "N")]
    pub inject_seed: Option<u64>,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    pub command: Vec<OsString>,
}

/// How the ranks of a job talk (`--transport`). The option's own text
/// describes the values, so `--help` does not list them again
/// (`help = None`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Shared memory on one host (and TCP between hosts).
    #[value(help = None::<&str>)]
    Shm,
    /// Every pair over TCP, also on one host.
    #[value(help = None::<&str>)]
    Tcp,
}

/// Where senders keep their logs (`--sender-log`); the values are
/// described by the option's text, as for [`Transport`].
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderLogKind {
    /// Anonymous memory; checkpoints write what peers may still need.
    #[value(help = None::<&str>)]
    Memory,
    /// Memory-mapped files under the log directory.
    #[value(help = None::<&str>)]
    File,
}

impl Transport {
    /// The name ranks get in their environment (as on the command line).
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Tcp => "tcp",
        }
    }
}

impl SenderLogKind {
    /// The name ranks get in their environment (as on the command line).
    pub fn as_str(self) -> &'static str {
        match self {
            SenderLogKind::Memory => "memory",
            SenderLogKind::File => "file",
        }
    }
}

/// Core binding policy.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindPolicy {
    /// Bind when ranks ≤ cores.
    Auto,
    /// Bind rank i to core i mod cores.
    Core,
    /// Do not bind.
    None,
}

/// A size in bytes: a number with an optional binary unit (`K`, `M`, `G`,
/// `T`, or `KiB`…).
fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(s)
        .map_err(|e| format!("{s:?} is not a size ({e}): give bytes, or e.g. 512M or 2G"))
}
