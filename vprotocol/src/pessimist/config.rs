//! [`Config`]: everything the pessimist protocol needs to start, from the
//! rank's [`vpml_pml::JobConfig`].

use std::path::PathBuf;

use vpml_pml::bootstrap::JobEnv;
use vpml_pml::config::{ProtocolSettings, SenderLogMode, var};
use vpml_pml::{Error, Result};
use vpml_sender_log::{DEFAULT_SEGMENT_SIZE, SPILL_DIR};

/// Everything the pessimist protocol needs to start.
#[derive(Clone, Debug)]
pub struct Config {
    /// Job id (the loggers' job name).
    pub job: String,
    /// This rank.
    pub rank: usize,
    /// Incarnation of this process.
    pub incarnation: u32,
    /// The job token.
    pub token: String,
    /// Event loggers.
    pub loggers: Vec<std::net::SocketAddr>,
    /// Loggers that must hold an event before it is durable.
    pub replicas: usize,
    /// This rank's sender-log directory.
    pub log_dir: PathBuf,
    /// Sender-log segment size.
    pub segment_size: usize,
    /// Bytes of memory the sender log may hold; full segments move to
    /// `spill_dir` so that it stays within them (`vpml run
    /// --sender-log-limit`). `None`: no limit, nothing moves (the
    /// simulator's choice for some seeds).
    pub memory_limit: Option<usize>,
    /// Where the sender log moves segments out of memory.
    pub spill_dir: PathBuf,
    /// Keep the sender log in memory (spilled to a file at each
    /// checkpoint) rather than in files. `VPML_SENDER_LOG=memory|file`.
    pub log_in_memory: bool,
    /// Never free events or log records (`vpml run --record`:
    /// `VPML_KEEP_LOGS=1`).
    pub keep_logs: bool,
    /// Send each event to the loggers as soon as it exists (`true`), or
    /// batch them until the next send needs them (the default; each socket
    /// write that wakes a logger costs ~10 µs on virtual machines).
    /// `VPML_EVENTS_EAGER=1` selects eager sending.
    pub send_eagerly: bool,
    /// The loggers are restarted from their files when they die (`vpml
    /// run` started them: `VPML_LOGGERS_RESTARTED=1`), so the survivors
    /// may acknowledge meanwhile.
    pub loggers_restarted: bool,
    /// Copy every checkpoint to the event loggers, for a restart on
    /// another host (`VPML_CHECKPOINT_COPIES=loggers`).
    pub copies: bool,
    /// Print the one-line notices of a restart on stderr (a lost host, a
    /// damaged checkpoint). The simulator, which restarts ranks by the
    /// thousand, turns them off.
    pub notices: bool,
}

impl Config {
    /// The configuration of rank `job` from the protocol settings `vpml run
    /// --protocol pessimist` hands it.
    pub fn new(job: &JobEnv, settings: &ProtocolSettings) -> Result<Config> {
        let loggers = settings.event_loggers.clone();
        if loggers.is_empty() {
            return Err(Error::Bootstrap(format!(
                "{} lists no logger",
                var::EVENT_LOGGERS
            )));
        }
        let log_root = settings
            .log_dir
            .as_ref()
            .ok_or_else(|| Error::Bootstrap(format!("{} is not set", var::LOG_DIR)))?;
        let rank_dir = format!("rank-{}", job.rank);
        let segment_size = settings.segment_size.unwrap_or(DEFAULT_SEGMENT_SIZE);
        Ok(Config {
            memory_limit: Some(settings.sender_log_limit.map_or_else(
                || default_memory_limit(job.local_size, segment_size),
                |b| usize::try_from(b).unwrap_or(usize::MAX),
            )),
            spill_dir: settings
                .spill_dir
                .as_ref()
                .unwrap_or(log_root)
                .join(&rank_dir)
                .join(SPILL_DIR),
            job: job.job_id.clone(),
            rank: job.rank,
            incarnation: job.incarnation,
            token: job.token.clone(),
            replicas: settings.replicas.unwrap_or(1).clamp(1, loggers.len()),
            loggers,
            log_dir: log_root.join(&rank_dir),
            segment_size,
            send_eagerly: settings.events_eager,
            loggers_restarted: settings.loggers_restarted,
            keep_logs: settings.keep_logs,
            copies: settings.checkpoint_copies,
            notices: true,
            log_in_memory: settings.sender_log == SenderLogMode::Memory,
        })
    }
}

/// The memory a rank's sender log may hold when `--sender-log-limit` does
/// not say: a quarter of the host's memory, shared by its `local_ranks`,
/// and at least four segments. A quarter leaves the application its own
/// and the kernel its page cache; a log that would grow past it moves its
/// oldest segments to disk instead.
pub fn default_memory_limit(local_ranks: usize, segment_size: usize) -> usize {
    let info = rustix::system::sysinfo();
    let total = (info.totalram as u128).saturating_mul(u128::from(info.mem_unit.max(1)));
    let share = total / 4 / local_ranks.max(1) as u128;
    usize::try_from(share)
        .unwrap_or(usize::MAX)
        .max(4 * segment_size)
}
