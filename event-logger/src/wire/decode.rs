//! Decoding frames and messages. Every decoder here takes untrusted bytes.

use super::*;
use crate::bytes::Reader;

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
        let mut r = Reader::new(&bytes[4..], "frame header");
        let version = r.u16()?;
        if version != PROTOCOL_VERSION {
            return Err(WireError::Version(version));
        }
        let kind = r.u8()?;
        let flags = r.u8()?;
        if flags != 0 {
            return Err(WireError::malformed(
                "frame header",
                format!("reserved flags {flags:#04x}"),
            ));
        }
        let len = r.u32()?;
        if len > max_payload {
            return Err(WireError::TooLarge {
                len,
                max: max_payload,
            });
        }
        let crc = r.u32()?;
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
        K_DROP_COPIES => Message::DropCopies {
            req: r.u64()?,
            above: r.u64()?,
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
