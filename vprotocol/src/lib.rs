//! # vpml-vprotocol — the protocol layer
//!
//! A fault-tolerance protocol wraps the point-to-point engine at run time
//! through the hooks of [`vpml_pml::protocol::Protocol`]. The same
//! application binary runs with any of them; the launcher chooses with
//! `vpml run --protocol …`, which reaches the ranks as `VPML_PROTOCOL`:
//!
//! * `none` — no protocol object at all: the engine runs untouched (zero
//!   cost).
//! * `pessimist` — uncoordinated checkpointing with pessimistic,
//!   sender-based message logging ([`pessimist`]): non-deterministic events
//!   go to the event loggers and are durable before the next send leaves;
//!   every sent payload stays in the sender's memory-mapped log.
//!
//! [`from_env`] builds the protocol a rank's environment asks for; the `vpml`
//! facade passes it to [`vpml_pml::init_with`].

pub mod checkpoint;
pub mod event_log;
mod histogram;
mod offhost;
pub mod pessimist;
mod previous_sends;
pub mod replay;
mod replay_log;

use std::net::SocketAddr;
use std::path::PathBuf;

use vpml_pml::bootstrap::JobEnv;
use vpml_pml::protocol::Protocol;
use vpml_pml::{Error, Result};

/// Environment variables the launcher sets for the protocol layer.
pub mod env {
    /// `none` (default) or `pessimist`.
    pub const PROTOCOL: &str = "VPML_PROTOCOL";
    /// Comma-separated addresses of the job's event loggers.
    pub const EVENT_LOGGERS: &str = "VPML_EVENT_LOGGERS";
    /// How many loggers must hold an event before it is durable.
    pub const REPLICAS: &str = "VPML_REPLICAS";
    /// Directory under which each rank keeps its sender log (`rank-<r>/`).
    pub const LOG_DIR: &str = "VPML_LOG_DIR";
    /// This process's incarnation (0 at first start).
    pub const INCARNATION: &str = "VPML_INCARNATION";
}

/// The protocols this build knows, by name.
pub const PROTOCOLS: [&str; 3] = ["none", "pessimist", "replay"];

/// Build the protocol the environment asks for (`None` for `none`).
///
/// A one-rank job started without `vpml run` may still ask for `pessimist`
/// when it is given loggers and a log directory; otherwise it runs with none.
pub fn from_env(job: Option<&JobEnv>) -> Result<Option<Box<dyn Protocol>>> {
    let name = std::env::var(env::PROTOCOL).unwrap_or_else(|_| "none".into());
    match name.as_str() {
        "" | "none" => Ok(None),
        "replay" => {
            let job = job.ok_or_else(|| {
                Error::Bootstrap("replay needs the environment `vpml replay` sets".into())
            })?;
            let dir = replay::Replayer::dir_from_env().ok_or_else(|| {
                Error::Bootstrap(format!("{} is not set", replay::env::REPLAY_DIR))
            })?;
            Ok(Some(Box::new(replay::Replayer::start(job, &dir)?)))
        }
        "pessimist" => {
            let job = job.ok_or_else(|| {
                Error::Bootstrap("the pessimist protocol needs a job started by `vpml run`".into())
            })?;
            let cfg = pessimist::Config::from_env(job)?;
            Ok(Some(Box::new(pessimist::Pessimist::start(cfg)?)))
        }
        other => Err(Error::Bootstrap(format!(
            "unknown protocol {other:?} in {} (known: {})",
            env::PROTOCOL,
            PROTOCOLS.join(", ")
        ))),
    }
}

fn var(name: &str) -> Result<String> {
    std::env::var(name).map_err(|_| Error::Bootstrap(format!("{name} is not set")))
}

fn parse_addrs(list: &str) -> Result<Vec<SocketAddr>> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|a| {
            a.trim().parse().map_err(|_| {
                Error::Bootstrap(format!("{}: {a:?} is not an address", env::EVENT_LOGGERS))
            })
        })
        .collect()
}

fn log_dir(rank: usize) -> Result<PathBuf> {
    Ok(PathBuf::from(var(env::LOG_DIR)?).join(format!("rank-{rank}")))
}
