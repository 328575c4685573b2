//! Moving full segments of a bounded log to disk (see `pool.rs` for when).
//!
//! A full segment is copied to `seg-<index>.vlog` in the spill directory
//! by the spill writer thread (`spill_writer.rs`) while the log goes on;
//! the copy is a segment file like any other, so readers take it as such.
//! Once the copy is complete and the engine holds no loan of the
//! segment's memory, the memory can take new records: the segment then
//! lives on disk alone, its records indexed by run (`index.rs`), read back
//! (mapped) only to re-send them to a restarted peer or to save them at a
//! checkpoint. Every full segment is copied as soon as it is full, so
//! that its memory is ready for new records by the time the log needs it:
//! a log whose sends the disk keeps up with needs a few segments of
//! memory, and a burst beyond the disk's pace grows it (up to the limit)
//! only by what the disk could not take.

use std::cell::OnceCell;

use crate::SenderLog;
use crate::error::{Result, io};
use crate::format::{RECORD_HEADER, segment_path};
use crate::memory::PAGE;
use crate::segment::{DiskCopy, Map};
use crate::spill_writer::{Done, Job, SpillWriter};

impl SenderLog {
    /// Start copies of every full segment in memory that has none: the
    /// sooner a segment is on disk, the sooner its memory can take new
    /// records instead of fresh memory. (Its records may still be freed
    /// meanwhile, by a checkpoint; the copy is then deleted.)
    pub(crate) fn copy_ahead(&mut self) -> Result<()> {
        while self.copy_oldest()? {}
        Ok(())
    }

    /// Start copying the oldest full segment in memory that has no copy;
    /// false if there is none.
    pub(crate) fn copy_oldest(&mut self) -> Result<bool> {
        let Some(limit) = &self.limit else {
            return Ok(false);
        };
        let dir = limit.dir.clone();
        let current = self.current;
        let Some(idx) = self.resident.iter().copied().find(|i| {
            Some(*i) != current
                && self
                    .segments
                    .get(i)
                    .is_some_and(|s| s.disk == DiskCopy::None && s.live > 0)
        }) else {
            return Ok(false);
        };
        if self.writer.is_none() {
            self.writer =
                Some(SpillWriter::start(self.rank).map_err(io(&dir, "starting the spill writer"))?);
        }
        let Some(seg) = self.segments.get_mut(&idx) else {
            return Ok(false);
        };
        let bytes = match std::mem::replace(&mut seg.map, Map::OnDisk(OnceCell::new())) {
            Map::Writable(m) => std::sync::Arc::new(m),
            Map::Sealed(m) => m,
            other => {
                seg.map = other;
                return Ok(false);
            }
        };
        seg.map = Map::Sealed(bytes.clone());
        // The records and the zero magic after them, in whole pages.
        let len = (seg.used + RECORD_HEADER)
            .next_multiple_of(PAGE)
            .min(bytes.len());
        let path = segment_path(&dir, idx);
        seg.disk = DiskCopy::Writing;
        let job = Job {
            index: idx,
            bytes,
            len,
            path,
        };
        if let Some(w) = &self.writer {
            w.send(job)
                .map_err(io(&dir, "handing a segment to the spill writer"))?;
        }
        Ok(true)
    }

    /// Are copies under way?
    pub(crate) fn copies_under_way(&self) -> bool {
        self.resident.iter().any(|i| {
            self.segments
                .get(i)
                .is_some_and(|s| s.disk == DiskCopy::Writing)
        })
    }

    /// Take in the copies the writer finished, without waiting.
    pub(crate) fn collect_copies(&mut self) {
        while let Some(done) = self.writer.as_ref().and_then(SpillWriter::try_done) {
            self.copied(done);
        }
    }

    /// Wait for the writer to finish a copy, and take it in. False if the
    /// writer is gone (its thread ended), which leaves the copies it had
    /// as they were.
    pub(crate) fn wait_copy(&mut self) -> bool {
        match self.writer.as_ref().and_then(SpillWriter::wait_done) {
            Some(done) => {
                self.copied(done);
                true
            }
            None => {
                for i in self.resident.iter() {
                    if let Some(seg) = self.segments.get_mut(i)
                        && seg.disk == DiskCopy::Writing
                    {
                        seg.disk = DiskCopy::None;
                    }
                }
                self.copy_error = Some("the spill writer thread is gone".into());
                false
            }
        }
    }

    /// A copy finished: the memory is the log's alone again; the segment
    /// can now move to disk, or the error is kept for when the log is full.
    pub(crate) fn copied(&mut self, done: Done) {
        let Some(dir) = self.limit.as_ref().map(|l| l.dir.clone()) else {
            return;
        };
        let Some(seg) = self.segments.get_mut(&done.index) else {
            return;
        };
        if let Map::Sealed(m) = std::mem::replace(&mut seg.map, Map::OnDisk(OnceCell::new())) {
            seg.map = match std::sync::Arc::try_unwrap(m) {
                Ok(m) => Map::Writable(m),
                Err(m) => Map::Sealed(m),
            };
        }
        let path = segment_path(&dir, done.index);
        match done.result {
            Ok(()) => {
                self.disk_bytes += seg.used as u64;
                self.spilled += 1;
                seg.disk = DiskCopy::Done(path);
                self.copy_error = None;
            }
            Err(e) => {
                seg.disk = DiskCopy::None;
                self.copy_error = Some(format!("writing {}: {e}", path.display()));
            }
        }
        if seg.live == 0 {
            // Freed while it was being copied.
            let _ = self.release(done.index);
        }
    }

    /// Index the oldest records of every destination by run while their
    /// segments are on disk (see `DestQueue::compact`).
    pub(crate) fn compact_index(&mut self) {
        let segments = &self.segments;
        let on_disk = |s: u64| {
            segments
                .get(&s)
                .is_some_and(|s| matches!(s.map, Map::OnDisk(_)))
        };
        for (_, _, q) in self.index.iter_mut() {
            q.compact_on_disk(on_disk);
        }
    }

    /// A full segment whose memory can take new records now: copied to
    /// disk and not lent to the engine (the oldest, if several).
    pub(crate) fn reusable(&self) -> Option<u64> {
        self.resident.iter().copied().find(|i| {
            Some(*i) != self.current
                && self.segments.get(i).is_some_and(|s| {
                    matches!(s.disk, DiskCopy::Done(_))
                        && matches!(s.map, Map::Writable(_))
                        && !s.lent()
                })
        })
    }

    /// Segment `idx` (see [`SenderLog::reusable`]) lives on disk from now
    /// on; its memory is set aside for the next segment.
    pub(crate) fn move_to_disk(&mut self, idx: u64) -> Result<()> {
        let Some(seg) = self.segments.get_mut(&idx) else {
            return Ok(());
        };
        let DiskCopy::Done(disk) = std::mem::replace(&mut seg.disk, DiskCopy::None) else {
            return Ok(());
        };
        let Map::Writable(memory) = std::mem::replace(&mut seg.map, Map::OnDisk(OnceCell::new()))
        else {
            return Ok(());
        };
        let memory_file = seg
            .on_disk
            .then(|| std::mem::replace(&mut seg.path, disk.clone()));
        seg.path = disk;
        seg.on_disk = true;
        let populated = seg.populated;
        // Its records, and those of later segments already on disk that
        // waited behind it (a segment lent longer moves out of order).
        self.compact_index();
        self.set_aside(idx, memory, populated, memory_file)?;
        vpml_fault_points::fault_point!("log.moved_to_disk");
        Ok(())
    }
}
