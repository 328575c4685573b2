//! # vpml-event-logger — stable storage for the pessimist protocol's events
//!
//! A rank running under the pessimist protocol logs its non-deterministic
//! events (determinants: which source an `ANY_SOURCE` receive matched, what a
//! test returned, …) and may not send an application message before every
//! event it created is durable. This crate holds both halves of that:
//!
//! * [`Server`] — the logger (`vpml event-logger`, or embedded): a standalone
//!   process that stores the events of every rank of a job in append-only
//!   segment files and acknowledges them once written (`write`) or fsynced
//!   (`fsync`, group commit).
//! * [`Client`] — what a rank links: numbers its events, batches and
//!   pipelines them to one or more loggers, and blocks in
//!   [`Client::wait_durable`] for the commit rule.
//!
//! ## Event numbering
//!
//! The **client** numbers the events of a rank 1, 2, 3, … without gaps
//! ([`EventId`]). The events themselves carry the protocol's call ids
//! ([`Event`]). Dense numbering lets a logger recognise repeated puts
//! (idempotence after a reconnect), detect lost ones (a gap is refused) and
//! lets "every event created before this send" be a single id: the commit
//! rule is `client.wait_durable(client.last_id())`
//! ([`Client::wait_all_durable`]). A restarted rank continues after the
//! highest id any replica holds: `Welcome` reports it.
//!
//! ## Several loggers
//!
//! With loggers `L0 … L(N-1)` (same list for every rank) and `replicas = K`,
//! rank `r` sends its events to `L((r + j) mod N)` for `j` in `0..K`; an event
//! is durable when all K acknowledged it, so K−1 logger crashes lose no
//! durable event. While a replica is down the rank keeps running until it
//! needs durability; the client reconnects and resends what that logger
//! lacks (puts are idempotent). Where a dead logger is restarted from its
//! files (loggers `vpml run` starts; `ClientConfig::survivors_acknowledge`),
//! an event is durable once every replica that is *up* acknowledged it: the
//! survivors acknowledge while one restarts, and the client keeps every
//! event until all replicas hold it. At connect, a replica that misses events
//! another replica holds (the previous incarnation died between the two
//! puts) gets them copied from the most complete replica.
//!
//! ## Security
//!
//! Loggers bind loopback unless told otherwise. Every connection starts with
//! `Hello{job, token}`; the logger serves only the jobs of its token file
//! (`JOB TOKEN` lines, `*` for any job; see [`Tokens`]). Without a token
//! file the CLI uses `DATA_DIR/tokens`, creating it (mode 0600, data dir
//! 0700) with a random token for any job, so an unconfigured logger is
//! never open. A bad token, an unknown job, a malformed, oversized or
//! truncated frame, or a request breaking the rules closes that connection
//! only, with an `Error` frame and a `warn` log line naming the peer and
//! the reason. A storage failure (full disk, I/O error) is answered with an
//! `Error` and never with an `Ack`.
//!
//! ## Wire protocol, version 1
//!
//! All integers are little-endian. A connection carries frames:
//!
//! ```text
//! offset size field
//!  0      4   magic "VPEL"
//!  4      2   version (1)
//!  6      1   message kind
//!  7      1   flags (0; anything else is refused)
//!  8      4   payload length (≤ 16 MiB, checked before anything is read)
//! 12      4   CRC-32C of bytes 0..12 followed by the payload
//! 16      …   payload
//! ```
//!
//! Strings are a `u16` length and UTF-8 bytes. A payload must be consumed
//! exactly (trailing bytes are an error). Messages, client → logger:
//!
//! | kind | message | payload |
//! |---|---|---|
//! | 0x01 | `Hello` | job: string (1–64 bytes of `[A-Za-z0-9_.-]`, not starting with `.`), rank u32, incarnation u32, token: string (≤ 256) |
//! | 0x02 | `Put` | rank u32, count u32, `count` events |
//! | 0x03 | `Get` | req u64, rank u32, from u64 |
//! | 0x04 | `Truncate` | req u64, rank u32, up_to u64 |
//! | 0x05 | `Stats` | req u64 |
//! | 0x06 | `Bye` | — |
//!
//! logger → client:
//!
//! | kind | message | payload |
//! |---|---|---|
//! | 0x81 | `Welcome` | highest u64, first_kept u64 |
//! | 0x82 | `Ack` | highest u64 |
//! | 0x83 | `Events` | req u64, last u8 (0/1), count u32, `count` events |
//! | 0x84 | `Truncated` | req u64, segments u32, bytes u64 |
//! | 0x85 | `StatsReply` | req u64, 11 × u64 (see [`wire::Stats`], in field order) |
//! | 0x86 | `Error` | req u64 (0 = the session; the logger closes after it), code u16, message: string (≤ 4096) |
//! | 0x87 | `Goodbye` | — |
//!
//! An event is `id u64, kind u8, body`:
//!
//! | kind | event | body |
//! |---|---|---|
//! | 1 | `Match` | recv u64, source u32 |
//! | 2 | `Probe` | call u64, found u8 (0/1), source u32, tag i32, length u64 |
//! | 3 | `Delivery` | call u64, n u32, n × request id u64 |
//! | 4 | `NoneRun` | first u64, last u64 (first ≤ last) |
//! | 5 | `Cancel` | call u64, cancelled u8 (0/1) |
//!
//! The events of one `Put` or `Events` have consecutive ids; a `Put`'s
//! events take at most 16 MiB − 64 bytes. Error codes: 1 malformed, 2 too
//! large, 3 authentication failed, 4 stale incarnation, 5 storage, 6 bad
//! request, 7 unavailable.
//!
//! Rules:
//!
//! 1. The first frame is `Hello`, within 10 s. The logger checks job and
//!    token and refuses an incarnation older than the newest one seen for
//!    that rank (persisted); it answers `Welcome` with the highest stored id
//!    (fsynced first in `fsync` mode) and the lowest id still stored.
//! 2. `Put` is for the session's rank. Ids ≤ the highest stored are ignored
//!    (idempotence); the rest must continue the stored ids without a gap.
//!    Many puts may be in flight. `Ack{highest}` is cumulative: every id
//!    ≤ `highest` of the rank is durable. Acks may be coalesced.
//! 3. `Get` may name any rank of the session's job; the answer is `Events`
//!    chunks in id order (≤ ~1 MiB each), the last one with `last = 1`.
//! 4. `Truncate` deletes the rank's segment files holding only ids
//!    ≤ `up_to`; the highest id is remembered.
//! 5. `Bye` is answered by a final `Ack` and `Goodbye`; then the logger
//!    closes.
//! 6. Replies to `Get`/`Truncate`/`Stats` carry the request's `req`; they may
//!    interleave with `Ack`s.
//!
//! ## Storage
//!
//! `DATA_DIR/jobs/JOB/RANK/` holds `seg-<first id, 20 digits>.log` files and
//! an `incarnation` file. A segment is a sequence of records, one per put
//! (only the events not yet stored):
//!
//! ```text
//! offset size field
//!  0      4   magic "VPLR"
//!  4      2   version (1)
//!  6      2   reserved (0)
//!  8      4   length of the events
//! 12      4   count (≥ 1)
//! 16      8   first id
//! 24      8   last id (= first + count − 1)
//! 32      4   CRC-32C of bytes 0..32 followed by the events
//! 36      …   the events, encoded as on the wire
//! ```
//!
//! A record is written with one `write(2)`. When the active segment would
//! exceed the segment size a new one is started. On start every segment is
//! read and checked (magic, checksum, events, continuity of ids). A damaged
//! **last** record of the **last** segment (cut short, or zero-filled) is a
//! torn write: it is cut off with a warning. Damage anywhere else stops the
//! logger with an error naming the file and offset; with `--repair` the log
//! is cut there instead (later segments are renamed `*.corrupt`), keeping a
//! gap-free prefix. A write that fails (e.g. full disk) is undone with
//! `ftruncate` and answered with an `Error`.
//!
//! ## Embedding
//!
//! ```no_run
//! use vpml_event_logger::{CallId, Client, ClientConfig, Event, Server, ServerConfig, Tokens};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tokens = Tokens::single(Some("job1"), "0123456789abcdef0123")?;
//! let server = Server::bind(ServerConfig::new("/tmp/el-data", tokens))?;
//! let cfg = ClientConfig::new(vec![server.local_addr()], "job1", 0, 0, "0123456789abcdef0123");
//! let client = Client::connect(cfg)?;
//! let id = client.put(&Event::Match { recv: CallId::new(0, 7), source: 2 })?;
//! client.wait_durable(id)?; // now the rank may send
//! client.close()?;
//! server.shutdown();
//! # Ok(()) }
//! ```

mod auth;
mod bytes;
pub mod cli;
mod client;
pub mod copies;
mod event;
mod server;
mod storage;
pub mod strangers;
pub mod wire;

pub use auth::{MIN_TOKEN_LEN, TokenError, Tokens, random_token, valid_job_name};
pub use client::{Client, ClientConfig, ClientError};
pub use event::{CallId, Event, EventBatch, EventId};
pub use server::{HELLO_MAX_FRAME, MAX_PUT_EVENT_BYTES, Server, ServerConfig, ServerError};
pub use storage::{DEFAULT_SEGMENT_BYTES, Durability, StorageError, read_stored_events};
pub use strangers::Strangers;
