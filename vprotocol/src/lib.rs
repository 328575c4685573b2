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
//! * `replay` — re-running one rank of a recording (`vpml replay`); that
//!   protocol lives in the `vpml-replay` crate, which answers from this
//!   crate's [`replay_log`].
//!
//! [`ProtocolName::from_env`] reads the choice; [`from_env`] builds `none`
//! and `pessimist`. The `vpml` facade's `init` picks between it and
//! `vpml-replay` and passes the result to [`vpml_pml::init_with`].

pub mod checkpoint;
pub mod event_log;
mod histogram;
mod offhost;
pub mod pessimist;
mod previous_sends;
pub mod replay_log;

use std::net::SocketAddr;
use std::path::PathBuf;

use vpml_pml::bootstrap::JobEnv;
use vpml_pml::protocol::Protocol;
use vpml_pml::{Error, Result};

/// Environment variables the launcher sets for the protocol layer.
pub mod env {
    /// `none` (default), `pessimist` or `replay` ([`super::ProtocolName`]).
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

/// A protocol this build knows, as `VPML_PROTOCOL` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolName {
    /// `none` (or unset, or empty): no protocol object.
    None,
    /// `pessimist`: pessimistic sender-based message logging.
    Pessimist,
    /// `replay`: `vpml replay`'s protocol (built by `vpml-replay`).
    Replay,
}

impl ProtocolName {
    /// Every protocol, in the order error messages list them.
    pub const ALL: [ProtocolName; 3] = [
        ProtocolName::None,
        ProtocolName::Pessimist,
        ProtocolName::Replay,
    ];

    /// The name `VPML_PROTOCOL` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolName::None => "none",
            ProtocolName::Pessimist => "pessimist",
            ProtocolName::Replay => "replay",
        }
    }

    /// A value of `VPML_PROTOCOL` (empty means `none`); an unknown name is
    /// a [`Error::Bootstrap`] that lists the known ones.
    pub fn parse(name: &str) -> Result<ProtocolName> {
        if name.is_empty() {
            return Ok(ProtocolName::None);
        }
        ProtocolName::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = ProtocolName::ALL.iter().map(|p| p.as_str()).collect();
                Error::Bootstrap(format!(
                    "unknown protocol {name:?} in {} (known: {})",
                    env::PROTOCOL,
                    known.join(", ")
                ))
            })
    }

    /// The protocol this process's environment asks for (`none` when
    /// `VPML_PROTOCOL` is unset).
    pub fn from_env() -> Result<ProtocolName> {
        match std::env::var(env::PROTOCOL) {
            Ok(name) => ProtocolName::parse(&name),
            Err(_) => Ok(ProtocolName::None),
        }
    }
}

/// Build the protocol the environment asks for (`None` for `none`).
///
/// A one-rank job started without `vpml run` may still ask for `pessimist`
/// when it is given loggers and a log directory; otherwise it runs with none.
/// `replay` is not built here (it lives in `vpml-replay`, which depends on
/// this crate): asking for it is an error that says to start through
/// `vpml::init`.
pub fn from_env(job: Option<&JobEnv>) -> Result<Option<Box<dyn Protocol>>> {
    match ProtocolName::from_env()? {
        ProtocolName::None => Ok(None),
        ProtocolName::Pessimist => {
            let job = job.ok_or_else(|| {
                Error::Bootstrap("the pessimist protocol needs a job started by `vpml run`".into())
            })?;
            let cfg = pessimist::Config::from_env(job)?;
            Ok(Some(Box::new(pessimist::Pessimist::start(cfg)?)))
        }
        ProtocolName::Replay => Err(Error::Bootstrap(format!(
            "{}=replay is built by vpml-replay: start the rank with vpml::init",
            env::PROTOCOL
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

#[cfg(test)]
mod tests {
    use super::ProtocolName;

    #[test]
    fn protocol_names_parse_and_unknown_ones_are_listed() {
        for p in ProtocolName::ALL {
            assert_eq!(ProtocolName::parse(p.as_str()).ok(), Some(p));
        }
        assert_eq!(ProtocolName::parse("").ok(), Some(ProtocolName::None));
        let e = ProtocolName::parse("optimist").err().map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains(
                "unknown protocol \"optimist\" in VPML_PROTOCOL (known: none, pessimist, replay)"
            )),
            "{e:?}"
        );
    }
}
