//! A sender-log segment, damaged any way: opening the log (as the replay
//! debugger and a restarted rank do) indexes its records or names the file
//! and offset, and every indexed record reads back or gives such an error —
//! never a panic.
//!
//! An input whose first byte is odd is the segment's bytes as they are.
//! Otherwise it describes records — destination, context, tag, sequence
//! number, payload — that are laid out with valid checksums (one of them
//! spoilt when the input says so), so that the index and the reads behind
//! the checksums are reached too.

#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use vpml_sender_log::{RECORD_HEADER, SenderLog, crc32c, segment_path};

const SEGMENT_HEADER: usize = 64;
const ALIGN: usize = 64;

/// A segment with a valid header, and records described by `spec`.
fn well_formed(spec: &[u8]) -> Vec<u8> {
    let mut seg = vec![0u8; SEGMENT_HEADER];
    seg[0..8].copy_from_slice(b"VPMLSLOG");
    seg[8..12].copy_from_slice(&1u32.to_le_bytes());
    let mut rest = spec;
    let take = |rest: &mut &[u8], n: usize| -> Option<Vec<u8>> {
        let (a, b) = rest.split_at_checked(n)?;
        *rest = b;
        Some(a.to_vec())
    };
    // Per record: dest, context, tag (1 byte each, small: records meet),
    // seq (2), payload length (1), a byte saying what to spoil, payload.
    while let Some(f) = take(&mut rest, 6) {
        let Some(payload) = take(&mut rest, usize::from(f[4])) else {
            break;
        };
        let mut h = [0u8; RECORD_HEADER];
        h[0..4].copy_from_slice(&0x564C_5243u32.to_le_bytes());
        h[4..8].copy_from_slice(&u32::from(f[0] % 8).to_le_bytes());
        h[8..12].copy_from_slice(&u32::from(f[1] % 4).to_le_bytes());
        h[12..16].copy_from_slice(&i32::from(f[2]).to_le_bytes());
        h[16..24].copy_from_slice(&u64::from(u16::from_le_bytes([f[3], f[5]])).to_le_bytes());
        h[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        h[32..36].copy_from_slice(&crc32c(&payload).to_le_bytes());
        let sum = crc32c(&h[0..40]);
        h[40..44].copy_from_slice(&sum.to_le_bytes());
        match f[5] % 16 {
            0 => h[32] ^= 1, // payload checksum
            1 => h[40] ^= 1, // header checksum
            2 => h[24] = 0xff, // length past the end
            _ => {}
        }
        seg.extend_from_slice(&h);
        seg.extend_from_slice(&payload);
        seg.resize(seg.len().next_multiple_of(ALIGN), 0);
    }
    let capacity = seg.len() as u64;
    seg[24..32].copy_from_slice(&capacity.to_le_bytes());
    let sum = crc32c(&seg[0..60]);
    seg[60..64].copy_from_slice(&sum.to_le_bytes());
    seg
}

fuzz_target!(|data: &[u8]| {
    let dir = common::scratch("sender_log_segment");
    let bytes = match data.split_first() {
        Some((&mode, rest)) if mode % 2 == 0 => well_formed(rest),
        _ => data.to_vec(),
    };
    std::fs::write(segment_path(dir, 0), &bytes).expect("segment");
    let Ok(log) = SenderLog::open_read_only(dir) else {
        return;
    };
    for dest in log.destinations() {
        for ctx in log.contexts_to(dest) {
            for r in log.iter_from(dest, ctx, 0) {
                if r.is_err() {
                    break;
                }
            }
        }
    }
});
