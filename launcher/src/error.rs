//! What can go wrong in `vpml run` and `vpml mpicc`: each command prints
//! an [`Error`] after its own name (`vpml run: …`) and exits with status 1
//! (2 for `vpml mpicc`). Errors of the recording (`--record`) come from
//! `vpml-replay` and print as it words them.

use std::path::PathBuf;

use crate::agent::{HostsError, WireError};
use crate::inject::SpecError;
use crate::protocol::LoggerStartError;

/// An error of a launcher command; it renders as the line printed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---------------------------------------------------------- options
    /// `-n 0`.
    #[error("-n must be at least 1")]
    NoRanks,
    /// `--timeout` is not a positive number of seconds vpml can wait.
    #[error("--timeout must be a positive number of seconds up to {max}, not {0:?}", max = crate::MAX_SECONDS)]
    BadTimeout(f64),
    /// `--checkpoint-interval` is not a positive number of seconds.
    #[error("--checkpoint-interval must be a positive number of seconds up to {max}, not {0:?}", max = crate::MAX_SECONDS)]
    BadCheckpointInterval(f64),
    /// `--checkpoint-interval` without `--protocol coordinated`.
    #[error("--checkpoint-interval asks for global checkpoints: it needs --protocol coordinated")]
    CheckpointIntervalNeedsCoordinated,
    /// `--agent-timeout` is not a number of seconds vpml can wait.
    #[error("--agent-timeout must be a number of seconds up to {max}, not {0:?}", max = crate::MAX_SECONDS)]
    BadAgentTimeout(f64),
    /// No program after the options.
    #[error("no program given")]
    NoProgram,
    /// `--record` with another protocol or a `--log-dir`.
    #[error("--record uses the pessimist protocol and its own log directory")]
    RecordConflict,
    /// `--protocol` names no known protocol.
    #[error("unknown protocol {0:?} (known: none, pessimist, coordinated)")]
    UnknownProtocol(String),
    /// `--protocol coordinated` across hosts with `--event-logger-addrs`.
    #[error(
        "--protocol coordinated across hosts keeps its checkpoint copies on event loggers this launcher starts: drop --event-logger-addrs"
    )]
    CoordinatedOutsideLoggers,
    /// An address in `--event-logger-addrs` is not `host:port` with a
    /// numeric host.
    #[error("--event-logger-addrs: {0:?} is not an address (ip:port)")]
    BadLoggerAddress(String),
    /// A `VPML_*` setting in the environment is malformed.
    #[error("{0}")]
    Settings(#[source] vpml_pml::Error),
    /// `--replicas 0`.
    #[error("--replicas must be at least 1")]
    NoReplicas,
    /// `--event-loggers 0`.
    #[error("--event-loggers must be at least 1")]
    NoEventLoggers,
    /// More replicas than event loggers.
    #[error("--replicas {replicas} needs at least as many event loggers (have {loggers})")]
    TooFewLoggers {
        /// `--replicas`.
        replicas: usize,
        /// Event loggers of the job.
        loggers: usize,
    },
    /// A bad `--inject-failure` spec.
    #[error("--inject-failure {spec:?}: {why}")]
    InjectFailure {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        #[source]
        why: SpecError,
    },
    /// `--hosts` and `--hostfile` together.
    #[error("give --hosts or --hostfile, not both")]
    HostsAndHostfile,
    /// `--spare-hosts` in a job on this host alone.
    #[error("--spare-hosts needs --hosts or --hostfile")]
    SpareHostsAlone,
    /// A bad `--hosts` list or host file.
    #[error(transparent)]
    Hosts(#[from] HostsError),
    /// The hosts have fewer slots than the job has ranks.
    #[error("{ranks} rank(s) but the hosts offer {slots} slot(s)")]
    TooFewSlots {
        /// `-n`.
        ranks: usize,
        /// Slots of all hosts.
        slots: usize,
    },

    // ---------------------------------------------------------- program
    /// The program exists but cannot be executed.
    #[error("{0} is not an executable file")]
    NotExecutable(PathBuf),
    /// The program (given as a path) does not exist.
    #[error("program not found: {0}")]
    ProgramNotFound(PathBuf),
    /// The program (given as a name) is in no directory of `PATH`.
    #[error("program not found: {0} (not in PATH)")]
    ProgramNotInPath(PathBuf),
    /// An MPI program, but vpml's MPI library cannot be used.
    #[error("{program} is an MPI program, but {source}")]
    MpiProgram {
        /// The program.
        program: PathBuf,
        /// Why the library cannot be used.
        source: Box<Error>,
    },
    /// `std::env::current_exe` failed.
    #[error("cannot find the vpml binary: {0}")]
    CurrentExe(#[source] std::io::Error),
    /// The vpml binary's path has no parent directory.
    #[error("the vpml binary has no directory")]
    NoExeDir,
    /// `libvpml_mpich.so` is not built.
    #[error(
        "vpml's MPI library (libvpml_mpich.so) is not next to {exe}: build it with `cargo build --release -p vpml-mpi-abi`"
    )]
    NoMpiLibrary {
        /// The vpml binary.
        exe: PathBuf,
    },

    // ---------------------------------------------------------- job set-up
    /// The operating system gave no random bytes.
    #[error("no randomness for the job token: {0}")]
    NoRandomness(getrandom::Error),
    /// `--token-file` cannot be read, or is not a token file.
    #[error("--token-file: {0}")]
    TokenFile(String),
    /// `--token-file` has no token for any job.
    #[error(
        "--token-file {0}: no `* TOKEN` line (job ids are random: vpml run needs a token for any job)"
    )]
    NoAnyJobToken(PathBuf),
    /// The host file cannot be read.
    #[error("cannot read the host file {path}: {source}")]
    ReadHostfile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key/value service cannot listen.
    #[error("cannot start the key/value service on {bind}: {source}")]
    KvService {
        /// `--bind`.
        bind: String,
        /// Why.
        source: std::io::Error,
    },
    /// The ranks' mailboxes cannot be created.
    #[error("cannot create shared memory for {ranks} ranks: {source}")]
    SharedMemory {
        /// `-n`.
        ranks: usize,
        /// Why.
        source: std::io::Error,
    },
    /// The job page cannot be created.
    #[error("cannot create the job page: {0}")]
    JobPage(#[source] std::io::Error),
    /// The mailboxes' doorbells cannot be mapped.
    #[error("cannot map the mailboxes: {0}")]
    MapMailboxes(#[source] vpml_pml::Error),
    /// Signal handlers cannot be installed.
    #[error("cannot install signal handlers: {0}")]
    SignalHandlers(#[source] std::io::Error),
    /// The log directory cannot be created.
    #[error("cannot create the log directory {path}: {source}")]
    CreateLogDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A socket cannot listen on `--bind`.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// An event logger does not start.
    #[error("cannot start event logger {index}: {source}")]
    StartLogger {
        /// Its number.
        index: usize,
        /// Why.
        source: LoggerStartError,
    },
    /// An event logger died and does not start again.
    #[error("event logger {index} at {addr} died ({how}) and cannot be started again: {source}")]
    RestartLogger {
        /// Its number.
        index: usize,
        /// Its address.
        addr: String,
        /// How it died.
        how: String,
        /// Why it does not start.
        source: LoggerStartError,
    },
    /// A rank process does not start.
    #[error("cannot start rank {rank} ({program}): {source}")]
    SpawnRank {
        /// The rank.
        rank: usize,
        /// Its program.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A rank of a lost host has nowhere to restart.
    #[error("host {host} is lost and no spare host is left (--spare-hosts)")]
    NoSpareHost {
        /// The lost host.
        host: String,
    },

    // ---------------------------------------------------------- agents
    /// The agents' control socket cannot listen.
    #[error("cannot listen on {bind} for agents: {source}")]
    ListenForAgents {
        /// `--bind`.
        bind: String,
        /// Why.
        source: std::io::Error,
    },
    /// The agents' control socket failed.
    #[error("{0}")]
    ControlSocket(#[source] std::io::Error),
    /// Accepting an agent's connection failed.
    #[error("accepting agents: {0}")]
    AcceptAgents(#[source] std::io::Error),
    /// A host's agent does not start.
    #[error("host {host}: cannot start its agent: {source}")]
    StartAgent {
        /// The host.
        host: String,
        /// Why.
        source: std::io::Error,
    },
    /// A host's agent exited before it connected.
    #[error("host {host}: its agent exited before connecting")]
    AgentExited {
        /// The host.
        host: String,
    },
    /// Talking to a host's agent failed.
    #[error("host {host}: {source}")]
    AgentConnection {
        /// The host.
        host: String,
        /// Why.
        source: WireError,
    },
    /// Agents did not connect in time.
    #[error("host(s) {hosts} unreachable: no agent connected within {secs} s")]
    AgentsUnreachable {
        /// The hosts, comma-separated.
        hosts: String,
        /// `--agent-timeout`.
        secs: f64,
    },

    // ---------------------------------------------------------- files
    /// A file operation failed (the message names the file).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file cannot be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A rank's log directory holds no checkpoint (`--inject-failure
    /// …:corrupt-checkpoint`).
    #[error("{0} holds no checkpoint")]
    NoCheckpoint(PathBuf),

    // ---------------------------------------------------------- recordings
    /// `--record`: the recording cannot be prepared or finished.
    #[error(transparent)]
    Recording(#[from] vpml_replay::Error),
}

impl Error {
    /// [`Error::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}
