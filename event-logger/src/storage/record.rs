//! The record format of a segment file: encoding a record, checking one,
//! scanning a segment at start-up and reading its events back.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use super::{StorageError, io_err};
use crate::event::{EventBatch, EventId, validate};
use crate::wire::MAX_FRAME;

/// First bytes of every stored record.
pub const RECORD_MAGIC: [u8; 4] = *b"VPLR";
/// Version of the record layout.
pub const RECORD_VERSION: u16 = 3;
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 36;

/// Fixed fields of a record header.
struct RecordHeader {
    len: u32,
    count: u32,
    first: EventId,
    last: EventId,
    crc: u32,
}

fn parse_record_header(h: &[u8; RECORD_HEADER_LEN]) -> Result<RecordHeader, String> {
    if h[0..4] != RECORD_MAGIC {
        return Err(format!("bad record magic {:02x?}", &h[0..4]));
    }
    let mut r = crate::bytes::Reader::new(&h[4..], "record header");
    let fields = (|| {
        let version = r.u16()?;
        let reserved = r.u16()?;
        let hdr = RecordHeader {
            len: r.u32()?,
            count: r.u32()?,
            first: r.u64()?,
            last: r.u64()?,
            crc: r.u32()?,
        };
        Ok::<_, vpml_codec::Error>((version, reserved, hdr))
    })();
    let (version, reserved, hdr) = fields.map_err(|e| e.to_string())?;
    if version != RECORD_VERSION {
        return Err(format!("unknown record version {version}"));
    }
    if reserved != 0 {
        return Err("reserved header bytes are not zero".into());
    }
    if hdr.len > MAX_FRAME {
        return Err(format!("record length {} exceeds {MAX_FRAME}", hdr.len));
    }
    if hdr.count == 0
        || hdr.first == 0
        || hdr.last.checked_sub(hdr.first) != Some(u64::from(hdr.count) - 1)
    {
        return Err(format!(
            "record header says {} events from {} to {}",
            hdr.count, hdr.first, hdr.last
        ));
    }
    Ok(hdr)
}

/// Checks a complete record's checksum and events.
fn check_record(
    head: &[u8; RECORD_HEADER_LEN],
    hdr: &RecordHeader,
    payload: &[u8],
) -> Result<(), String> {
    let crc = crate::bytes::crc32c(&[&head[..32], payload]);
    if crc != hdr.crc {
        return Err(format!(
            "checksum mismatch (stored {:#010x}, computed {crc:#010x})",
            hdr.crc
        ));
    }
    let first = validate(hdr.count, payload).map_err(|e| e.to_string())?;
    if first != hdr.first {
        return Err(format!(
            "header says first id {} but events start at {first}",
            hdr.first
        ));
    }
    Ok(())
}

pub(super) fn encode_record(count: u32, first: EventId, events: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&RECORD_MAGIC);
    out.extend_from_slice(&RECORD_VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    // Records hold one put's events, which fit in a frame (< 4 GiB).
    out.extend_from_slice(&(events.len() as u32).to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&(first + u64::from(count) - 1).to_le_bytes());
    let crc = crate::bytes::crc32c(&[&out[..32], events]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(events);
}

/// Result of scanning one segment file.
pub(super) struct Scan {
    /// Bytes of complete, valid records.
    pub(super) valid_len: u64,
    /// Ids held (first, last) if any.
    pub(super) ids: Option<(EventId, EventId)>,
    /// Where and why the scan stopped early.
    pub(super) problem: Option<(u64, String, bool)>,
}

/// Reads the records of a segment. A damaged record is reported as
/// (offset, why, torn) where `torn` means it is the file's last record and
/// could be a write cut short by a crash.
pub(super) fn scan_segment(path: &Path, expect_first: EventId) -> Result<Scan, StorageError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let file_len = file.metadata().map_err(io_err(path))?.len();
    let mut reader = std::io::BufReader::with_capacity(1 << 20, &mut file);
    let mut offset = 0u64;
    let mut ids: Option<(EventId, EventId)> = None;
    let mut payload = Vec::new();
    let mut next = expect_first;
    let stop = |offset: u64, why: String, torn: bool, ids| Scan {
        valid_len: offset,
        ids,
        problem: Some((offset, why, torn)),
    };
    while offset < file_len {
        let remaining = file_len - offset;
        if remaining < RECORD_HEADER_LEN as u64 {
            return Ok(stop(
                offset,
                format!("incomplete record header ({remaining} bytes)"),
                true,
                ids,
            ));
        }
        let mut head = [0u8; RECORD_HEADER_LEN];
        reader.read_exact(&mut head).map_err(io_err(path))?;
        let hdr = match parse_record_header(&head) {
            Ok(h) => h,
            Err(why) => {
                // A zero-filled tail is what a machine crash leaves behind
                // after the file size was extended but the data not written.
                let mut rest = Vec::new();
                reader.read_to_end(&mut rest).map_err(io_err(path))?;
                let zero = head.iter().chain(&rest).all(|&b| b == 0);
                return Ok(stop(offset, why, zero, ids));
            }
        };
        let end = offset + RECORD_HEADER_LEN as u64 + u64::from(hdr.len);
        if end > file_len {
            return Ok(stop(
                offset,
                format!("record of {} bytes runs past the end of the file", hdr.len),
                true,
                ids,
            ));
        }
        payload.resize(hdr.len as usize, 0);
        reader.read_exact(&mut payload).map_err(io_err(path))?;
        if let Err(why) = check_record(&head, &hdr, &payload) {
            return Ok(stop(offset, why, end == file_len, ids));
        }
        if hdr.first != next {
            return Ok(stop(
                offset,
                format!(
                    "record starts at id {} where {next} was expected",
                    hdr.first
                ),
                false,
                ids,
            ));
        }
        ids = Some((ids.map_or(hdr.first, |(f, _)| f), hdr.last));
        // A header passed the checks, so last < u64::MAX unless forged.
        next = hdr.last.saturating_add(1);
        offset = end;
    }
    Ok(Scan {
        valid_len: offset,
        ids,
        problem: None,
    })
}

/// Reads stored events with ids ≥ `from` from the files of a read plan,
/// handing them to `sink` one record at a time as (count, encoded events).
/// Every record is checked again (the files may have been damaged since
/// start-up).
pub(crate) fn read_events(
    plan: &[(PathBuf, u64, EventId)],
    from: EventId,
    mut sink: impl FnMut(u32, &[u8]) -> std::io::Result<()>,
) -> Result<(), StorageError> {
    let mut payload = Vec::new();
    for (path, len, _) in plan {
        let mut file = match File::open(path) {
            Ok(f) => f,
            // Truncated since the plan was made: those events are gone.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(StorageError::Io {
                    path: path.clone(),
                    source: e,
                });
            }
        };
        let mut reader = std::io::BufReader::with_capacity(1 << 20, &mut file);
        let mut offset = 0u64;
        while offset < *len {
            let at = offset;
            let corrupt = move |why: String| StorageError::Corrupt {
                path: path.clone(),
                offset: at,
                why,
            };
            let mut head = [0u8; RECORD_HEADER_LEN];
            reader.read_exact(&mut head).map_err(io_err(path))?;
            let hdr = parse_record_header(&head).map_err(corrupt)?;
            payload.resize(hdr.len as usize, 0);
            reader.read_exact(&mut payload).map_err(io_err(path))?;
            check_record(&head, &hdr, &payload).map_err(corrupt)?;
            offset += (RECORD_HEADER_LEN + payload.len()) as u64;
            if hdr.last < from {
                continue;
            }
            let batch =
                EventBatch::parse(hdr.count, &payload).map_err(|e| corrupt(e.to_string()))?;
            let (count, bytes) = batch.suffix_from(from);
            sink(count, bytes).map_err(io_err(path))?;
        }
    }
    Ok(())
}
