//! The on-disk format (see the crate docs): segment and record headers,
//! written and checked, and the types a reader gets back.

use std::path::{Path, PathBuf};

use crate::checksum::{crc32c, crc32c_words};
use crate::error::{Error, Result};
use crate::index::MAX_DESTINATIONS;

const SEGMENT_MAGIC: &[u8; 8] = b"VPMLSLOG";
const RECORD_MAGIC: u32 = 0x564C_5243;
const VERSION: u32 = 1;
pub(crate) const SEGMENT_HEADER: usize = 64;
/// Bytes of a record's header, which its payload follows (see the crate
/// documentation's on-disk format).
pub const RECORD_HEADER: usize = 48;
pub(crate) const ALIGN: usize = 64;

/// The envelope of a logged message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Destination rank (world rank).
    pub dest: u32,
    /// Communicator context.
    pub context: u32,
    /// Tag.
    pub tag: i32,
    /// Channel sequence number (1, 2, 3, … per destination).
    pub seq: u64,
}

/// A logged message: its envelope, payload and where it lives.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Envelope.
    pub header: RecordHeader,
    /// The message bytes (inside the mapping).
    pub payload: &'a [u8],
    /// Where the record is (for readers in other processes).
    pub location: Location,
}

/// Where a record's payload lies: segment index and byte offset of the
/// payload in that segment's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Segment index (`seg-<index>.vlog`).
    pub segment: u64,
    /// Offset of the payload in the file.
    pub offset: u64,
    /// Payload length.
    pub len: u64,
}

/// Path of segment `index` in `dir`.
pub fn segment_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("seg-{index:08}.vlog"))
}

/// The index of the segment a file is named after (`seg-<index>.vlog`).
pub(crate) fn segment_index(file_name: &str) -> Option<u64> {
    file_name
        .strip_prefix("seg-")?
        .strip_suffix(".vlog")?
        .parse()
        .ok()
}

/// The `N` bytes of `b` from `at` (panics past its end): what the on-disk
/// integers are read through, e.g. `u32::from_le_bytes(bytes_at(b, at))`.
#[inline]
pub(crate) fn bytes_at<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut w = [0u8; N];
    w.copy_from_slice(&b[at..at + N]);
    w
}

/// Write the 48-byte header of a record into `dst` (48 bytes). It is
/// built and summed as the 64-bit words it is stored as: summing the
/// bytes of a freshly built array would read them back before its stores
/// have landed (a store-forwarding stall per word), which costs more than
/// the sum itself.
///
/// The first word (magic and destination) is stored last, so a process
/// killed part-way leaves a zero magic — the end of the chain — rather
/// than a header that fails its checksum: readers (a restarted process
/// reopening its log) see a torn last record as no record.
pub(crate) fn write_record_header(dst: &mut [u8], h: &RecordHeader, len: u64, payload_crc: u32) {
    let words = [
        u64::from(RECORD_MAGIC) | u64::from(h.dest) << 32,
        u64::from(h.context) | u64::from(h.tag as u32) << 32,
        h.seq,
        len,
        u64::from(payload_crc),
    ];
    let crc = crc32c_words(&words);
    let rest = words[1..].iter().copied().chain([u64::from(crc)]);
    for (d, w) in dst[8..].chunks_exact_mut(8).zip(rest) {
        d.copy_from_slice(&w.to_le_bytes());
    }
    vpml_fault_points::fault_point!("send.mid_log_append");
    // A release store: every store above (payload, the rest of the header,
    // the chain's new end) reaches the mapping — which outlives this
    // process — before the magic that makes the record valid; plain
    // stores could be reordered past it.
    let first = &mut dst[..8];
    assert!(first.as_ptr().cast::<u64>().is_aligned());
    // SAFETY: `first` is 8 bytes, 8-aligned (checked; records start at
    // 64-byte boundaries of page-aligned mappings), exclusively borrowed
    // for this call, and only ever accessed as plain bytes otherwise.
    let magic = unsafe { std::sync::atomic::AtomicU64::from_ptr(first.as_mut_ptr().cast()) };
    magic.store(words[0].to_le(), std::sync::atomic::Ordering::Release);
}

/// Decode the record at `off` of a segment: `Ok(None)` at the end of the
/// used area (zero magic, or a torn last record).
pub(crate) fn decode_record(
    bytes: &[u8],
    off: usize,
) -> std::result::Result<Option<(RecordHeader, usize, usize)>, String> {
    let Some((header, start, len)) = decode_record_header(bytes, off)? else {
        return Ok(None);
    };
    let b = &bytes[off..off + RECORD_HEADER];
    if crc32c(&bytes[start..start + len]) != u32::from_le_bytes(bytes_at(b, 32)) {
        // The payload is written before the header, so a valid header with
        // a bad payload is corruption, not a torn append.
        return Err(format!(
            "payload checksum mismatch in the record at offset {off}"
        ));
    }
    Ok(Some((header, start, len)))
}

/// [`decode_record`] without summing the payload: its header is checked
/// and its bytes lie within `bytes`.
pub(crate) fn decode_record_header(
    bytes: &[u8],
    off: usize,
) -> std::result::Result<Option<(RecordHeader, usize, usize)>, String> {
    if off + RECORD_HEADER > bytes.len() {
        return Ok(None);
    }
    let b = &bytes[off..off + RECORD_HEADER];
    let magic = u32::from_le_bytes(bytes_at(b, 0));
    if magic == 0 {
        return Ok(None);
    }
    if magic != RECORD_MAGIC {
        return Err(format!("bad record magic {magic:#x} at offset {off}"));
    }
    if crc32c(&b[0..40]) != u32::from_le_bytes(bytes_at(b, 40)) {
        return Err(format!("record header checksum mismatch at offset {off}"));
    }
    let dest = u32::from_le_bytes(bytes_at(b, 4));
    if dest >= MAX_DESTINATIONS {
        return Err(format!(
            "destination rank {dest} out of range in the record at offset {off}"
        ));
    }
    let header = RecordHeader {
        dest,
        context: u32::from_le_bytes(bytes_at(b, 8)),
        tag: i32::from_le_bytes(bytes_at(b, 12)),
        seq: u64::from_le_bytes(bytes_at(b, 16)),
    };
    let len = usize::try_from(u64::from_le_bytes(bytes_at(b, 24)))
        .map_err(|_| format!("record length overflow at offset {off}"))?;
    let start = off + RECORD_HEADER;
    start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| format!("record at offset {off} runs past the segment end"))?;
    Ok(Some((header, start, len)))
}

#[inline]
pub(crate) fn record_span(len: usize) -> usize {
    (RECORD_HEADER + len).next_multiple_of(ALIGN)
}

/// Zero the record magic at `off` (if a record fits there): readers stop
/// at it.
pub(crate) fn end_chain(map: &mut [u8], off: usize) {
    if off + RECORD_HEADER <= map.len() {
        map[off..off + 4].fill(0);
    }
}

pub(crate) fn segment_header(rank: u32, idx: u64, capacity: u64) -> [u8; SEGMENT_HEADER] {
    let mut h = [0u8; SEGMENT_HEADER];
    h[0..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&rank.to_le_bytes());
    h[16..24].copy_from_slice(&idx.to_le_bytes());
    h[24..32].copy_from_slice(&capacity.to_le_bytes());
    let crc = crc32c(&h[0..60]);
    h[60..64].copy_from_slice(&crc.to_le_bytes());
    h
}

pub(crate) fn check_segment_header(map: &[u8], idx: u64, path: &Path) -> Result<u32> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    if map.len() < SEGMENT_HEADER || &map[0..8] != SEGMENT_MAGIC {
        return Err(corrupt(
            "not a vpml sender-log segment (bad magic at offset 0)".into(),
        ));
    }
    if crc32c(&map[0..60]) != u32::from_le_bytes(bytes_at(map, 60)) {
        return Err(corrupt(
            "segment header checksum mismatch at offset 60".into(),
        ));
    }
    let version = u32::from_le_bytes(bytes_at(map, 8));
    if version != VERSION {
        return Err(corrupt(format!("unsupported format version {version}")));
    }
    if u64::from_le_bytes(bytes_at(map, 16)) != idx {
        return Err(corrupt(format!(
            "header says segment {}, file name says {idx}",
            u64::from_le_bytes(bytes_at(map, 16))
        )));
    }
    Ok(u32::from_le_bytes(bytes_at(map, 12)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_header_is_summed_as_its_bytes() {
        // 8-aligned, as records are in a segment.
        #[repr(align(8))]
        struct Aligned([u8; RECORD_HEADER]);
        let mut a = Aligned([0; RECORD_HEADER]);
        let b = &mut a.0[..];
        let h = RecordHeader {
            dest: 3,
            context: 0x1234_5678,
            tag: -7,
            seq: 0x0102_0304_0506_0708,
        };
        write_record_header(b, &h, 4242, 0xdead_beef);
        let b = &a.0;
        assert_eq!(u32::from_le_bytes(bytes_at(b, 0)), RECORD_MAGIC);
        assert_eq!(i32::from_le_bytes(bytes_at(b, 12)), -7);
        assert_eq!(u64::from_le_bytes(bytes_at(b, 24)), 4242);
        assert_eq!(u32::from_le_bytes(bytes_at(b, 32)), 0xdead_beef);
        assert_eq!(
            u32::from_le_bytes(bytes_at(b, 40)),
            crc32c::crc32c(&b[..40])
        );
        assert_eq!(b[44..], [0; 4]);
    }
}
