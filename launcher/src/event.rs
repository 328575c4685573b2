//! What the launcher's threads (rank watchers, the key/value service,
//! agent connections, logger watchers, the signal handler) report to the
//! supervisor.

use std::process::ExitStatus;

/// What the launcher's threads report to its main loop.
#[derive(Debug)]
pub(crate) enum Event {
    Exited {
        rank: usize,
        /// Set for a child of this launcher (to reap it).
        pid: Option<i32>,
        incarnation: u32,
        status: ExitStatus,
    },
    Finalized {
        rank: usize,
        incarnation: u32,
    },
    /// The rank's first process is past start-up (see `KvClient::joined`).
    Joined {
        rank: usize,
    },
    Abort {
        rank: usize,
        incarnation: u32,
        code: i32,
        message: String,
    },
    Signal(i32),
    /// A global checkpoint is asked for (`by` says who); `reply` gets its
    /// number once it is complete, or why it was not taken.
    CheckpointRequest {
        by: String,
        reply: Option<crossbeam_channel::Sender<Result<u32, String>>>,
    },
    /// Event logger `index` (its process `pid`) exited.
    LoggerExited {
        index: usize,
        pid: u32,
        status: ExitStatus,
    },
    /// A host's agent is gone (its ranks with it).
    AgentLost {
        host: usize,
        name: String,
        why: String,
    },
}
