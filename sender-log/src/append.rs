//! Appending records: reserving room (taking memory ahead), warming the
//! next records' memory, and the copy itself.

use crate::SenderLog;
use crate::checksum::{STREAM_FROM, copy_with_checksum};
use crate::error::{Error, Result, io};
use crate::format::{
    ALIGN, Location, RECORD_HEADER, RecordHeader, SEGMENT_HEADER, end_chain, record_span,
    write_record_header,
};
use crate::index::{Entry, MAX_DESTINATIONS};
use crate::memory::{POPULATE_AHEAD, POPULATE_STEP, populate, warm_lines};
use crate::segment::{Map, Segment};

impl SenderLog {
    /// Append a message. Sequence numbers per destination must increase.
    pub fn append(&mut self, header: RecordHeader, payload: &[u8]) -> Result<Location> {
        self.append_stored(header, payload).map(|(loc, _)| loc)
    }

    /// Make sure a record of `payload_len` bytes fits in the current
    /// segment, starting a new one if not, and return that segment's
    /// index. After it succeeds, appending a payload of that length cannot
    /// fail for want of room: a protocol reserves before the message
    /// leaves and copies the payload after.
    #[inline]
    pub fn reserve(&mut self, payload_len: usize) -> Result<u64> {
        // The common case, inline: room ready in the current segment.
        if record_span(payload_len) <= self.ready
            && let Some(i) = self.current
        {
            return Ok(i);
        }
        self.reserve_slow(payload_len)
    }

    /// The payload lengths [`SenderLog::reserve`] accepts right now without
    /// any work (room ready in the current segment): those below the
    /// returned bound (0: none). A protocol can tell its caller that a
    /// send this small needs no `reserve` before it leaves.
    #[inline]
    pub fn ready_below(&self) -> usize {
        match self.current {
            // The largest payload whose record spans at most `ready`, + 1.
            Some(_) => (self.ready / ALIGN * ALIGN)
                .checked_sub(RECORD_HEADER)
                .map_or(0, |max| max + 1),
            None => 0,
        }
    }

    /// [`SenderLog::reserve`] past the common case: take memory, or start
    /// a segment.
    #[inline(never)]
    fn reserve_slow(&mut self, payload_len: usize) -> Result<u64> {
        self.collect_copies();
        if !self.writable {
            return Err(Error::Corrupt {
                path: self.dir.clone(),
                reason: "the log was opened read-only".into(),
            });
        }
        let span = record_span(payload_len);
        let idx = match self.current.and_then(|i| Some((i, self.segments.get(&i)?))) {
            // Room, and memory taken for it (the record and the zero magic
            // after it).
            Some((i, s)) if s.used + span + RECORD_HEADER <= s.populated => i,
            // Memory the log already took is reused before more is taken:
            // a record that would reach past the current segment's taken
            // memory starts a spare segment that has it (the rest of this
            // one stays untouched, costing nothing).
            Some((i, s)) if s.used + span <= s.map.bytes().len() && !self.spare_has_taken(span) => {
                i
            }
            _ => self.new_segment(payload_len)?,
        };
        if let Some(seg) = self.segments.get_mut(&idx)
            && let Map::Writable(map) = &seg.map
            // The record, and the zero magic written after it.
            && let needed = (seg.used + span + RECORD_HEADER).min(map.len())
            && seg.populated < needed
        {
            // A step ahead, so that small records do not each pay a call.
            let to = needed.max(seg.populated + POPULATE_STEP);
            seg.populated = populate(map, seg.populated, to)
                .map_err(io(&seg.path, "taking memory for the sender log"))?;
        }
        self.ready = self.segments.get(&idx).map_or(0, Segment::ready);
        Ok(idx)
    }

    /// A loan of segment `segment`'s memory to whoever reads records there
    /// after this call (the engine, sending from the log): while it lives,
    /// that memory takes no other records. `None` for a segment not in
    /// memory (a file only read, which stays until its records are freed).
    pub fn lend(&self, segment: u64) -> Option<std::sync::Arc<()>> {
        self.segments
            .get(&segment)
            .filter(|s| s.map.is_memory())
            .map(|s| s.lease.clone())
    }

    /// Is there a spare segment (of the current kind) whose taken memory
    /// holds a record of `span` bytes?
    fn spare_has_taken(&self, span: usize) -> bool {
        self.spare.iter().any(|s| {
            s.file.is_some() != self.in_memory
                && s.populated >= SEGMENT_HEADER + span + RECORD_HEADER
        })
    }

    /// Get the next records' memory ready for writing, for idle moments:
    /// while less than [`POPULATE_AHEAD`] of taken memory is ready, take
    /// memory a step further ahead and bring the next `ahead` bytes into
    /// this core's cache (a hint: nothing changes in the log). The next
    /// appends then copy into cached memory instead of waiting for it, or
    /// for the kernel. With that much ready (a log reusing its segments)
    /// it returns at once: each append prefetches the next record's lines
    /// itself, and prefetching further on every idle moment measured no
    /// better.
    #[inline]
    pub fn warm_up(&mut self, ahead: usize) {
        // Plenty of taken memory ahead: the common case, inline. The next
        // record's lines were prefetched by the last append.
        if self.ready >= POPULATE_AHEAD {
            return;
        }
        self.warm_up_now(ahead);
    }

    /// [`SenderLog::warm_up`]'s work, when there is some.
    #[inline(never)]
    fn warm_up_now(&mut self, ahead: usize) {
        self.collect_copies();
        // With a spare's taken memory to go to, `reserve` switches there.
        let spare_ready = self.spare_has_taken(POPULATE_STEP);
        let Some(seg) = self.current.and_then(|i| self.segments.get_mut(&i)) else {
            return;
        };
        let Map::Writable(map) = &mut seg.map else {
            return;
        };
        if seg.populated < (seg.used + POPULATE_AHEAD).min(map.len()) && !spare_ready {
            // Best effort: `reserve` reports a failure when it matters.
            let to = seg.populated + POPULATE_STEP;
            if let Ok(end) = populate(map, seg.populated, to) {
                seg.populated = end;
            }
        }
        seg.warm_until = warm_lines(
            map,
            seg.used,
            seg.warm_until,
            seg.used + ahead,
            seg.populated,
        );
        // What was taken now is ready for `reserve` (and for a protocol's
        // `ready_below`) without a look at the segment.
        self.ready = seg.ready();
    }

    /// [`SenderLog::append`], also returning the logged copy of the payload
    /// (what a transport sends from).
    pub fn append_stored(
        &mut self,
        header: RecordHeader,
        payload: &[u8],
    ) -> Result<(Location, &[u8])> {
        if header.dest >= MAX_DESTINATIONS {
            return Err(Error::DestinationOutOfRange {
                path: self.dir.clone(),
                dest: header.dest,
            });
        }
        let idx = self.reserve(payload.len())?;
        let Some(seg) = self.segments.get_mut(&idx) else {
            return Err(Error::Corrupt {
                path: self.dir.clone(),
                reason: format!("segment {idx} vanished"),
            });
        };
        let Map::Writable(map) = &mut seg.map else {
            return Err(Error::Corrupt {
                path: seg.path.clone(),
                reason: "segment is read-only".into(),
            });
        };
        let off = seg.used;
        let span = record_span(payload.len());
        let start = off + RECORD_HEADER;
        // The chain of records ends at a zero magic. A reused segment holds
        // old bytes past `used`: end the chain after this record before
        // the record itself becomes valid, so a crash at any point leaves
        // readers a chain of whole records and nothing stale behind it.
        end_chain(map, off + span);
        let crc = copy_with_checksum(&mut map[start..start + payload.len()], payload);
        // Header last: a record is complete once its header is there.
        write_record_header(
            &mut map[off..off + RECORD_HEADER],
            &header,
            payload.len() as u64,
            crc,
        );
        seg.used += span;
        seg.live += 1;
        self.ready = self.ready.saturating_sub(span);
        self.bytes_logged += payload.len() as u64;
        if span < STREAM_FROM {
            // The next record likely comes soon and about as long: ask for
            // its lines now, so that its copy does not wait for memory
            // (back-to-back sends leave no idle moment for `warm_up`).
            seg.warm_until = warm_lines(
                map,
                seg.used,
                seg.warm_until,
                seg.used + span,
                seg.populated,
            );
        }
        self.index.queue(header.dest, header.context).push(Entry {
            seq: header.seq,
            segment: idx,
            offset: off,
        });
        let location = Location {
            segment: idx,
            offset: start as u64,
            len: payload.len() as u64,
        };
        Ok((location, &map[start..start + payload.len()]))
    }
}
