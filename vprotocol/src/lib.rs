//! # vpml-vprotocol — the protocol layer
//!
//! A fault-tolerance protocol wraps the point-to-point engine at run time
//! through the hooks of [`vpml_pml::protocol::Protocol`]. The same
//! application binary runs with any of them; the launcher chooses with
//! `vpml run --protocol …`, which reaches the ranks as `VPML_PROTOCOL`:
//!
//! * `none` — the engine's own `NoProtocol`: nothing is kept or logged.
//! * `pessimist` — uncoordinated checkpointing with pessimistic,
//!   sender-based message logging ([`pessimist`]): non-deterministic events
//!   go to the event loggers and are durable before the next send leaves;
//!   every sent payload stays in the sender's memory-mapped log.
//! * `coordinated` — coordinated checkpoint/restart ([`coordinated`]):
//!   the ranks checkpoint together at the program's checkpoint calls,
//!   channels drained, and all restart from the last global checkpoint.
//! * `replay` — re-running one rank of a recording (`vpml replay`); that
//!   protocol lives in the `vpml-replay` crate, which answers from this
//!   crate's [`replay_log`].
//!
//! The choice is the [`ProtocolName`] of the process's
//! [`JobConfig`]; [`build`] builds `none`, `pessimist` and `coordinated`. The `vpml` facade's `init` picks between it and
//! `vpml-replay` and passes the result to [`vpml_pml::init_with`].

pub mod checkpoint;
pub mod coordinated;
pub mod event_log;
mod histogram;
mod offhost;
pub mod pessimist;
mod previous_sends;
pub mod replay_log;

use vpml_pml::config::JobConfig;
use vpml_pml::protocol::{KeptBytes, LoggedMessage, Protocol};
use vpml_pml::{Error, Result};

pub use vpml_pml::config::ProtocolName;

/// A sender-log record lent to the engine to send (again): its payload
/// stays in the log's mapping.
///
/// # Safety
/// The record's payload stays valid and unchanged for as long as the
/// engine may read it (the contract of [`KeptBytes::new`]).
pub unsafe fn logged_message(r: vpml_sender_log::Record<'_>) -> LoggedMessage {
    LoggedMessage {
        context: r.header.context,
        tag: r.header.tag,
        seq: r.header.seq,
        // SAFETY: the caller's contract.
        bytes: unsafe { KeptBytes::new(r.payload) },
    }
}

/// Build the protocol `cfg` asks for (`None` for `none`).
///
/// A one-rank job started without `vpml run` may still ask for `pessimist`
/// when it is given loggers and a log directory; otherwise it runs with none.
/// `replay` is not built here (it lives in `vpml-replay`, which depends on
/// this crate): asking for it is an error that says to start through
/// `vpml::init`.
pub fn build(cfg: &JobConfig) -> Result<Option<Box<dyn Protocol>>> {
    match cfg.protocol.name {
        ProtocolName::None => Ok(None),
        ProtocolName::Pessimist => {
            let job = cfg.job.as_ref().ok_or_else(|| {
                Error::Bootstrap("the pessimist protocol needs a job started by `vpml run`".into())
            })?;
            let config = pessimist::Config::new(job, &cfg.protocol)?;
            Ok(Some(Box::new(pessimist::Pessimist::start(config)?)))
        }
        ProtocolName::Coordinated => {
            let job = cfg.job.as_ref().ok_or_else(|| {
                Error::Bootstrap(
                    "the coordinated protocol needs a job started by `vpml run`".into(),
                )
            })?;
            Ok(Some(Box::new(coordinated::Coordinated::start(
                job,
                &cfg.protocol,
            )?)))
        }
        ProtocolName::Replay => Err(Error::Bootstrap(
            "the replay protocol is built by vpml-replay: start the rank with vpml::init".into(),
        )),
    }
}
