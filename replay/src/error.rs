//! What can go wrong with recordings, `vpml replay`, `vpml trace` and
//! `vpml check-determinism`: each command prints an [`Error`] after its own
//! name (`vpml replay: …`) and exits with status 1. `vpml run --record`
//! wraps it in the launcher's error and prints it after `vpml run: `.

use std::path::PathBuf;
use std::process::ExitStatus;

use crate::recording::FORMAT;

/// An error of a recording or trace command; it renders as the line
/// printed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---------------------------------------------------------- options
    /// `--seeds` of `vpml check-determinism` is not `A,B`.
    #[error("--seeds wants two numbers A,B, not {0:?}")]
    BadSeeds(String),

    // ---------------------------------------------------------- files
    /// A file operation failed (the message names the file).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file or directory cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file or directory cannot be created.
    #[error("cannot create {path}: {source}")]
    Create {
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
    /// A symbolic link cannot be made.
    #[error("cannot link {path}: {source}")]
    Link {
        /// The link.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    // ---------------------------------------------------------- recordings
    /// Neither `XDG_DATA_HOME` nor `HOME` is set.
    #[error("neither XDG_DATA_HOME nor HOME is set: give --record a directory")]
    NoDataHome,
    /// `--record=DIR` names a directory that is not empty.
    #[error("the recording directory {0} is not empty")]
    RecordingNotEmpty(PathBuf),
    /// No recording given, and no latest one.
    #[error("no recording given and {path}: {source}")]
    NoLatest {
        /// The `latest` link.
        path: PathBuf,
        /// Why it does not lead to a recording.
        source: std::io::Error,
    },
    /// The manifest cannot be read.
    #[error("{path}: {source} (not a recording?)")]
    NotARecording {
        /// The manifest.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The manifest is damaged.
    #[error("{path}: {why}")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        why: ManifestError,
    },
    /// A sender log does not hold every message its rank sent.
    #[error(
        "the recording is incomplete: {dir} holds {held} message(s) but rank {rank} sent {sent}"
    )]
    Incomplete {
        /// The rank's directory.
        dir: PathBuf,
        /// Messages in its sender log.
        held: usize,
        /// The rank.
        rank: usize,
        /// Messages it said it sent.
        sent: usize,
    },
    /// A recorded sender log cannot be read.
    #[error(transparent)]
    SenderLog(#[from] vpml_sender_log::Error),
    /// Recorded events cannot be read.
    #[error(transparent)]
    StoredEvents(#[from] vpml_event_logger::StorageError),

    // ---------------------------------------------------------- replay
    /// `vpml replay --rank` outside the recorded job.
    #[error("rank {rank} is outside the recorded job of {size} ranks")]
    RankOutsideRecording {
        /// `--rank`.
        rank: usize,
        /// Ranks of the recorded job.
        size: usize,
    },
    /// An MPI C program, and vpml's MPI library cannot be set up for it
    /// (the launcher's error, as `vpml run` words it).
    #[error(transparent)]
    MpiLibrary(Box<dyn std::error::Error + Send + Sync>),
    /// The replayed program does not start.
    #[error("cannot start {program}: {source}")]
    StartProgram {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },

    // ---------------------------------------------------------- trace
    /// Two recordings that cannot be compared.
    #[error("{a} and {b} are not recordings of the same program on the same number of ranks")]
    NotComparable {
        /// First recording.
        a: PathBuf,
        /// Second recording.
        b: PathBuf,
    },
    /// `vpml check-determinism` cannot find its own binary.
    #[error("cannot find vpml: {0}")]
    FindVpml(#[source] std::io::Error),
    /// `vpml check-determinism` cannot run `vpml run`.
    #[error("cannot run vpml: {0}")]
    RunVpml(#[source] std::io::Error),
    /// A run of `vpml check-determinism` failed.
    #[error("the run with chaos seed {seed} failed ({status})")]
    ChaosRunFailed {
        /// Its seed.
        seed: String,
        /// How `vpml run` exited.
        status: ExitStatus,
    },
}

impl Error {
    /// [`Error::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

/// What is wrong with a manifest (the message names the file first).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A value that does not parse.
    #[error("line {line}: bad {key} {value:?}")]
    BadValue {
        /// Line number, from 1.
        line: usize,
        /// Its key.
        key: String,
        /// The value.
        value: String,
    },
    /// A key this vpml does not know.
    #[error("line {line}: unknown key {key:?}")]
    UnknownKey {
        /// Line number, from 1.
        line: usize,
        /// The key.
        key: String,
    },
    /// Written by another version of the format.
    #[error("format version {0} (this vpml reads {FORMAT})")]
    Version(u32),
    /// No `format` line.
    #[error("no format line: not a vpml recording manifest")]
    NoFormat,
    /// `job`, `size` or `program` is missing.
    #[error("incomplete manifest (job, size and program are required)")]
    Incomplete,
}
