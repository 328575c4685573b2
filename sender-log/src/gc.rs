//! Freeing records once their receiver checkpointed past them, and
//! releasing the segments left without a live record.

use crate::SenderLog;
use crate::error::{Result, io};
use crate::segment::{DiskCopy, Map};

impl SenderLog {
    /// Forget the records to `dest` on `context` up to and including
    /// `seq` (that rank checkpointed past them); release segments left
    /// without a live record (their memory is reused, their files
    /// deleted). Returns how many segments were released.
    pub fn free_up_to(&mut self, dest: u32, context: u32, seq: u64) -> Result<usize> {
        // Copies finished meanwhile: a segment emptied below is released
        // at once rather than when its copy is next heard of.
        self.collect_copies();
        let Some(q) = self.index.get_mut(dest, context) else {
            return Ok(0);
        };
        // A checkpoint frees a whole interval's records: one step per
        // segment they lie in.
        let segments = &mut self.segments;
        let mut emptied = Vec::new();
        q.free_up_to(seq, |index, n| {
            if let Some(seg) = segments.get_mut(&index) {
                seg.live = seg.live.saturating_sub(n);
                if seg.live == 0 {
                    emptied.push(index);
                }
            }
        });
        let mut released = 0;
        for i in emptied {
            if Some(i) != self.current && self.release(i)? {
                released += 1;
            }
        }
        Ok(released)
    }

    /// Release segment `idx`, which has no live record: its memory goes
    /// aside for reuse (or back), its files are deleted. A segment being
    /// copied to disk is released when the copy ends. Returns whether it
    /// was released.
    pub(crate) fn release(&mut self, idx: u64) -> Result<bool> {
        let Some(seg) = self.segments.get(&idx) else {
            return Ok(false);
        };
        if seg.disk == DiskCopy::Writing || matches!(seg.map, Map::Sealed(_)) {
            return Ok(false);
        }
        // (Never lent: the engine reads a record only to send it, and a
        // record is freed only once its receiver has it.)
        let Some(seg) = self.segments.remove(&idx) else {
            return Ok(false);
        };
        if let DiskCopy::Done(copy) = &seg.disk {
            self.disk_bytes = self.disk_bytes.saturating_sub(seg.used as u64);
            std::fs::remove_file(copy).map_err(io(copy, "deleting a freed segment"))?;
        }
        match seg.map {
            Map::Writable(map) => {
                let file = seg.on_disk.then_some(seg.path);
                self.set_aside(idx, map, seg.populated, file)?;
            }
            map => {
                if matches!(map, Map::OnDisk(_)) {
                    self.disk_bytes = self.disk_bytes.saturating_sub(seg.used as u64);
                }
                drop(map);
                self.resident.remove(&idx);
                if self.writable && seg.on_disk {
                    std::fs::remove_file(&seg.path)
                        .map_err(io(&seg.path, "deleting a freed segment"))?;
                }
            }
        }
        Ok(true)
    }
}
