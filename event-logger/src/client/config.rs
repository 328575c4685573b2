//! Options of a [`Client`] and its errors.

use std::net::SocketAddr;
use std::time::Duration;

use crate::event::EventId;
use crate::wire::ErrorCode;

#[cfg(doc)]
use super::Client;

/// Options of a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Every logger of the job, in the same order for every rank.
    pub loggers: Vec<SocketAddr>,
    /// Job name.
    pub job: String,
    /// This rank.
    pub rank: u32,
    /// This rank's incarnation (0 at first start, +1 per restart).
    pub incarnation: u32,
    /// The job's token.
    pub token: String,
    /// Loggers that must hold an event before it counts as durable: rank r
    /// uses loggers `(r + j) mod N` for `j` in `0..replicas`.
    pub replicas: usize,
    /// Limit for connecting, for [`Client::wait_durable`] and for requests.
    pub timeout: Duration,
    /// Largest size of the events of one `Put` frame.
    pub max_batch_bytes: usize,
    /// `put` blocks while this many events wait for acknowledgement.
    pub max_pending_events: usize,
    /// Send events as soon as they are put (overlapping the logger round
    /// trip with the caller's work). When false, events wait in the queue
    /// until someone waits for durability or an ack clocks them out: one
    /// socket write per batch instead of one per event, which pays off
    /// where waking the logger costs more than the round trip it hides.
    pub send_eagerly: bool,
    /// Count an event durable once every replica that is *up* holds it, so
    /// the survivors acknowledge while a dead logger is restarted. Only
    /// for loggers that are restarted from their files (which hold all
    /// they acknowledged): with loggers nothing restarts, a dead one would
    /// leave events on fewer than `replicas` loggers. Default: false.
    pub survivors_acknowledge: bool,
}

impl ClientConfig {
    /// A configuration with one replica, a 30 s time-out, 1 MiB puts and at
    /// most 1 Mi events in flight.
    pub fn new(
        loggers: Vec<SocketAddr>,
        job: &str,
        rank: u32,
        incarnation: u32,
        token: &str,
    ) -> Self {
        ClientConfig {
            loggers,
            job: job.to_owned(),
            rank,
            incarnation,
            token: token.to_owned(),
            replicas: 1,
            timeout: Duration::from_secs(30),
            max_batch_bytes: 1 << 20,
            max_pending_events: 1 << 20,
            send_eagerly: true,
            survivors_acknowledge: false,
        }
    }
}

/// A client failure. Once a logger refused or lost events, or returned a
/// storage error, every later call returns that error: events can no longer
/// be made durable and the rank must stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The configuration cannot work.
    #[error("invalid event-logger client configuration: {0}")]
    Config(String),
    /// A logger could not be reached in time.
    #[error("cannot reach event logger {addr} within {waited:?}: {cause}")]
    Unreachable {
        /// The logger.
        addr: SocketAddr,
        /// Time spent trying.
        waited: Duration,
        /// The last connection error.
        cause: String,
    },
    /// A logger refused the session or a put.
    #[error("event logger {addr}: {code}: {message}")]
    Refused {
        /// The logger.
        addr: SocketAddr,
        /// What kind of failure.
        code: ErrorCode,
        /// The logger's explanation.
        message: String,
    },
    /// A logger answered something the protocol does not allow.
    #[error("event logger {addr}: protocol violation: {why}")]
    Protocol {
        /// The logger.
        addr: SocketAddr,
        /// What happened.
        why: String,
    },
    /// An event did not become durable in time.
    #[error("event {id} not durable after {waited:?} (durable up to {durable}; {status})")]
    Timeout {
        /// The event waited for.
        id: EventId,
        /// Highest durable event.
        durable: EventId,
        /// Time waited.
        waited: Duration,
        /// State of each replica.
        status: String,
    },
    /// A request did not complete in time.
    #[error("{what} timed out after {waited:?} ({status})")]
    RequestTimeout {
        /// The request.
        what: &'static str,
        /// Time waited.
        waited: Duration,
        /// State of each replica.
        status: String,
    },
    /// A request failed at the logger.
    #[error("event logger {addr}: {code}: {message}")]
    Request {
        /// The logger.
        addr: SocketAddr,
        /// What kind of failure.
        code: ErrorCode,
        /// The logger's explanation.
        message: String,
    },
    /// Misuse of the API.
    #[error("{0}")]
    Usage(String),
    /// The client was closed.
    #[error("event-logger client is closed")]
    Closed,
}
