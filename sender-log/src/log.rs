//! [`SenderLog`]: starting a log, opening one left on disk, and what it
//! tells about itself.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut};

use crate::error::{Error, Result, io};
use crate::format::{
    SEGMENT_HEADER, check_segment_header, decode_record, decode_record_header, record_span,
    segment_index,
};
use crate::index::{Entry, Index};
use crate::memory::PAGE;
use crate::pool::{Limit, SPILL_DIR};
use crate::segment::{DEFAULT_SEGMENT_SIZE, Map, Segment, SegmentTable, Spare};
use crate::spill_writer::SpillWriter;

/// Where a segment found by [`SenderLog::open_existing`] lives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The log directory, for a writer: memory it may reuse.
    Memory,
    /// The log directory, for a reader.
    ReadOnly,
    /// The spill directory.
    Disk,
}

/// One rank's sender log (writable), or a finished log opened for reading.
pub struct SenderLog {
    pub(crate) dir: PathBuf,
    pub(crate) rank: u32,
    pub(crate) segment_size: usize,
    pub(crate) segments: SegmentTable,
    pub(crate) current: Option<u64>,
    /// Room known to be ready in the current segment: a record spanning at
    /// most this many bytes fits in its taken memory, with the zero magic
    /// after it (0 when unknown, and always in a read-only log). Lets
    /// [`SenderLog::reserve`] answer the common case without a lookup.
    pub(crate) ready: usize,
    pub(crate) next_index: u64,
    /// Per destination, its records in sequence order.
    pub(crate) index: Index,
    pub(crate) writable: bool,
    pub(crate) bytes_logged: u64,
    /// New segments are anonymous memory, not files.
    pub(crate) in_memory: bool,
    /// Freed segments kept for reuse (their pages are already faulted
    /// in: reusing them costs no page fault and no zeroing).
    pub(crate) spare: Vec<Spare>,
    /// Segments this log has made (new or reused).
    pub(crate) made: u32,
    /// How many of those were freed segments reused.
    pub(crate) reused: u32,
    /// Segments holding the log's memory (the others are files only read).
    pub(crate) resident: BTreeSet<u64>,
    /// The most segments in memory at once.
    pub(crate) peak_resident: usize,
    /// Bytes of memory held: resident segments and spares.
    pub(crate) memory: usize,
    /// The most memory held at once.
    pub(crate) peak_memory: usize,
    /// The memory limit and spill directory of a bounded log.
    pub(crate) limit: Option<Limit>,
    /// The thread copying full segments to disk (started at the first).
    pub(crate) writer: Option<SpillWriter>,
    /// Bytes of kept segments on disk (moved there, or copied).
    pub(crate) disk_bytes: u64,
    /// Segments copied to disk.
    pub(crate) spilled: u64,
    /// Times a new segment waited for a copy to finish (memory full).
    pub(crate) waited_for_disk: u64,
    /// Times the log went past its limit because the engine still sent
    /// from all of its memory.
    pub(crate) over_limit: u64,
    /// Why the last copy to disk failed, until one succeeds.
    pub(crate) copy_error: Option<String>,
}

impl SenderLog {
    /// Start an empty log for `rank` in `dir` (created if missing; segments
    /// left there by an earlier incarnation are removed).
    pub fn create(dir: &Path, rank: u32, segment_size: usize) -> Result<SenderLog> {
        std::fs::create_dir_all(dir).map_err(io(dir, "creating the log directory"))?;
        for d in [dir.to_path_buf(), dir.join(SPILL_DIR)] {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("seg-") || name.starts_with(".seg-") {
                    let p = entry.path();
                    std::fs::remove_file(&p).map_err(io(&p, "removing an old segment"))?;
                }
            }
        }
        Ok(SenderLog::empty(
            dir.to_path_buf(),
            rank,
            segment_size,
            false,
            true,
        ))
    }

    /// Start an empty log for `rank` in anonymous memory (see the crate
    /// docs): the fastest, but it dies with the process.
    pub fn create_in_memory(rank: u32, segment_size: usize) -> SenderLog {
        SenderLog::empty(PathBuf::from("(memory)"), rank, segment_size, true, true)
    }

    fn empty(
        dir: PathBuf,
        rank: u32,
        segment_size: usize,
        in_memory: bool,
        writable: bool,
    ) -> SenderLog {
        SenderLog {
            dir,
            rank,
            segment_size: segment_size.max(PAGE).next_multiple_of(PAGE),
            segments: SegmentTable::default(),
            current: None,
            ready: 0,
            next_index: 0,
            index: Index::default(),
            writable,
            bytes_logged: 0,
            in_memory,
            spare: Vec::new(),
            reused: 0,
            made: 0,
            resident: BTreeSet::new(),
            peak_resident: 0,
            memory: 0,
            peak_memory: 0,
            limit: None,
            writer: None,
            disk_bytes: 0,
            spilled: 0,
            waited_for_disk: 0,
            over_limit: 0,
            copy_error: None,
        }
    }

    /// Open the log in `dir` for reading (e.g. from another process, or
    /// after the job): every record of every segment is indexed; when a
    /// message was logged twice (by two incarnations), the later copy
    /// counts. A torn last record is ignored; other damage is an error
    /// naming file and offset.
    pub fn open_read_only(dir: &Path) -> Result<SenderLog> {
        let mut log = Self::open_existing(dir, false)?;
        log.keep_latest_copies(|_, _| u64::MAX);
        Ok(log)
    }

    /// Reopen the log a crashed process of this rank left in `dir`, to
    /// continue it after a restart: the records to each destination `d`
    /// on each context `c` with a sequence number up to `keep(d, c)` stay
    /// (peers may still need them); later ones are forgotten, because the restarted process
    /// re-executes and logs them again. New records go to new segments,
    /// so nothing already written is overwritten; when a message was
    /// logged twice (by two incarnations), the later copy counts.
    pub fn reopen(
        dir: &Path,
        rank: u32,
        segment_size: usize,
        keep: impl Fn(u32, u32) -> u64,
    ) -> Result<SenderLog> {
        std::fs::create_dir_all(dir).map_err(io(dir, "creating the log directory"))?;
        let mut log = Self::open_existing(dir, true)?;
        log.rank = rank;
        log.segment_size = segment_size.max(PAGE).next_multiple_of(PAGE);
        log.keep_latest_copies(keep);
        log.bytes_logged = 0;
        // Segments left without a record: their memory or file goes.
        let empty: Vec<u64> = log
            .segments
            .iter()
            .filter(|(_, s)| s.live == 0)
            .map(|(i, _)| i)
            .collect();
        for i in empty {
            log.release(i)?;
        }
        Ok(log)
    }

    /// Forget the records to each destination `d` on context `c` above
    /// `keep(d, c)`, and of a message logged more than once (by several
    /// incarnations) every copy but the last.
    fn keep_latest_copies(&mut self, keep: impl Fn(u32, u32) -> u64) {
        for (dest, context, q) in self.index.iter_mut() {
            let limit = keep(dest, context);
            let mut kept: VecDeque<Entry> = VecDeque::with_capacity(q.entries.len());
            for e in q.entries.drain(..) {
                let dropped = if e.seq > limit {
                    Some(e)
                } else if kept.back().is_some_and(|k| k.seq == e.seq) {
                    // Sorted by (seq, segment): the later copy replaces it.
                    let old = kept.pop_back();
                    kept.push_back(e);
                    old
                } else {
                    kept.push_back(e);
                    None
                };
                if let Some(d) = dropped
                    && let Some(seg) = self.segments.get_mut(&d.segment)
                {
                    seg.live = seg.live.saturating_sub(1);
                }
            }
            q.entries = kept;
            q.sort();
        }
        // Segments on disk are indexed by run (a long log's are many).
        self.compact_index();
    }

    fn open_existing(dir: &Path, writable: bool) -> Result<SenderLog> {
        let spill_dir = dir.join(SPILL_DIR);
        // The segments moved to disk are part of the log: a `spilled`
        // entry that cannot be read (a link to a directory that is gone)
        // would silently lose them.
        let spill_listing = match std::fs::symlink_metadata(&spill_dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            _ => Some(
                std::fs::read_dir(&spill_dir)
                    .map_err(io(&spill_dir, "listing the segments moved to disk"))?
                    .flatten()
                    .map(|e| e.path())
                    .collect::<Vec<PathBuf>>(),
            ),
        };
        let listing = std::fs::read_dir(dir)
            .map_err(io(dir, "listing the log directory"))?
            .flatten()
            .map(|e| e.path())
            .collect::<Vec<PathBuf>>();
        let mut in_memory: BTreeMap<u64, PathBuf> = BTreeMap::new();
        let mut on_disk: BTreeMap<u64, PathBuf> = BTreeMap::new();
        for (paths, found) in [
            (&listing, &mut in_memory),
            (spill_listing.as_ref().unwrap_or(&Vec::new()), &mut on_disk),
        ] {
            for p in paths {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if let Some(idx) = segment_index(&name) {
                    found.insert(idx, p.clone());
                } else if writable && name.starts_with(".seg-") {
                    // Set aside for reuse, being built or being copied by
                    // a crashed incarnation.
                    std::fs::remove_file(p).map_err(io(p, "removing a spare segment"))?;
                }
            }
        }
        let mut log = SenderLog::empty(dir.to_path_buf(), 0, DEFAULT_SEGMENT_SIZE, false, writable);
        let all: std::collections::BTreeSet<u64> =
            in_memory.keys().chain(on_disk.keys()).copied().collect();
        for idx in all {
            // A segment both in memory and on disk had its copy complete
            // (a copy is named only once complete) and was not reused
            // yet: the copy counts, and a writer frees the memory.
            let seg = match (on_disk.get(&idx), in_memory.get(&idx)) {
                (Some(copy), memory) => {
                    let seg = log.scan_segment(idx, copy, Place::Disk)?;
                    if let Some(memory) = memory.filter(|_| writable) {
                        std::fs::remove_file(memory)
                            .map_err(io(memory, "removing a segment copied to disk"))?;
                    }
                    seg
                }
                (None, Some(memory)) => {
                    let place = if writable {
                        Place::Memory
                    } else {
                        Place::ReadOnly
                    };
                    log.scan_segment(idx, memory, place)?
                }
                (None, None) => continue,
            };
            if seg.map.is_memory() {
                log.memory += seg.memory();
                log.resident.insert(idx);
            } else if matches!(seg.map, Map::OnDisk(_)) {
                log.disk_bytes += seg.used as u64;
            }
            log.segments.insert(idx, seg);
            log.next_index = idx + 1;
        }
        for (_, _, q) in log.index.iter_mut() {
            q.sort();
        }
        Ok(log)
    }

    /// Map segment file `path` (number `idx`) and index its records. A
    /// segment on disk is checked record header by record header (its
    /// payloads are checked when they are read back) and not kept mapped.
    fn scan_segment(&mut self, idx: u64, path: &Path, place: Place) -> Result<Segment> {
        let writable = place == Place::Memory;
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(io(path, "opening a segment"))?;
        let map = if writable {
            // SAFETY: the process that wrote this segment is dead (we
            // restart in its place) and nothing else writes it; its
            // records are never written again (once they are all freed,
            // the memory may be reused for new ones, by this process only).
            Map::Writable(
                unsafe { MmapMut::map_mut(&file) }.map_err(io(path, "mapping a segment"))?,
            )
        } else {
            // SAFETY: the mapping is read-only; a writer only appends past
            // the records indexed here, and names a copy on disk only once
            // it is complete.
            Map::ReadOnly(unsafe { Mmap::map(&file) }.map_err(io(path, "mapping a segment"))?)
        };
        let bytes = map.bytes();
        self.rank = check_segment_header(bytes, idx, path)?;
        let mut off = SEGMENT_HEADER;
        let mut live = 0;
        let corrupt = |reason| Error::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        loop {
            let record = if place == Place::Disk {
                decode_record_header(bytes, off)
            } else {
                decode_record(bytes, off)
            };
            let Some((h, _, len)) = record.map_err(corrupt)? else {
                break;
            };
            self.index.queue(h.dest, h.context).push(Entry {
                seq: h.seq,
                segment: idx,
                offset: off,
            });
            live += 1;
            self.bytes_logged += len as u64;
            off += record_span(len);
        }
        let map = match (place, map) {
            // Mapped again when a record of it is read (see `Map::OnDisk`).
            (Place::Disk, _) => Map::OnDisk(OnceCell::new()),
            (_, map) => map,
        };
        let mut seg = Segment::new(path.to_path_buf(), true, map, off, live);
        // Written, so backed.
        seg.populated = off / PAGE * PAGE;
        Ok(seg)
    }

    /// The file of segment `index` (where a record's [`Location`] is),
    /// if the log has that segment.
    ///
    /// [`Location`]: crate::Location
    pub fn segment_file(&self, index: u64) -> Option<&Path> {
        self.segments.get(&index).map(|s| s.path.as_path())
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Rank whose log this is.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Payload bytes appended since creation (or found when opened).
    pub fn bytes_logged(&self) -> u64 {
        self.bytes_logged
    }

    /// Segments kept (in memory and on disk).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Bytes of kept segments on disk (moved there to free memory).
    pub fn disk_bytes(&self) -> u64 {
        self.disk_bytes
    }

    /// The most memory the log held at once, in bytes.
    pub fn peak_memory_bytes(&self) -> usize {
        self.peak_memory
    }

    /// Segments copied to disk, times a new segment waited for such a copy
    /// (memory at its limit), and times the log went past its limit
    /// because the engine still sent from all its memory.
    pub fn spill_counts(&self) -> (u64, u64, u64) {
        (self.spilled, self.waited_for_disk, self.over_limit)
    }

    /// Segments this log has started: (freshly made, reused after being
    /// freed). In a steady state only the second count grows; fresh
    /// segments cost zeroing their memory.
    pub fn segments_started(&self) -> (u32, u32) {
        (self.made - self.reused, self.reused)
    }
}

impl Drop for SenderLog {
    fn drop(&mut self) {
        // Copies under way end first (their memory is unmapped below);
        // a copy of a segment whose records were freed meanwhile goes.
        if let Some(writer) = self.writer.take() {
            for done in writer.finish() {
                self.copied(done);
            }
        }
        // Spare files are not part of the log: leave none behind.
        for s in &self.spare {
            if let Some(f) = &s.file {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}
