//! Starting segments (reusing freed ones when possible) and freeing
//! records, which sets emptied segments aside for reuse.

use std::fs::OpenOptions;
use std::path::PathBuf;

use memmap2::{Advice, MmapMut, MmapOptions};

use crate::SenderLog;
use crate::error::{Result, io};
use crate::format::{ALIGN, SEGMENT_HEADER, end_chain, record_span, segment_header, segment_path};
use crate::memory::{populate, preallocate};
use crate::segment::{Map, SPARE_SEGMENTS, Segment, Spare, best_spare};

impl SenderLog {
    /// Start a new current segment with room for a record of
    /// `min_payload` bytes: anonymous memory (reusing a freed one when
    /// possible) or a file.
    pub(crate) fn new_segment(&mut self, min_payload: usize) -> Result<u64> {
        let idx = self.next_index;
        // Full size at once: memory is only taken as records need it (see
        // `populate`), so a short job pays for what it logs, not for the
        // segment.
        let capacity = self
            .segment_size
            .max(4096)
            .next_multiple_of(ALIGN)
            .max(SEGMENT_HEADER + record_span(min_payload));
        self.made = self.made.saturating_add(1);
        let (path, map, populated) = if self.in_memory {
            self.memory_segment(idx, capacity)?
        } else {
            self.file_segment(idx, capacity)?
        };
        self.segments.insert(
            idx,
            Segment {
                path,
                on_disk: !self.in_memory,
                map: Map::Writable(map),
                used: SEGMENT_HEADER,
                live: 0,
                warm_until: 0,
                populated,
            },
        );
        self.next_index += 1;
        self.current = Some(idx);
        self.ready = 0;
        self.peak_segments = self.peak_segments.max(self.segments.len());
        Ok(idx)
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
        Ok((path, map, populated))
    }

    fn memory_segment(&mut self, idx: u64, capacity: usize) -> Result<(PathBuf, MmapMut, usize)> {
        let path = PathBuf::from(format!("(memory segment {idx})"));
        let (map, populated) = match best_spare(&self.spare, capacity, false) {
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
                (map, 0)
            }
        };
        Ok((path, map, populated))
    }

    /// Forget the records to `dest` up to and including `seq` (that rank
    /// checkpointed past them); delete segments left without a live record.
    /// Returns how many segments were deleted.
    pub fn free_up_to(&mut self, dest: u32, seq: u64) -> Result<usize> {
        let Some(q) = self.index.get_mut(dest) else {
            return Ok(0);
        };
        // A checkpoint frees a whole interval's records: one step per
        // segment they lie in.
        let freed = q.entries.partition_point(|e| e.seq <= seq);
        let segments = &mut self.segments;
        q.pop_front(freed, |index, n| {
            if let Some(seg) = segments.get_mut(&index) {
                seg.live = seg.live.saturating_sub(n);
            }
        });
        let empty: Vec<u64> = self
            .segments
            .iter()
            .filter(|(i, s)| s.live == 0 && Some(**i) != self.current)
            .map(|(i, _)| *i)
            .collect();
        for i in &empty {
            if let Some(seg) = self.segments.remove(i) {
                match seg.map {
                    Map::Writable(map)
                        if self.writable
                            && self.spare.len() + self.segments.len()
                                < SPARE_SEGMENTS.max(self.peak_segments)
                            && map.len() == self.segment_size =>
                    {
                        // Out of the log (for readers, as good as deleted)
                        // but kept, pages and all, for the next segment.
                        let file = if seg.on_disk {
                            let tmp = self.dir.join(format!(".seg-spare-{i:08}.tmp"));
                            std::fs::rename(&seg.path, &tmp)
                                .map_err(io(&seg.path, "setting a freed segment aside"))?;
                            Some(tmp)
                        } else {
                            None
                        };
                        self.spare.push(Spare {
                            map,
                            populated: seg.populated,
                            file,
                        });
                    }
                    map => {
                        drop(map);
                        if self.writable && seg.on_disk {
                            std::fs::remove_file(&seg.path)
                                .map_err(io(&seg.path, "deleting a freed segment"))?;
                        }
                    }
                }
            }
        }
        Ok(empty.len())
    }
}
