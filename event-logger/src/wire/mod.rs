//! Frames and messages of the event-logger protocol (specified in the crate
//! documentation). Every decoder here takes untrusted bytes.
//!
//! This module holds the messages and their constants; `decode` turns
//! bytes into frames and messages, `encode` messages into frames.

mod decode;
mod encode;
#[cfg(test)]
mod tests;

use crate::event::{EventBatch, EventId};

pub use decode::{Decoded, FrameHeader, decode_frame};
pub use encode::encode_frame;
pub(crate) use encode::{encode_events_raw, encode_put_raw};

/// First bytes of every frame.
pub const FRAME_MAGIC: [u8; 4] = *b"VPEL";
/// Version of the protocol this crate speaks.
pub const PROTOCOL_VERSION: u16 = 3;
/// Size of the frame header.
pub const HEADER_LEN: usize = 16;
/// Default and largest accepted payload size of one frame (16 MiB).
pub const MAX_FRAME: u32 = 16 << 20;
/// Longest job name.
pub const MAX_JOB_LEN: usize = 64;
/// Longest token.
pub const MAX_TOKEN_LEN: usize = 256;
/// Longest error message carried by an `Error` frame.
pub const MAX_MESSAGE_LEN: usize = 4096;

/// Why bytes could not be decoded as a frame or message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The input ended inside a structure.
    #[error("truncated {what}: {need} more bytes needed")]
    Truncated {
        /// The structure being read.
        what: &'static str,
        /// Missing bytes.
        need: usize,
    },
    /// The frame does not start with [`FRAME_MAGIC`].
    #[error("bad frame magic {0:02x?}")]
    BadMagic([u8; 4]),
    /// The peer speaks another protocol version.
    #[error("unsupported protocol version {0} (this side speaks {PROTOCOL_VERSION})")]
    Version(u16),
    /// The announced payload exceeds the limit.
    #[error("frame payload of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Announced payload length.
        len: u32,
        /// Limit in force.
        max: u32,
    },
    /// The checksum does not match the content.
    #[error("frame checksum mismatch (frame says {stored:#010x}, content gives {computed:#010x})")]
    Checksum {
        /// Checksum in the header.
        stored: u32,
        /// Checksum of the bytes received.
        computed: u32,
    },
    /// The message kind byte is unknown.
    #[error("unknown message kind {0:#04x}")]
    UnknownKind(u8),
    /// A field has an impossible value.
    #[error("malformed {what}: {why}")]
    Malformed {
        /// The structure being read.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
}

impl From<vpml_codec::Error> for WireError {
    fn from(e: vpml_codec::Error) -> Self {
        match e {
            vpml_codec::Error::Truncated { what, need } => WireError::Truncated { what, need },
            vpml_codec::Error::Malformed { what, why } => WireError::Malformed { what, why },
        }
    }
}

impl WireError {
    pub(crate) fn malformed(what: &'static str, why: impl Into<String>) -> Self {
        WireError::Malformed {
            what,
            why: why.into(),
        }
    }
}

/// Error codes carried by [`Message::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The frame could not be decoded.
    Malformed,
    /// The frame exceeded the size limit.
    TooLarge,
    /// Unknown job or wrong token.
    AuthFailed,
    /// A newer incarnation of the rank has connected.
    StaleIncarnation,
    /// The events could not be stored (full disk, I/O error, corrupt file).
    Storage,
    /// A well-formed request that breaks the protocol rules (request before
    /// `Hello`, another rank, a gap in ids, …).
    BadRequest,
    /// The logger is shutting down or refuses more connections.
    Unavailable,
    /// A code this version does not know.
    Other(u16),
}

impl ErrorCode {
    fn to_u16(self) -> u16 {
        match self {
            ErrorCode::Malformed => 1,
            ErrorCode::TooLarge => 2,
            ErrorCode::AuthFailed => 3,
            ErrorCode::StaleIncarnation => 4,
            ErrorCode::Storage => 5,
            ErrorCode::BadRequest => 6,
            ErrorCode::Unavailable => 7,
            ErrorCode::Other(c) => c,
        }
    }

    fn from_u16(c: u16) -> Self {
        match c {
            1 => ErrorCode::Malformed,
            2 => ErrorCode::TooLarge,
            3 => ErrorCode::AuthFailed,
            4 => ErrorCode::StaleIncarnation,
            5 => ErrorCode::Storage,
            6 => ErrorCode::BadRequest,
            7 => ErrorCode::Unavailable,
            c => ErrorCode::Other(c),
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            ErrorCode::Malformed => "malformed frame",
            ErrorCode::TooLarge => "frame too large",
            ErrorCode::AuthFailed => "authentication failed",
            ErrorCode::StaleIncarnation => "stale incarnation",
            ErrorCode::Storage => "storage error",
            ErrorCode::BadRequest => "bad request",
            ErrorCode::Unavailable => "logger unavailable",
            ErrorCode::Other(c) => return write!(f, "error code {c}"),
        };
        f.write_str(s)
    }
}

/// Counters of a logger and of the session's rank, answered to `Stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections open now.
    pub connections_open: u64,
    /// Connections accepted since start.
    pub connections_total: u64,
    /// Connections closed because of malformed input or failed auth.
    pub connections_refused: u64,
    /// `Put` frames processed.
    pub puts: u64,
    /// Events stored (duplicates excluded).
    pub events_stored: u64,
    /// Bytes written to segment files.
    pub bytes_written: u64,
    /// fsync calls made (group commits).
    pub fsyncs: u64,
    /// Highest stored event id of the session's rank.
    pub rank_highest: EventId,
    /// Lowest event id the rank's files still hold (0 when none).
    pub rank_first_kept: EventId,
    /// Segment files of the rank.
    pub rank_segments: u64,
    /// Bytes in the rank's segment files.
    pub rank_bytes: u64,
}

/// `Hello`: the first frame of every connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Job name (1–64 bytes of `[A-Za-z0-9_.-]`, not starting with `.`).
    pub job: String,
    /// Rank whose events this connection carries.
    pub rank: u32,
    /// Incarnation of the rank (0 at first start, +1 per restart).
    pub incarnation: u32,
    /// The job's token.
    pub token: String,
}

/// One protocol message (both directions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Client → logger: open a session.
    Hello(Hello),
    /// Client → logger: store consecutive events of `rank`.
    Put {
        /// Must equal the session's rank.
        rank: u32,
        /// The events.
        batch: EventBatch,
    },
    /// Client → logger: send the stored events of `rank` with id ≥ `from`.
    Get {
        /// Request number echoed in the replies.
        req: u64,
        /// Rank of the session's job.
        rank: u32,
        /// First id wanted.
        from: EventId,
    },
    /// Client → logger: the events of `rank` up to `up_to` are no longer
    /// needed; reclaim the segments holding only such events.
    Truncate {
        /// Request number echoed in the reply.
        req: u64,
        /// Must equal the session's rank.
        rank: u32,
        /// Last id that may be forgotten.
        up_to: EventId,
    },
    /// Client → logger: ask for counters.
    Stats {
        /// Request number echoed in the reply.
        req: u64,
    },
    /// Client → logger: end of session; the logger answers `Goodbye` once
    /// every earlier put is acknowledged, then closes.
    Bye,
    /// Logger → client: session open.
    Welcome {
        /// Highest event id stored for the rank (0 if none).
        highest: EventId,
        /// Lowest event id still stored (0 if none).
        first_kept: EventId,
    },
    /// Logger → client: every event of the rank up to `highest` is durable.
    Ack {
        /// Highest durable id (cumulative).
        highest: EventId,
    },
    /// Logger → client: a chunk of the answer to `Get`.
    Events {
        /// The `Get`'s request number.
        req: u64,
        /// Whether this is the last chunk.
        last: bool,
        /// Consecutive events.
        batch: EventBatch,
    },
    /// Logger → client: answer to `Truncate`.
    Truncated {
        /// The request number.
        req: u64,
        /// Segment files deleted.
        segments: u32,
        /// Bytes reclaimed.
        bytes: u64,
    },
    /// Logger → client: answer to `Stats`.
    StatsReply {
        /// The request number.
        req: u64,
        /// The counters.
        stats: Stats,
    },
    /// Logger → client: a request failed. With `req` 0 the error concerns the
    /// session and the logger closes the connection after it.
    Error {
        /// The failed request, or 0.
        req: u64,
        /// What kind of failure.
        code: ErrorCode,
        /// Human-readable cause.
        message: String,
    },
    /// Logger → client: answer to `Bye`.
    Goodbye,
    /// Client → logger: part of an off-host copy of the session rank's
    /// checkpoint number `index`, whose bytes `offset..` are `bytes`
    /// (parts come in order; sending a part again replaces it and what
    /// follows). With `last` the copy is complete: it replaces the older
    /// copies but one.
    SaveCopy {
        /// Request number echoed in the reply.
        req: u64,
        /// The checkpoint's number.
        index: u64,
        /// Where `bytes` start in the copy.
        offset: u64,
        /// Whether this part ends the copy.
        last: bool,
        /// The part.
        bytes: Vec<u8>,
    },
    /// Client → logger: read part of a checkpoint copy of `rank` (any rank
    /// of the session's job): copy `index` (0: the newest), from `offset`.
    LoadCopy {
        /// Request number echoed in the reply.
        req: u64,
        /// Whose copy.
        rank: u32,
        /// Which copy (0: the newest).
        index: u64,
        /// First byte wanted.
        offset: u64,
    },
    /// Client → logger: remove the session rank's copies numbered above
    /// `above` (a restart from checkpoint `above` takes their numbers
    /// again). Answered with `CopySaved`.
    DropCopies {
        /// Request number echoed in the reply.
        req: u64,
        /// Copies numbered above this go.
        above: u64,
    },
    /// Logger → client: answer to `SaveCopy` and `DropCopies`.
    CopySaved {
        /// The request number.
        req: u64,
    },
    /// Logger → client: answer to `LoadCopy`: bytes `offset..` of copy
    /// `index`, `total` bytes long (index 0: no copy stored).
    CopyData {
        /// The request number.
        req: u64,
        /// The copy's checkpoint number (0: none).
        index: u64,
        /// The copy's length.
        total: u64,
        /// Where `bytes` start.
        offset: u64,
        /// The part (at most about a megabyte).
        bytes: Vec<u8>,
    },
}

const K_HELLO: u8 = 0x01;
const K_PUT: u8 = 0x02;
const K_GET: u8 = 0x03;
const K_TRUNCATE: u8 = 0x04;
const K_STATS: u8 = 0x05;
const K_BYE: u8 = 0x06;
const K_SAVE_COPY: u8 = 0x07;
const K_LOAD_COPY: u8 = 0x08;
const K_DROP_COPIES: u8 = 0x09;
const K_WELCOME: u8 = 0x81;
const K_ACK: u8 = 0x82;
const K_EVENTS: u8 = 0x83;
const K_TRUNCATED: u8 = 0x84;
const K_STATS_REPLY: u8 = 0x85;
const K_ERROR: u8 = 0x86;
const K_GOODBYE: u8 = 0x87;
const K_COPY_SAVED: u8 = 0x88;
const K_COPY_DATA: u8 = 0x89;
