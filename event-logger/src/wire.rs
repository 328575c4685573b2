//! Frames and messages of the event-logger protocol (specified in the crate
//! documentation). Every decoder here takes untrusted bytes.

use crate::bytes::{Reader, put_string, put_u16, put_u32, put_u64};
use crate::event::{EventBatch, EventId};

/// First bytes of every frame.
pub const FRAME_MAGIC: [u8; 4] = *b"VPEL";
/// Version of the protocol this crate speaks.
pub const PROTOCOL_VERSION: u16 = 2;
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
    /// Logger → client: answer to `SaveCopy`.
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
const K_WELCOME: u8 = 0x81;
const K_ACK: u8 = 0x82;
const K_EVENTS: u8 = 0x83;
const K_TRUNCATED: u8 = 0x84;
const K_STATS_REPLY: u8 = 0x85;
const K_ERROR: u8 = 0x86;
const K_GOODBYE: u8 = 0x87;
const K_COPY_SAVED: u8 = 0x88;
const K_COPY_DATA: u8 = 0x89;

/// A validated frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Message kind.
    pub kind: u8,
    /// Payload length.
    pub len: u32,
    /// Checksum of header bytes 0..12 and the payload.
    pub crc: u32,
}

impl FrameHeader {
    /// Checks magic, version, reserved flags and the size limit.
    pub fn parse(bytes: &[u8; HEADER_LEN], max_payload: u32) -> Result<Self, WireError> {
        let mut magic = [0u8; 4];
        magic.copy_from_slice(&bytes[0..4]);
        if magic != FRAME_MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != PROTOCOL_VERSION {
            return Err(WireError::Version(version));
        }
        let kind = bytes[6];
        if bytes[7] != 0 {
            return Err(WireError::malformed(
                "frame header",
                format!("reserved flags {:#04x}", bytes[7]),
            ));
        }
        let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if len > max_payload {
            return Err(WireError::TooLarge {
                len,
                max: max_payload,
            });
        }
        let crc = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
        Ok(FrameHeader { kind, len, crc })
    }
}

/// Outcome of [`decode_frame`] on a buffer.
#[derive(Debug)]
pub enum Decoded {
    /// A whole frame: the message and the bytes it took.
    Frame(Message, usize),
    /// The buffer holds only the start of a frame; at least this many bytes
    /// are needed in total.
    NeedMore(usize),
}

/// Decodes the frame at the start of `buf`, accepting payloads up to
/// `max_payload` bytes (never more than [`MAX_FRAME`]).
pub fn decode_frame(buf: &[u8], max_payload: u32) -> Result<Decoded, WireError> {
    let max_payload = max_payload.min(MAX_FRAME);
    let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
        return Ok(Decoded::NeedMore(HEADER_LEN));
    };
    let header = FrameHeader::parse(head, max_payload)?;
    let total = HEADER_LEN + header.len as usize;
    if buf.len() < total {
        return Ok(Decoded::NeedMore(total));
    }
    let crc = crate::bytes::crc32c(&[&buf[..12], &buf[HEADER_LEN..total]]);
    if crc != header.crc {
        return Err(WireError::Checksum {
            stored: header.crc,
            computed: crc,
        });
    }
    let msg = decode_payload(header.kind, &buf[HEADER_LEN..total])?;
    Ok(Decoded::Frame(msg, total))
}

fn decode_payload(kind: u8, payload: &[u8]) -> Result<Message, WireError> {
    let mut r = Reader::new(payload, "message");
    let msg = match kind {
        K_HELLO => {
            let job = r.string(MAX_JOB_LEN)?;
            let rank = r.u32()?;
            let incarnation = r.u32()?;
            let token = r.string(MAX_TOKEN_LEN)?;
            Message::Hello(Hello {
                job,
                rank,
                incarnation,
                token,
            })
        }
        K_PUT => {
            let rank = r.u32()?;
            let count = r.u32()?;
            let rest = r.bytes(r.remaining())?;
            Message::Put {
                rank,
                batch: EventBatch::parse(count, rest)?,
            }
        }
        K_GET => Message::Get {
            req: r.u64()?,
            rank: r.u32()?,
            from: r.u64()?,
        },
        K_TRUNCATE => Message::Truncate {
            req: r.u64()?,
            rank: r.u32()?,
            up_to: r.u64()?,
        },
        K_STATS => Message::Stats { req: r.u64()? },
        K_BYE => Message::Bye,
        K_SAVE_COPY => Message::SaveCopy {
            req: r.u64()?,
            index: r.u64()?,
            offset: r.u64()?,
            last: r.bool()?,
            bytes: r.bytes(r.remaining())?.to_vec(),
        },
        K_LOAD_COPY => Message::LoadCopy {
            req: r.u64()?,
            rank: r.u32()?,
            index: r.u64()?,
            offset: r.u64()?,
        },
        K_COPY_SAVED => Message::CopySaved { req: r.u64()? },
        K_COPY_DATA => Message::CopyData {
            req: r.u64()?,
            index: r.u64()?,
            total: r.u64()?,
            offset: r.u64()?,
            bytes: r.bytes(r.remaining())?.to_vec(),
        },
        K_WELCOME => Message::Welcome {
            highest: r.u64()?,
            first_kept: r.u64()?,
        },
        K_ACK => Message::Ack { highest: r.u64()? },
        K_EVENTS => {
            let req = r.u64()?;
            let last = r.bool()?;
            let count = r.u32()?;
            let rest = r.bytes(r.remaining())?;
            Message::Events {
                req,
                last,
                batch: EventBatch::parse(count, rest)?,
            }
        }
        K_TRUNCATED => Message::Truncated {
            req: r.u64()?,
            segments: r.u32()?,
            bytes: r.u64()?,
        },
        K_STATS_REPLY => {
            let req = r.u64()?;
            let stats = Stats {
                connections_open: r.u64()?,
                connections_total: r.u64()?,
                connections_refused: r.u64()?,
                puts: r.u64()?,
                events_stored: r.u64()?,
                bytes_written: r.u64()?,
                fsyncs: r.u64()?,
                rank_highest: r.u64()?,
                rank_first_kept: r.u64()?,
                rank_segments: r.u64()?,
                rank_bytes: r.u64()?,
            };
            Message::StatsReply { req, stats }
        }
        K_ERROR => Message::Error {
            req: r.u64()?,
            code: ErrorCode::from_u16(r.u16()?),
            message: r.string(MAX_MESSAGE_LEN)?,
        },
        K_GOODBYE => Message::Goodbye,
        k => return Err(WireError::UnknownKind(k)),
    };
    r.finish()?;
    Ok(msg)
}

/// Appends `msg` as one frame to `out`.
pub fn encode_frame(msg: &Message, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    let kind = encode_payload(msg, out);
    finish_frame(out, start, kind);
}

/// Appends a `Put` frame of `count` already-encoded consecutive events,
/// without building an [`EventBatch`] (the client's hot path). The caller
/// guarantees the bytes are `count` valid events.
pub(crate) fn encode_put_raw(rank: u32, count: u32, events: &[&[u8]], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    put_u32(out, rank);
    put_u32(out, count);
    for part in events {
        out.extend_from_slice(part);
    }
    finish_frame(out, start, K_PUT);
}

/// Appends an `Events` frame from already-validated encoded events.
pub(crate) fn encode_events_raw(
    req: u64,
    last: bool,
    count: u32,
    events: &[u8],
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    put_u64(out, req);
    out.push(u8::from(last));
    put_u32(out, count);
    out.extend_from_slice(events);
    finish_frame(out, start, K_EVENTS);
}

fn finish_frame(out: &mut [u8], start: usize, kind: u8) {
    // Payloads are built from bounded parts; a length beyond u32 cannot occur
    // for frames this crate sends (they are kept under MAX_FRAME).
    let len = u32::try_from(out.len() - start - HEADER_LEN).unwrap_or(u32::MAX);
    let head = &mut out[start..start + HEADER_LEN];
    head[0..4].copy_from_slice(&FRAME_MAGIC);
    head[4..6].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    head[6] = kind;
    head[7] = 0;
    head[8..12].copy_from_slice(&len.to_le_bytes());
    let crc = crate::bytes::crc32c(&[&out[start..start + 12], &out[start + HEADER_LEN..]]);
    out[start + 12..start + 16].copy_from_slice(&crc.to_le_bytes());
}

fn encode_payload(msg: &Message, out: &mut Vec<u8>) -> u8 {
    match msg {
        Message::Hello(h) => {
            put_string(out, &h.job);
            put_u32(out, h.rank);
            put_u32(out, h.incarnation);
            put_string(out, &h.token);
            K_HELLO
        }
        Message::Put { rank, batch } => {
            put_u32(out, *rank);
            // A batch never holds more than u32::MAX events.
            put_u32(out, batch.len() as u32);
            out.extend_from_slice(batch.as_bytes());
            K_PUT
        }
        Message::Get { req, rank, from } => {
            put_u64(out, *req);
            put_u32(out, *rank);
            put_u64(out, *from);
            K_GET
        }
        Message::Truncate { req, rank, up_to } => {
            put_u64(out, *req);
            put_u32(out, *rank);
            put_u64(out, *up_to);
            K_TRUNCATE
        }
        Message::Stats { req } => {
            put_u64(out, *req);
            K_STATS
        }
        Message::Bye => K_BYE,
        Message::SaveCopy {
            req,
            index,
            offset,
            last,
            bytes,
        } => {
            put_u64(out, *req);
            put_u64(out, *index);
            put_u64(out, *offset);
            out.push(u8::from(*last));
            out.extend_from_slice(bytes);
            K_SAVE_COPY
        }
        Message::LoadCopy {
            req,
            rank,
            index,
            offset,
        } => {
            put_u64(out, *req);
            put_u32(out, *rank);
            put_u64(out, *index);
            put_u64(out, *offset);
            K_LOAD_COPY
        }
        Message::CopySaved { req } => {
            put_u64(out, *req);
            K_COPY_SAVED
        }
        Message::CopyData {
            req,
            index,
            total,
            offset,
            bytes,
        } => {
            put_u64(out, *req);
            put_u64(out, *index);
            put_u64(out, *total);
            put_u64(out, *offset);
            out.extend_from_slice(bytes);
            K_COPY_DATA
        }
        Message::Welcome {
            highest,
            first_kept,
        } => {
            put_u64(out, *highest);
            put_u64(out, *first_kept);
            K_WELCOME
        }
        Message::Ack { highest } => {
            put_u64(out, *highest);
            K_ACK
        }
        Message::Events { req, last, batch } => {
            put_u64(out, *req);
            out.push(u8::from(*last));
            put_u32(out, batch.len() as u32);
            out.extend_from_slice(batch.as_bytes());
            K_EVENTS
        }
        Message::Truncated {
            req,
            segments,
            bytes,
        } => {
            put_u64(out, *req);
            put_u32(out, *segments);
            put_u64(out, *bytes);
            K_TRUNCATED
        }
        Message::StatsReply { req, stats } => {
            put_u64(out, *req);
            for v in [
                stats.connections_open,
                stats.connections_total,
                stats.connections_refused,
                stats.puts,
                stats.events_stored,
                stats.bytes_written,
                stats.fsyncs,
                stats.rank_highest,
                stats.rank_first_kept,
                stats.rank_segments,
                stats.rank_bytes,
            ] {
                put_u64(out, v);
            }
            K_STATS_REPLY
        }
        Message::Error { req, code, message } => {
            put_u64(out, *req);
            put_u16(out, code.to_u16());
            let mut end = message.len().min(MAX_MESSAGE_LEN);
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            put_string(out, &message[..end]);
            K_ERROR
        }
        Message::Goodbye => K_GOODBYE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use proptest::prelude::*;

    fn any_batch() -> impl Strategy<Value = EventBatch> {
        (
            proptest::collection::vec(crate::event::tests::any_event(), 0..20),
            1u64..1 << 40,
        )
            .prop_map(|(events, first)| {
                let mut b = EventBatch::new();
                for (i, e) in events.iter().enumerate() {
                    b.push(first + i as u64, e).unwrap();
                }
                b
            })
    }

    fn any_message() -> impl Strategy<Value = Message> {
        let name = "[A-Za-z0-9_.-]{1,64}";
        prop_oneof![
            (name, any::<u32>(), any::<u32>(), "[ -~]{0,64}").prop_map(
                |(job, rank, incarnation, token)| Message::Hello(Hello {
                    job,
                    rank,
                    incarnation,
                    token
                })
            ),
            (any::<u32>(), any_batch()).prop_map(|(rank, batch)| Message::Put { rank, batch }),
            (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(req, rank, from)| Message::Get {
                req,
                rank,
                from
            }),
            (any::<u64>(), any::<u32>(), any::<u64>())
                .prop_map(|(req, rank, up_to)| Message::Truncate { req, rank, up_to }),
            any::<u64>().prop_map(|req| Message::Stats { req }),
            Just(Message::Bye),
            (
                any::<[u64; 3]>(),
                any::<bool>(),
                proptest::collection::vec(any::<u8>(), 0..64)
            )
                .prop_map(|([req, index, offset], last, bytes)| Message::SaveCopy {
                    req,
                    index,
                    offset,
                    last,
                    bytes
                }),
            (any::<u64>(), any::<u32>(), any::<[u64; 2]>()).prop_map(
                |(req, rank, [index, offset])| Message::LoadCopy {
                    req,
                    rank,
                    index,
                    offset
                }
            ),
            any::<u64>().prop_map(|req| Message::CopySaved { req }),
            (
                any::<[u64; 4]>(),
                proptest::collection::vec(any::<u8>(), 0..64)
            )
                .prop_map(|([req, index, total, offset], bytes)| Message::CopyData {
                    req,
                    index,
                    total,
                    offset,
                    bytes
                }),
            (any::<u64>(), any::<u64>()).prop_map(|(highest, first_kept)| Message::Welcome {
                highest,
                first_kept
            }),
            any::<u64>().prop_map(|highest| Message::Ack { highest }),
            (any::<u64>(), any::<bool>(), any_batch())
                .prop_map(|(req, last, batch)| Message::Events { req, last, batch }),
            (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(req, segments, bytes)| {
                Message::Truncated {
                    req,
                    segments,
                    bytes,
                }
            }),
            (any::<u64>(), proptest::array::uniform11(any::<u64>())).prop_map(|(req, v)| {
                Message::StatsReply {
                    req,
                    stats: Stats {
                        connections_open: v[0],
                        connections_total: v[1],
                        connections_refused: v[2],
                        puts: v[3],
                        events_stored: v[4],
                        bytes_written: v[5],
                        fsyncs: v[6],
                        rank_highest: v[7],
                        rank_first_kept: v[8],
                        rank_segments: v[9],
                        rank_bytes: v[10],
                    },
                }
            }),
            (any::<u64>(), 1u16..10, "\\PC{0,100}").prop_map(|(req, c, message)| {
                Message::Error {
                    req,
                    code: ErrorCode::from_u16(c),
                    message,
                }
            }),
            Just(Message::Goodbye),
        ]
    }

    proptest! {
        #[test]
        fn every_message_round_trips(msg in any_message(), junk in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut buf = Vec::new();
            encode_frame(&msg, &mut buf);
            let len = buf.len();
            buf.extend_from_slice(&junk);
            match decode_frame(&buf, MAX_FRAME).unwrap() {
                Decoded::Frame(got, used) => {
                    prop_assert_eq!(used, len);
                    prop_assert_eq!(got, msg);
                }
                Decoded::NeedMore(n) => prop_assert!(false, "needs {} bytes", n),
            }
        }

        #[test]
        fn every_prefix_asks_for_more(msg in any_message()) {
            let mut buf = Vec::new();
            encode_frame(&msg, &mut buf);
            for cut in 0..buf.len() {
                match decode_frame(&buf[..cut], MAX_FRAME).unwrap() {
                    Decoded::NeedMore(n) => prop_assert!(n > cut),
                    Decoded::Frame(..) => prop_assert!(false, "decoded from {} bytes", cut),
                }
            }
        }

        #[test]
        fn any_flipped_bit_is_detected(msg in any_message(), bit in any::<prop::sample::Index>()) {
            let mut buf = Vec::new();
            encode_frame(&msg, &mut buf);
            let i = bit.index(buf.len() * 8);
            buf[i / 8] ^= 1 << (i % 8);
            // Either an error or a request for more bytes (flipped length);
            // never the original message decoded from damaged bytes.
            if let Ok(Decoded::Frame(got, _)) = decode_frame(&buf, MAX_FRAME) {
                prop_assert_ne!(got, msg);
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_frame(&bytes, MAX_FRAME);
        }
    }

    #[test]
    fn oversized_frames_are_refused_from_the_header() {
        let mut buf = Vec::new();
        encode_frame(&Message::Bye, &mut buf);
        buf[8..12].copy_from_slice(&(MAX_FRAME + 1).to_le_bytes());
        assert_eq!(
            decode_frame(&buf, MAX_FRAME).unwrap_err(),
            WireError::TooLarge {
                len: MAX_FRAME + 1,
                max: MAX_FRAME
            }
        );
        let mut buf = Vec::new();
        encode_frame(&Message::Ack { highest: 1 }, &mut buf);
        assert!(matches!(
            decode_frame(&buf, 4),
            Err(WireError::TooLarge { len: 8, max: 4 })
        ));
    }

    #[test]
    fn put_raw_matches_put() {
        let mut batch = EventBatch::new();
        batch.push(5, &Event::Match { recv: 1, source: 2 }).unwrap();
        batch
            .push(6, &Event::NoneRun { first: 3, last: 4 })
            .unwrap();
        let mut a = Vec::new();
        encode_frame(
            &Message::Put {
                rank: 3,
                batch: batch.clone(),
            },
            &mut a,
        );
        let mut b = Vec::new();
        encode_put_raw(3, 2, &[batch.as_bytes()], &mut b);
        assert_eq!(a, b);
    }
}
