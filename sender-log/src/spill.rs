//! Spilling a memory log's kept records to a file, and starting a log
//! from such a file.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::SenderLog;
use crate::error::{Error, Result, io};
use crate::format::{
    SEGMENT_HEADER, bytes_at, check_segment_header, decode_record, record_span, segment_header,
    segment_path,
};
use crate::index::Entry;
use crate::memory::PAGE;
use crate::segment::{Map, Segment};

impl SenderLog {
    /// Write every kept record to the file `path` (one read-only segment,
    /// written under a temporary name, synced, then renamed). Returns the
    /// number of records written.
    pub fn spill(&self, path: &Path) -> Result<u64> {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let mut entries: Vec<&Entry> = self.index.iter().flat_map(|(_, q)| q).collect();
        entries.sort_by_key(|e| (e.segment, e.offset));
        let mut body: Vec<(usize, usize, u64)> = Vec::with_capacity(entries.len());
        let mut total = SEGMENT_HEADER;
        for e in &entries {
            let seg = self
                .segments
                .get(&e.segment)
                .ok_or_else(|| Error::Corrupt {
                    path: path.to_path_buf(),
                    reason: format!("segment {} vanished", e.segment),
                })?;
            let len = u64::from_le_bytes(bytes_at(seg.map.bytes(), e.offset + 24)) as usize;
            let span = record_span(len);
            body.push((e.offset, span, e.segment));
            total += span;
        }
        let mut f = std::io::BufWriter::with_capacity(
            1 << 20,
            File::create(&tmp).map_err(io(&tmp, "creating a log spill file"))?,
        );
        f.write_all(&segment_header(self.rank, 0, total as u64))
            .map_err(io(&tmp, "writing a log spill file"))?;
        for &(offset, span, segment) in &body {
            let bytes = self
                .segments
                .get(&segment)
                .map(|s| s.map.bytes())
                .unwrap_or_default();
            let end = (offset + span).min(bytes.len());
            f.write_all(&bytes[offset..end])
                .and_then(|_| f.write_all(&vec![0u8; offset + span - end]))
                .map_err(io(&tmp, "writing a log spill file"))?;
        }
        let f = f
            .into_inner()
            .map_err(|e| io(&tmp, "writing a log spill file")(e.into_error()))?;
        f.sync_all().map_err(io(&tmp, "syncing a log spill file"))?;
        std::fs::rename(&tmp, path).map_err(io(path, "naming a log spill file"))?;
        Ok(entries.len() as u64)
    }

    /// Make the spill file `spill` (see [`SenderLog::spill`]: one segment,
    /// number 0) the first segment of the file log in `dir`, which has no
    /// segment yet, so that [`SenderLog::reopen`] continues the log from
    /// it; `spill` may be removed afterwards. A hard link: nothing is
    /// copied, and doing it again (after a crash) changes nothing.
    pub fn adopt_spill(spill: &Path, dir: &Path) -> Result<()> {
        let first = segment_path(dir, 0);
        if first.exists() {
            return Ok(());
        }
        std::fs::hard_link(spill, &first).map_err(io(&first, "adopting a log spill file"))
    }

    /// Start a new log for `rank` (in memory, or in `dir` if given) that
    /// holds the records of the spill file `spill` — those to each
    /// destination `d` up to sequence number `keep(d)`.
    pub fn restore(
        spill: &Path,
        dir: Option<&Path>,
        rank: u32,
        segment_size: usize,
        keep: impl Fn(u32) -> u64,
    ) -> Result<SenderLog> {
        let mut log = match dir {
            Some(d) => SenderLog::create(d, rank, segment_size)?,
            None => SenderLog::create_in_memory(rank, segment_size),
        };
        let file = File::open(spill).map_err(io(spill, "opening a log spill file"))?;
        // SAFETY: read-only mapping of a finished file nobody writes.
        let map = unsafe { Mmap::map(&file) }.map_err(io(spill, "mapping a log spill file"))?;
        check_segment_header(&map, 0, spill)?;
        let idx = log.next_index;
        let mut off = SEGMENT_HEADER;
        let mut live = 0;
        while let Some((h, _, len)) = decode_record(&map, off).map_err(|reason| Error::Corrupt {
            path: spill.to_path_buf(),
            reason,
        })? {
            if h.seq <= keep(h.dest) {
                log.index.queue(h.dest).push(Entry {
                    seq: h.seq,
                    segment: idx,
                    offset: off,
                });
                live += 1;
            }
            off += record_span(len);
        }
        for (_, q) in log.index.iter_mut() {
            q.sort();
        }
        log.segments.insert(
            idx,
            Segment {
                path: spill.to_path_buf(),
                on_disk: false,
                map: Map::ReadOnly(map),
                used: off,
                live,
                warm_until: 0,
                populated: off / PAGE * PAGE,
            },
        );
        log.next_index += 1;
        Ok(log)
    }
}
