//! Typed errors of the engine.

use std::io;

/// Convenience alias for results of vpml operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a vpml call.
///
/// Every variant renders as one readable line naming the cause.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A message was longer than the receive buffer. The buffer holds the
    /// first `buffer_len` bytes of the message.
    #[error(
        "message truncated: {message_len} bytes from rank {source_rank} (tag {tag}) do not fit a {buffer_len}-byte receive buffer"
    )]
    Truncated {
        /// Rank that sent the message.
        source_rank: usize,
        /// Tag of the message.
        tag: i32,
        /// Length of the message in bytes.
        message_len: usize,
        /// Length of the receive buffer in bytes.
        buffer_len: usize,
    },
    /// A rank argument was outside `0..size` (and not a wildcard where one is allowed).
    #[error("invalid rank {rank}: the communicator has {size} ranks")]
    InvalidRank {
        /// The rank that was passed.
        rank: i64,
        /// Size of the communicator.
        size: usize,
    },
    /// A tag argument was negative (and not `ANY_TAG` where that is allowed).
    #[error("invalid tag {0}: tags are non-negative")]
    InvalidTag(i32),
    /// The received byte count is not a whole number of elements of the requested type.
    #[error("received {bytes} bytes, not a whole number of {elem_size}-byte elements")]
    PartialElement {
        /// Bytes received.
        bytes: usize,
        /// Size of one element.
        elem_size: usize,
    },
    /// A request was used in a state that does not allow the operation
    /// (e.g. starting a persistent request that is already active).
    #[error("invalid request use: {0}")]
    RequestState(&'static str),
    /// The environment set up by `vpml run` is missing or malformed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// Shared-memory setup or a shared-memory operation failed.
    #[error("shared memory: {what}: {source}")]
    Shm {
        /// What was being done.
        what: String,
        /// The operating-system error.
        #[source]
        source: io::Error,
    },
    /// A peer wrote a frame that does not decode; the channel cannot be trusted any more.
    #[error("corrupt frame from rank {peer}: {reason}")]
    CorruptFrame {
        /// Rank that wrote the frame.
        peer: usize,
        /// What was wrong with it.
        reason: String,
    },
    /// Reading a large message out of the sender's memory failed.
    #[error("reading {len} bytes from rank {peer} failed: {source}")]
    RemoteRead {
        /// Sender rank.
        peer: usize,
        /// Bytes requested.
        len: usize,
        /// The operating-system error.
        #[source]
        source: io::Error,
    },
    /// The connection to the launcher broke.
    #[error("lost the launcher: {0}")]
    LauncherLost(String),
    /// The members of a collective passed arguments that do not fit together
    /// (buffer sizes, counts, roots).
    #[error("collective call mismatch: {0}")]
    Collective(String),
    /// An earlier fatal error (corrupt channel, lost launcher) left this rank
    /// unable to communicate; every later call reports it.
    #[error("this rank can no longer communicate: {0}")]
    EngineFailed(String),
    /// A restarted rank's re-execution does not fit its logged execution
    /// (a send differs from the one its peer already has, or a call from
    /// its logged outcome): continuing could change the job's answer, so
    /// the job stops. The text names rank, incarnation, call, event or
    /// message, expected and found.
    #[error("{0}")]
    Diverged(String),
    /// A restarted rank needs messages this rank can no longer give it
    /// (its sender log is damaged, or lacks one): the job's answer could
    /// no longer be the failure-free one, so the job stops. The text names
    /// both ranks and what is wrong (a damaged record's file and offset).
    #[error("{0}")]
    Unrecoverable(String),
    /// A call made on the wrong kind of communicator: one MPI defines for
    /// intracommunicators only, on an intercommunicator, or the reverse.
    #[error("{0}")]
    CommKind(String),
    /// The operation was cancelled (reported in the status of a cancelled receive).
    #[error("the request was cancelled")]
    Cancelled,
}

impl Error {
    /// The one line of a re-execution that left its logged execution.
    pub fn diverged(rank: usize, incarnation: u32, what: impl std::fmt::Display) -> Self {
        Error::Diverged(format!(
            "rank {rank} (incarnation {incarnation}) diverged from its logged execution: {what}"
        ))
    }

    pub(crate) fn shm(what: impl Into<String>, source: io::Error) -> Self {
        Error::Shm {
            what: what.into(),
            source,
        }
    }
}
