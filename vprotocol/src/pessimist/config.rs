//! [`Config`]: everything the pessimist protocol needs to start, from the
//! rank's [`vpml_pml::JobConfig`].

use std::path::PathBuf;

use vpml_pml::bootstrap::JobEnv;
use vpml_pml::config::{ProtocolSettings, SenderLogMode, var};
use vpml_pml::{Error, Result};
use vpml_sender_log::DEFAULT_SEGMENT_SIZE;

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
        Ok(Config {
            job: job.job_id.clone(),
            rank: job.rank,
            incarnation: job.incarnation,
            token: job.token.clone(),
            replicas: settings.replicas.unwrap_or(1).clamp(1, loggers.len()),
            loggers,
            log_dir: log_root.join(format!("rank-{}", job.rank)),
            segment_size: settings.segment_size.unwrap_or(DEFAULT_SEGMENT_SIZE),
            send_eagerly: settings.events_eager,
            loggers_restarted: settings.loggers_restarted,
            keep_logs: settings.keep_logs,
            copies: settings.checkpoint_copies,
            notices: true,
            log_in_memory: settings.sender_log == SenderLogMode::Memory,
        })
    }
}
