//! Encoding messages as frames.

use super::*;
use crate::bytes::{put_string, put_u16, put_u32, put_u64};

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
        Message::DropCopies { req, above } => {
            put_u64(out, *req);
            put_u64(out, *above);
            K_DROP_COPIES
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
