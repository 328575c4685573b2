//! Saving a log's kept records to one file (a memory log's, with each
//! checkpoint), and starting a log from such a file.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::SenderLog;
use crate::error::{Error, Result, io};
use crate::format::{
    SEGMENT_HEADER, check_segment_header, decode_record, decode_record_header, record_span,
    segment_header, segment_path,
};
use crate::index::Entry;
use crate::memory::PAGE;
use crate::segment::{Map, Segment};

impl SenderLog {
    /// Where every kept record lies, as (segment, offset of its header,
    /// span), in segment and offset order.
    fn kept_records(&self) -> Result<Vec<(u64, usize, usize)>> {
        let corrupt = |segment: u64, reason: String| Error::Corrupt {
            path: self
                .segments
                .get(&segment)
                .map_or_else(|| self.dir.clone(), |s| s.path.clone()),
            reason,
        };
        let bytes_of = |segment: u64| -> Result<&[u8]> {
            let seg = self
                .segments
                .get(&segment)
                .ok_or_else(|| corrupt(segment, format!("segment {segment} vanished")))?;
            seg.bytes().map_err(io(&seg.path, "mapping a segment"))
        };
        let mut out = Vec::new();
        let mut on_disk = std::collections::BTreeSet::new();
        for (_, _, q) in self.index.iter() {
            on_disk.extend(q.on_disk.iter().map(|r| r.segment));
            for e in &q.entries {
                let bytes = bytes_of(e.segment)?;
                let (_, _, len) = decode_record_header(bytes, e.offset)
                    .map_err(|reason| corrupt(e.segment, reason))?
                    .ok_or_else(|| {
                        corrupt(
                            e.segment,
                            format!("no record at offset {}, where the index has one", e.offset),
                        )
                    })?;
                out.push((e.segment, e.offset, record_span(len)));
            }
        }
        // A segment on disk is read once, its kept records picked by run.
        for segment in on_disk {
            let bytes = bytes_of(segment)?;
            let mut off = SEGMENT_HEADER;
            while let Some((h, _, len)) =
                decode_record(bytes, off).map_err(|reason| corrupt(segment, reason))?
            {
                let kept = self
                    .index
                    .get(h.dest, h.context)
                    .and_then(|q| q.disk_run_of(h.seq))
                    .is_some_and(|r| r.segment == segment);
                if kept {
                    out.push((segment, off, record_span(len)));
                }
                off += record_span(len);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Write every kept record to the file `path` (one read-only segment,
    /// written under a temporary name, synced, then renamed): a memory
    /// log's records that peers may need after this process is gone, saved
    /// with a checkpoint. Returns the number of records written.
    pub fn save_kept(&self, path: &Path) -> Result<u64> {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let body = self.kept_records()?;
        let total = SEGMENT_HEADER + body.iter().map(|&(_, _, span)| span).sum::<usize>();
        let mut f = std::io::BufWriter::with_capacity(
            1 << 20,
            File::create(&tmp).map_err(io(&tmp, "creating a saved log file"))?,
        );
        f.write_all(&segment_header(self.rank, 0, total as u64))
            .map_err(io(&tmp, "writing a saved log file"))?;
        for &(segment, offset, span) in &body {
            // Checked by `kept_records`: the record lies within the bytes;
            // its padding to the next record may not (the end of a file).
            let bytes = self
                .segments
                .get(&segment)
                .and_then(|s| s.bytes().ok())
                .unwrap_or_default();
            let start = offset.min(bytes.len());
            let end = (offset + span).min(bytes.len());
            f.write_all(&bytes[start..end])
                .and_then(|_| f.write_all(&vec![0u8; offset + span - end]))
                .map_err(io(&tmp, "writing a saved log file"))?;
        }
        let f = f
            .into_inner()
            .map_err(|e| io(&tmp, "writing a saved log file")(e.into_error()))?;
        f.sync_all().map_err(io(&tmp, "syncing a saved log file"))?;
        std::fs::rename(&tmp, path).map_err(io(path, "naming a saved log file"))?;
        Ok(body.len() as u64)
    }

    /// Make the saved file `spill` (see [`SenderLog::save_kept`]: one segment,
    /// number 0) the first segment of the file log in `dir`, which has no
    /// segment yet, so that [`SenderLog::reopen`] continues the log from
    /// it; `spill` may be removed afterwards. A hard link: nothing is
    /// copied, and doing it again (after a crash) changes nothing.
    pub fn adopt_saved(spill: &Path, dir: &Path) -> Result<()> {
        let first = segment_path(dir, 0);
        if first.exists() {
            return Ok(());
        }
        std::fs::hard_link(spill, &first).map_err(io(&first, "adopting a log spill file"))
    }

    /// Start a new log for `rank` (in memory, or in `dir` if given) that
    /// holds the records of the saved file `spill` — those to each
    /// destination `d` on each context `c` up to sequence number
    /// `keep(d, c)`.
    pub fn restore(
        spill: &Path,
        dir: Option<&Path>,
        rank: u32,
        segment_size: usize,
        keep: impl Fn(u32, u32) -> u64,
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
            if h.seq <= keep(h.dest, h.context) {
                log.index.queue(h.dest, h.context).push(Entry {
                    seq: h.seq,
                    segment: idx,
                    offset: off,
                });
                live += 1;
            }
            off += record_span(len);
        }
        for (_, _, q) in log.index.iter_mut() {
            q.sort();
        }
        // Not the log's file: it stays when its records are freed.
        let mut seg = Segment::new(spill.to_path_buf(), false, Map::ReadOnly(map), off, live);
        seg.populated = off / PAGE * PAGE;
        log.segments.insert(idx, seg);
        log.next_index += 1;
        Ok(log)
    }
}
