//! [`SenderLog`]: starting a log, opening one left on disk, and what it
//! tells about itself.

use std::collections::{BTreeMap, VecDeque};
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut};

use crate::error::{Error, Result, io};
use crate::format::{ALIGN, SEGMENT_HEADER, check_segment_header, decode_record, record_span};
use crate::index::{Entry, Index};
use crate::memory::PAGE;
use crate::segment::{DEFAULT_SEGMENT_SIZE, Map, Segment, Spare};

/// One rank's sender log (writable), or a finished log opened for reading.
pub struct SenderLog {
    pub(crate) dir: PathBuf,
    pub(crate) rank: u32,
    pub(crate) segment_size: usize,
    pub(crate) segments: BTreeMap<u64, Segment>,
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
    /// The most segments the log has had at once.
    pub(crate) peak_segments: usize,
    /// Segments this log has made (new or reused).
    pub(crate) made: u32,
    /// How many of those were freed segments reused.
    pub(crate) reused: u32,
}

impl SenderLog {
    /// Start an empty log for `rank` in `dir` (created if missing; segments
    /// left there by an earlier incarnation are removed).
    pub fn create(dir: &Path, rank: u32, segment_size: usize) -> Result<SenderLog> {
        std::fs::create_dir_all(dir).map_err(io(dir, "creating the log directory"))?;
        for entry in std::fs::read_dir(dir)
            .map_err(io(dir, "listing the log directory"))?
            .flatten()
        {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("seg-") || name.starts_with(".seg-") {
                let p = entry.path();
                std::fs::remove_file(&p).map_err(io(&p, "removing an old segment"))?;
            }
        }
        Ok(SenderLog {
            dir: dir.to_path_buf(),
            rank,
            segment_size: segment_size.max(4096).next_multiple_of(ALIGN),
            segments: BTreeMap::new(),
            current: None,
            ready: 0,
            next_index: 0,
            index: Index::default(),
            writable: true,
            bytes_logged: 0,
            in_memory: false,
            spare: Vec::new(),
            reused: 0,
            peak_segments: 0,
            made: 0,
        })
    }

    /// Start an empty log for `rank` in anonymous memory (see the crate
    /// docs): the fastest, but it dies with the process.
    pub fn create_in_memory(rank: u32, segment_size: usize) -> SenderLog {
        SenderLog {
            dir: PathBuf::from("(memory)"),
            rank,
            segment_size: segment_size.max(4096).next_multiple_of(ALIGN),
            segments: BTreeMap::new(),
            current: None,
            ready: 0,
            next_index: 0,
            index: Index::default(),
            writable: true,
            bytes_logged: 0,
            in_memory: true,
            spare: Vec::new(),
            reused: 0,
            peak_segments: 0,
            made: 0,
        }
    }

    /// Open the log in `dir` for reading (e.g. from another process, or
    /// after the job): every record of every segment is indexed; when a
    /// message was logged twice (by two incarnations), the later copy
    /// counts. A torn last record is ignored; other damage is an error
    /// naming file and offset.
    pub fn open_read_only(dir: &Path) -> Result<SenderLog> {
        let mut log = Self::open_existing(dir, false)?;
        log.keep_latest_copies(|_| u64::MAX);
        Ok(log)
    }

    /// Reopen the log a crashed process of this rank left in `dir`, to
    /// continue it after a restart: the records to each destination `d`
    /// with a sequence number up to `keep(d)` stay (peers may still need
    /// them); later ones are forgotten, because the restarted process
    /// re-executes and logs them again. New records go to new segments,
    /// so nothing already written is overwritten; when a message was
    /// logged twice (by two incarnations), the later copy counts.
    pub fn reopen(
        dir: &Path,
        rank: u32,
        segment_size: usize,
        keep: impl Fn(u32) -> u64,
    ) -> Result<SenderLog> {
        std::fs::create_dir_all(dir).map_err(io(dir, "creating the log directory"))?;
        let mut log = Self::open_existing(dir, true)?;
        log.rank = rank;
        log.segment_size = segment_size.max(4096).next_multiple_of(ALIGN);
        log.keep_latest_copies(keep);
        log.bytes_logged = 0;
        Ok(log)
    }

    /// Forget the records to each destination `d` above `keep(d)`, and of
    /// a message logged more than once (by several incarnations) every
    /// copy but the last.
    fn keep_latest_copies(&mut self, keep: impl Fn(u32) -> u64) {
        for (dest, q) in self.index.iter_mut() {
            let limit = keep(dest);
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
    }

    fn open_existing(dir: &Path, writable: bool) -> Result<SenderLog> {
        if writable {
            // Segments a crashed incarnation had set aside for reuse.
            for e in std::fs::read_dir(dir)
                .map_err(io(dir, "listing the log directory"))?
                .flatten()
            {
                if e.file_name().to_string_lossy().starts_with(".seg-") {
                    let p = e.path();
                    std::fs::remove_file(&p).map_err(io(&p, "removing a spare segment"))?;
                }
            }
        }
        let mut paths: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
            .map_err(io(dir, "listing the log directory"))?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let idx = name
                    .strip_prefix("seg-")?
                    .strip_suffix(".vlog")?
                    .parse()
                    .ok()?;
                Some((idx, e.path()))
            })
            .collect();
        paths.sort();
        let mut log = SenderLog {
            dir: dir.to_path_buf(),
            rank: 0,
            segment_size: DEFAULT_SEGMENT_SIZE,
            segments: BTreeMap::new(),
            current: None,
            ready: 0,
            next_index: 0,
            index: Index::default(),
            writable,
            bytes_logged: 0,
            in_memory: false,
            spare: Vec::new(),
            reused: 0,
            peak_segments: 0,
            made: 0,
        };
        for (idx, path) in paths {
            let file = OpenOptions::new()
                .read(true)
                .write(writable)
                .open(&path)
                .map_err(io(&path, "opening a segment"))?;
            let map = if writable {
                // SAFETY: the process that wrote this segment is dead (we
                // restart in its place); we never write into it again, the
                // mapping is writable only so freed segments can be
                // handled like our own.
                Map::Writable(
                    unsafe { MmapMut::map_mut(&file) }.map_err(io(&path, "mapping a segment"))?,
                )
            } else {
                // SAFETY: the mapping is read-only; a writer only appends
                // past the records we index.
                Map::ReadOnly(unsafe { Mmap::map(&file) }.map_err(io(&path, "mapping a segment"))?)
            };
            let map_bytes = map.bytes();
            let rank = check_segment_header(map_bytes, idx, &path)?;
            log.rank = rank;
            let mut off = SEGMENT_HEADER;
            let mut live = 0;
            while let Some((h, _, len)) =
                decode_record(map_bytes, off).map_err(|reason| Error::Corrupt {
                    path: path.clone(),
                    reason,
                })?
            {
                log.index.queue(h.dest).push(Entry {
                    seq: h.seq,
                    segment: idx,
                    offset: off,
                });
                live += 1;
                log.bytes_logged += len as u64;
                off += record_span(len);
            }
            log.segments.insert(
                idx,
                Segment {
                    path,
                    on_disk: true,
                    map,
                    used: off,
                    live,
                    warm_until: 0,
                    // Written, so backed; we never write there again.
                    populated: off / PAGE * PAGE,
                },
            );
            log.next_index = idx + 1;
        }
        for (_, q) in log.index.iter_mut() {
            q.sort();
        }
        Ok(log)
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

    /// Segments currently on disk.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
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
        // Spare files are not part of the log: leave none behind.
        for s in &self.spare {
            if let Some(f) = &s.file {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}
