//! The log's memory: starting segments (on memory freed before, when
//! there is some), setting freed memory aside for reuse, and the limit on
//! how much memory the log may hold.
//!
//! A bounded log ([`SenderLog::bound`]) takes memory for a new segment,
//! in this order: a spare (memory whose records were all freed); the
//! memory of a full segment whose copy on disk is complete (the segment
//! then lives on disk, see `spill.rs`); fresh memory while the log holds
//! less than its limit; otherwise it waits for a copy under way, and fails
//! — naming the limit and the spill directory — only when nothing can be
//! moved out (the disk is full). So a log whose sends the disk keeps up
//! with reuses a few segments' memory over and over, warm, and a burst
//! faster than the disk grows it up to the limit.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use memmap2::{Advice, MmapMut, MmapOptions};

use crate::SenderLog;
use crate::error::{Error, Result, io};
use crate::format::{
    SEGMENT_HEADER, end_chain, record_span, segment_header, segment_index, segment_path,
};
use crate::memory::{PAGE, populate, preallocate};
use crate::segment::{Map, SPARE_SEGMENTS, Segment, Spare, best_spare};

/// Where a file log's segments moved to disk are, in its directory: a
/// directory, or a link to one elsewhere (`SenderLog::bound`).
pub const SPILL_DIR: &str = "spilled";

/// How much memory a bounded log may hold, and where it moves segments.
pub(crate) struct Limit {
    pub(crate) memory: usize,
    pub(crate) dir: PathBuf,
}

impl SenderLog {
    /// Bound the log's memory to `memory` bytes (at least two segments):
    /// beyond that, full segments move to files in `spill_dir` (created if
    /// missing), in the background, and their memory takes new records.
    /// A file log keeps `spill_dir` as its `spilled` entry (a link to it
    /// if it lies elsewhere), where readers find it; files there that are
    /// not segments of this log (an earlier incarnation's) are removed.
    pub fn bound(&mut self, memory: usize, spill_dir: &Path) -> Result<()> {
        let spill_dir = std::path::absolute(spill_dir)
            .map_err(io(spill_dir, "resolving the spill directory"))?;
        std::fs::create_dir_all(&spill_dir)
            .map_err(io(&spill_dir, "creating the spill directory"))?;
        if !self.in_memory {
            let entry = self.dir.join(SPILL_DIR);
            if entry != spill_dir {
                link_spill_dir(&entry, &spill_dir)?;
            }
        }
        for entry in std::fs::read_dir(&spill_dir)
            .map_err(io(&spill_dir, "listing the spill directory"))?
            .flatten()
        {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            // Copies under way when a process died, and segments that do
            // not live there for this log: an earlier incarnation's (the
            // directory may be reached through a link), or copies of
            // segments this log holds in memory (a lost host's log came
            // back from a checkpoint's copy: older than it).
            let stale = name.starts_with(".seg-")
                || segment_index(&name).is_some_and(|i| {
                    !self
                        .segments
                        .get(&i)
                        .is_some_and(|s| matches!(s.map, Map::OnDisk(_)))
                });
            if stale {
                let p = entry.path();
                std::fs::remove_file(&p).map_err(io(&p, "removing an old segment"))?;
            }
        }
        self.limit = Some(crate::pool::Limit {
            memory: memory.max(2 * self.segment_size),
            dir: spill_dir,
        });
        Ok(())
    }

    /// Bytes of memory the log holds: its segments in memory and spares.
    pub fn memory_bytes(&self) -> usize {
        self.memory
    }

    /// The memory limit set by [`SenderLog::bound`], if any.
    pub fn memory_limit(&self) -> Option<usize> {
        self.limit.as_ref().map(|l| l.memory)
    }

    /// Start a new current segment with room for a record of
    /// `min_payload` bytes: anonymous memory or a file (reusing freed
    /// memory when possible).
    pub(crate) fn new_segment(&mut self, min_payload: usize) -> Result<u64> {
        let idx = self.next_index;
        // Full size at once: memory is only taken as records need it (see
        // `populate`), so a short job pays for what it logs, not for the
        // segment. Whole pages: a copy to disk writes whole pages.
        let capacity = self
            .segment_size
            .max(SEGMENT_HEADER + record_span(min_payload))
            .next_multiple_of(PAGE);
        self.make_room(capacity)?;
        self.made = self.made.saturating_add(1);
        let (path, map, populated) = if self.in_memory {
            self.memory_segment(idx, capacity)?
        } else {
            self.file_segment(idx, capacity)?
        };
        let mut seg = Segment::new(path, !self.in_memory, Map::Writable(map), SEGMENT_HEADER, 0);
        seg.populated = populated;
        self.segments.insert(idx, seg);
        self.resident.insert(idx);
        self.next_index += 1;
        let sealed = self.current.replace(idx);
        self.ready = 0;
        self.peak_resident = self.peak_resident.max(self.resident.len());
        self.peak_memory = self.peak_memory.max(self.memory);
        if let Some(full) = sealed {
            if self.segments.get(&full).is_some_and(|s| s.live == 0) {
                self.release(full)?;
            }
            // The segment before is full: copy it out ahead of need.
            self.copy_ahead()?;
        }
        Ok(idx)
    }

    /// Memory for a segment of `capacity` bytes may be taken (see the
    /// module docs): a spare fits, or the log stays within its limit.
    fn make_room(&mut self, capacity: usize) -> Result<()> {
        self.collect_copies();
        let Some(limit) = self.limit.as_ref().map(|l| l.memory) else {
            return Ok(());
        };
        // Copies started by this call: one that fails ends it.
        let mut tried = false;
        loop {
            if best_spare(&self.spare, capacity, !self.in_memory).is_some() {
                return Ok(());
            }
            if let Some(idx) = self.reusable() {
                self.move_to_disk(idx)?;
                continue;
            }
            if self.memory + capacity <= limit {
                return Ok(());
            }
            if !self.copies_under_way() {
                if tried && self.copy_error.is_some() {
                    return Err(self.full_error());
                }
                if !self.copy_oldest()? {
                    // Nothing can move to disk: the memory left holds the
                    // current segment, or records the engine still sends
                    // from (it returns them once the transport has taken
                    // them, which needs the engine to run, not this call
                    // to wait), or the new record is larger than the
                    // limit. The log goes past its limit by that much
                    // meanwhile.
                    self.over_limit += 1;
                    return Ok(());
                }
                tried = true;
            }
            self.waited_for_disk += 1;
            if !self.wait_copy() {
                return Err(self.full_error());
            }
        }
    }

    fn file_segment(&mut self, idx: u64, capacity: usize) -> Result<(PathBuf, MmapMut, usize)> {
        let path = segment_path(&self.dir, idx);
        let reusable = best_spare(&self.spare, capacity, true);
        if let Some(i) = reusable
            && let Spare {
                mut map,
                populated,
                file: Some(tmp),
            } = self.spare.swap_remove(i)
        {
            // Made ready under its spare name, then renamed into the log: a
            // crash in between leaves no half-made segment. Old records stay
            // after the new header, but the zero magic that ends the chain
            // hides them (see `append`).
            let cap = map.len();
            map[..SEGMENT_HEADER].copy_from_slice(&segment_header(self.rank, idx, cap as u64));
            end_chain(&mut map, SEGMENT_HEADER);
            std::fs::rename(&tmp, &path).map_err(io(&path, "reusing a freed segment"))?;
            self.reused += 1;
            return Ok((path, map, populated));
        }
        // Built under a temporary name and renamed once its header is
        // written: a crash in between leaves no half-made segment.
        let tmp = self.dir.join(format!(".seg-{idx:010}.tmp"));
        let _ = std::fs::remove_file(&tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io(&tmp, "creating a segment"))?;
        // Sparse: pages are taken as records reach them (`populate`).
        file.set_len(capacity as u64)
            .map_err(io(&tmp, "sizing a segment"))?;
        // SAFETY: the file is ours alone to write (fresh, create_new); other
        // processes only read records we have completed.
        let mut map = unsafe { MmapOptions::new().len(capacity).map_mut(&file) }
            .map_err(io(&path, "mapping a segment"))?;
        let populated = match populate(&map, 0, SEGMENT_HEADER) {
            Ok(end) => end,
            // A kernel without MADV_POPULATE_WRITE (before 5.14): reserve
            // the whole file at once instead, so writes cannot fail later.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                preallocate(&file, capacity)
                    .map_err(io(&path, "reserving disk space for a segment"))?;
                capacity
            }
            Err(e) => return Err(io(&path, "taking memory for a segment")(e)),
        };
        map[..SEGMENT_HEADER].copy_from_slice(&segment_header(self.rank, idx, capacity as u64));
        std::fs::rename(&tmp, &path).map_err(io(&path, "naming a new segment"))?;
        self.memory += capacity;
        Ok((path, map, populated))
    }

    fn memory_segment(&mut self, idx: u64, capacity: usize) -> Result<(PathBuf, MmapMut, usize)> {
        let path = PathBuf::from(format!("(memory segment {idx})"));
        let (mut map, populated) = match best_spare(&self.spare, capacity, false) {
            Some(i) => {
                self.reused += 1;
                let spare = self.spare.swap_remove(i);
                (spare.map, spare.populated)
            }
            None => {
                let map = MmapOptions::new()
                    .len(capacity)
                    .map_anon()
                    .map_err(io(&path, "allocating a memory segment"))?;
                // Fewer page faults where the kernel allows huge pages.
                let _ = map.advise(Advice::HugePage);
                self.memory += capacity;
                (map, 0)
            }
        };
        // A header, so that the segment can be copied to disk as a file
        // any reader takes.
        let taken = populate(&map, 0, SEGMENT_HEADER)
            .map_err(io(&path, "taking memory for a segment"))?
            .max(populated);
        map[..SEGMENT_HEADER].copy_from_slice(&segment_header(self.rank, idx, capacity as u64));
        end_chain(&mut map, SEGMENT_HEADER);
        Ok((path, map, taken))
    }

    /// Keep the memory of a segment no record needs any more (its file,
    /// for a file log, is `file`) for the next segments, or give it back.
    pub(crate) fn set_aside(
        &mut self,
        idx: u64,
        map: MmapMut,
        populated: usize,
        file: Option<PathBuf>,
    ) -> Result<()> {
        self.resident.remove(&idx);
        let room = match &self.limit {
            // Within the limit: memory taken is kept.
            Some(l) => self.memory <= l.memory,
            None => self.spare.len() + self.resident.len() < SPARE_SEGMENTS.max(self.peak_resident),
        };
        if self.writable && room && map.len() == self.segment_size.next_multiple_of(PAGE) {
            // Out of the log (for readers, as good as deleted) but kept,
            // pages and all, for the next segment.
            let file = match file {
                Some(f) => {
                    let tmp = self.dir.join(format!(".seg-spare-{idx:08}.tmp"));
                    std::fs::rename(&f, &tmp).map_err(io(&f, "setting a freed segment aside"))?;
                    Some(tmp)
                }
                None => None,
            };
            self.spare.push(Spare {
                map,
                populated,
                file,
            });
            return Ok(());
        }
        self.memory = self.memory.saturating_sub(map.len());
        drop(map);
        if let Some(f) = file.filter(|_| self.writable) {
            std::fs::remove_file(&f).map_err(io(&f, "deleting a freed segment"))?;
        }
        Ok(())
    }

    /// The error of a bounded log that is full: memory at its limit and
    /// nothing can move to disk.
    fn full_error(&self) -> Error {
        let (memory, dir) = self
            .limit
            .as_ref()
            .map_or((0, PathBuf::new()), |l| (l.memory, l.dir.clone()));
        Error::Full {
            memory,
            dir,
            cause: self
                .copy_error
                .clone()
                .unwrap_or_else(|| "no full segment to move there".into()),
        }
    }
}

/// Make `entry` (a file log's `spilled`) a link to `spill_dir`: a link
/// elsewhere is replaced, and so is an empty directory (an earlier job's,
/// whose segments `SenderLog::create` removed); anything else is an error
/// rather than segments that readers would not find.
fn link_spill_dir(entry: &Path, spill_dir: &Path) -> Result<()> {
    match std::fs::symlink_metadata(entry) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(entry, "looking at the spill directory's link")(e)),
        Ok(m) if m.file_type().is_symlink() => {
            if std::fs::read_link(entry).is_ok_and(|to| to == spill_dir) {
                return Ok(());
            }
            std::fs::remove_file(entry).map_err(io(entry, "replacing a link"))?;
        }
        Ok(m) if m.is_dir() => std::fs::remove_dir(entry).map_err(io(
            entry,
            "replacing a directory of segments by a link to the spill directory",
        ))?,
        Ok(_) => {
            return Err(Error::Corrupt {
                path: entry.to_path_buf(),
                reason: "neither a directory nor a link, where the spill directory's link goes"
                    .into(),
            });
        }
    }
    std::os::unix::fs::symlink(spill_dir, entry).map_err(io(entry, "linking the spill directory"))
}
