//! [`Config`]: everything the pessimist protocol needs to start, and how
//! `vpml run --protocol pessimist` hands it to a rank (environment
//! variables).

use std::path::PathBuf;

use vpml_pml::bootstrap::JobEnv;
use vpml_pml::{Error, Result};
use vpml_sender_log::DEFAULT_SEGMENT_SIZE;

use crate::env;

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
    /// Read the configuration `vpml run --protocol pessimist` sets up.
    pub fn from_env(job: &JobEnv) -> Result<Config> {
        let loggers = crate::parse_addrs(&crate::var(env::EVENT_LOGGERS)?)?;
        if loggers.is_empty() {
            return Err(Error::Bootstrap(format!(
                "{} lists no logger",
                env::EVENT_LOGGERS
            )));
        }
        let num = |name: &str, default: usize| -> Result<usize> {
            match std::env::var(name) {
                Ok(v) => v
                    .parse()
                    .map_err(|_| Error::Bootstrap(format!("{name}={v:?} is not a number"))),
                Err(_) => Ok(default),
            }
        };
        Ok(Config {
            job: job.job_id.clone(),
            rank: job.rank,
            incarnation: num(env::INCARNATION, 0)? as u32,
            token: job.token.clone(),
            replicas: num(env::REPLICAS, 1)?.clamp(1, loggers.len()),
            loggers,
            log_dir: crate::log_dir(job.rank)?,
            segment_size: num("VPML_LOG_SEGMENT_SIZE", DEFAULT_SEGMENT_SIZE)?,
            send_eagerly: num("VPML_EVENTS_EAGER", 0)? != 0,
            loggers_restarted: num("VPML_LOGGERS_RESTARTED", 0)? != 0,
            keep_logs: num("VPML_KEEP_LOGS", 0)? != 0,
            copies: crate::offhost::enabled()?,
            notices: true,
            log_in_memory: match std::env::var("VPML_SENDER_LOG").as_deref() {
                Ok("memory") => true,
                Ok("file") | Ok("") | Err(_) => false,
                Ok(other) => {
                    return Err(Error::Bootstrap(format!(
                        "VPML_SENDER_LOG={other:?}: expected memory or file"
                    )));
                }
            },
        })
    }
}
