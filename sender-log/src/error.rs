//! The crate's error type, and a helper that names the file in an I/O error.

use std::path::{Path, PathBuf};

use crate::index::MAX_DESTINATIONS;

/// Errors of the sender log; each names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file operation failed (including a full disk at segment creation).
    #[error("sender log {path}: {what}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A record was appended for a rank of [`MAX_DESTINATIONS`] or above.
    #[error("sender log {path}: destination rank {dest} is out of range (at most {max})", max = MAX_DESTINATIONS - 1)]
    DestinationOutOfRange {
        /// The log directory.
        path: PathBuf,
        /// The rank asked for.
        dest: u32,
    },
    /// A bounded log holds as much memory as it may, and no full segment
    /// can move to disk (see [`SenderLog::bound`](crate::SenderLog::bound)).
    #[error("the sender log is full: {} in memory (its limit) and nothing more can move to {}: {cause}", size(*memory), dir.display())]
    Full {
        /// The memory limit, in bytes.
        memory: usize,
        /// The spill directory.
        dir: PathBuf,
        /// Why nothing can move there (the last copy's error).
        cause: String,
    },
    /// A segment does not have the expected format.
    #[error("sender log {path}: {reason}")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// What is wrong, with the offset.
        reason: String,
    },
}

/// Result of sender-log operations.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// `bytes` in the largest binary unit that divides it, for messages.
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}
