//! Durable storage: per job and rank, append-only segment files of
//! checksummed records (layout in the crate documentation).
//!
//! `record` holds the record format (encoding, checking, scanning and
//! reading back a segment's records), `rank_log` the log of one rank (its
//! segments, appending, rotating, truncating); this module the data
//! directory of every job and rank, and the errors.

mod rank_log;
mod record;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::event::{EventBatch, EventId};

pub(crate) use rank_log::RankLog;
pub(crate) use record::read_events;

/// Default size at which a rank's active segment is closed and a new one
/// started.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

/// When a logger acknowledges a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// After the records are written to the file (`write(2)`): survives a
    /// crash of the logger, not of the machine.
    Write,
    /// After a group-committed `fdatasync`: survives a machine crash.
    Fsync,
}

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A record in the middle of a log is damaged.
    #[error(
        "{path}: corrupt record at offset {offset}: {why} (start with --repair to cut the log there)"
    )]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the damaged record.
        offset: u64,
        /// What is wrong.
        why: String,
    },
    /// The rank's log is unusable after an earlier failure.
    #[error("log of this rank failed earlier: {0}")]
    Failed(String),
    /// A put would leave a gap in the ids.
    #[error(
        "events starting at id {first} would leave a gap after the highest stored id {highest}"
    )]
    Gap {
        /// First id of the put.
        first: EventId,
        /// Highest stored id.
        highest: EventId,
    },
    /// A newer incarnation of the rank exists.
    #[error("incarnation {incarnation} is stale: incarnation {current} has connected")]
    Stale {
        /// Incarnation of the request.
        incarnation: u32,
        /// Newest incarnation seen.
        current: u32,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Options of a [`Storage`].
#[derive(Debug, Clone)]
pub struct StorageConfig {
    /// Data directory.
    pub root: PathBuf,
    /// When puts are acknowledged.
    pub durability: Durability,
    /// Segment size limit.
    pub segment_bytes: u64,
    /// Cut logs at corrupt records instead of refusing to start.
    pub repair: bool,
}

fn sync_dir(path: &Path) -> Result<(), StorageError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err(path))
}

fn open_append(path: &Path, create: bool) -> Result<File, StorageError> {
    OpenOptions::new()
        .append(true)
        .create_new(create)
        .open(path)
        .map_err(io_err(path))
}

/// Every stored event of `job`/`rank` under the data directory `root`,
/// read offline (no server), in id order. A missing rank is an empty
/// list; damage is an error naming the file and offset.
pub fn read_stored_events(
    root: &Path,
    job: &str,
    rank: u32,
) -> Result<Vec<(EventId, crate::Event)>, StorageError> {
    let dir = root.join("jobs").join(job).join(rank.to_string());
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    // Read only: a recording is never changed by looking at it.
    let plan = rank_log::read_only_plan(&dir)?;
    let mut out = Vec::new();
    // (`read_events` has checked each batch: it parses.)
    read_events(&plan, 1, |count, bytes| {
        if let Ok(b) = EventBatch::parse(count, bytes) {
            out.extend(b.events());
        }
        Ok(())
    })?;
    Ok(out)
}

/// A rank's log, shared by its connections.
pub(crate) type SharedLog = Arc<Mutex<RankLog>>;

/// The logs of every job and rank under a data directory.
pub(crate) struct Storage {
    cfg: StorageConfig,
    ranks: Mutex<HashMap<(String, u32), SharedLog>>,
}

impl Storage {
    /// Opens a data directory and rebuilds every rank's log from its files.
    pub(crate) fn open(cfg: StorageConfig) -> Result<Storage, StorageError> {
        let jobs = cfg.root.join("jobs");
        std::fs::create_dir_all(&jobs).map_err(io_err(&jobs))?;
        let mut ranks = HashMap::new();
        for job in std::fs::read_dir(&jobs).map_err(io_err(&jobs))? {
            let job = job.map_err(io_err(&jobs))?;
            let name = job.file_name();
            let Some(job_name) = name.to_str().filter(|n| crate::auth::valid_job_name(n)) else {
                tracing::warn!(path = %job.path().display(), "ignoring an entry that is not a job directory");
                continue;
            };
            let job_dir = job.path();
            if !job_dir.is_dir() {
                continue;
            }
            for rank in std::fs::read_dir(&job_dir).map_err(io_err(&job_dir))? {
                let rank = rank.map_err(io_err(&job_dir))?;
                let r = rank
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok());
                let Some(r) = r.filter(|r| rank.file_name().to_str() == Some(&r.to_string()))
                else {
                    tracing::warn!(path = %rank.path().display(), "ignoring an entry that is not a rank directory");
                    continue;
                };
                let log = RankLog::open(&rank.path(), &cfg)?;
                tracing::debug!(
                    job = job_name,
                    rank = r,
                    highest = log.highest(),
                    "rank log loaded"
                );
                ranks.insert((job_name.to_owned(), r), Arc::new(Mutex::new(log)));
            }
        }
        Ok(Storage {
            cfg,
            ranks: Mutex::new(ranks),
        })
    }

    /// Where the checkpoint copies of `job`/`rank` live (see
    /// [`crate::copies`]). `job` must be valid.
    pub(crate) fn copies_dir(&self, job: &str, rank: u32) -> PathBuf {
        crate::copies::dir_of(&self.cfg.root, job, rank)
    }

    /// The log of `job`/`rank`, created if new. `job` must be valid.
    pub(crate) fn rank(&self, job: &str, rank: u32) -> Result<Arc<Mutex<RankLog>>, StorageError> {
        let mut ranks = self.ranks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(log) = ranks.get(&(job.to_owned(), rank)) {
            return Ok(Arc::clone(log));
        }
        let dir = self.cfg.root.join("jobs").join(job).join(rank.to_string());
        let log = Arc::new(Mutex::new(RankLog::open(&dir, &self.cfg)?));
        ranks.insert((job.to_owned(), rank), Arc::clone(&log));
        Ok(log)
    }
}
