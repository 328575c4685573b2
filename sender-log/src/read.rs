//! Reading kept records back: by destination, context and sequence number.
//!
//! A record that cannot be read back — its segment on disk cannot be
//! mapped, or its bytes fail their checks — is an error naming the file and
//! offset, never a record silently missing: a peer restarted from it would
//! be short of a message.

use crate::SenderLog;
use crate::error::{Error, Result, io};
use crate::format::{Location, Record, SEGMENT_HEADER, decode_record, record_span};
use crate::index::{DiskRun, Entry};

impl SenderLog {
    /// The record at `offset` of segment `segment` (mapping it first if it
    /// is on disk); `None` at the end of its records.
    fn record_at(&self, segment: u64, offset: usize) -> Result<Option<Record<'_>>> {
        let seg = self.segments.get(&segment).ok_or_else(|| Error::Corrupt {
            path: self.dir.clone(),
            reason: format!("segment {segment} of an indexed record is gone"),
        })?;
        let bytes = seg.bytes().map_err(io(&seg.path, "mapping a segment"))?;
        let decoded = decode_record(bytes, offset).map_err(|reason| Error::Corrupt {
            path: seg.path.clone(),
            reason,
        })?;
        Ok(decoded.map(|(header, start, len)| Record {
            header,
            payload: &bytes[start..start + len],
            location: Location {
                segment,
                offset: start as u64,
                len: len as u64,
            },
        }))
    }

    fn record(&self, e: &Entry) -> Result<Record<'_>> {
        self.record_at(e.segment, e.offset)?
            .ok_or_else(|| self.missing(e.segment, e.offset))
    }

    fn missing(&self, segment: u64, offset: usize) -> Error {
        Error::Corrupt {
            path: self
                .segments
                .get(&segment)
                .map_or_else(|| self.dir.clone(), |s| s.path.clone()),
            reason: format!("no record at offset {offset}, where the index has one"),
        }
    }

    /// The records of `run` to `dest` on `context` from sequence number
    /// `from` on, read from its segment on disk in order; an error if one
    /// is missing.
    fn run_records(
        &self,
        dest: u32,
        context: u32,
        run: DiskRun,
        from: u64,
    ) -> impl Iterator<Item = Result<Record<'_>>> {
        let mut offset = SEGMENT_HEADER;
        let mut next = from.max(run.first);
        std::iter::from_fn(move || {
            if next > run.last {
                return None;
            }
            loop {
                let r = match self.record_at(run.segment, offset) {
                    Ok(Some(r)) => r,
                    Ok(None) => {
                        next = run.last + 1;
                        return Some(Err(self.missing(run.segment, offset)));
                    }
                    Err(e) => {
                        next = run.last + 1;
                        return Some(Err(e));
                    }
                };
                offset += record_span(r.payload.len());
                if r.header.dest == dest && r.header.context == context && r.header.seq == next {
                    next += 1;
                    return Some(Ok(r));
                }
            }
        })
    }

    /// The payload bytes at `loc` (as returned by [`SenderLog::append`]),
    /// without re-validating them.
    pub fn payload(&self, loc: &Location) -> Option<&[u8]> {
        let seg = self.segments.get(&loc.segment)?;
        let start = usize::try_from(loc.offset).ok()?;
        let end = start.checked_add(usize::try_from(loc.len).ok()?)?;
        seg.bytes().ok()?.get(start..end)
    }

    /// The record of message `seq` to `dest` on `context`: `None` if it
    /// is not kept.
    pub fn get(&self, dest: u32, context: u32, seq: u64) -> Result<Option<Record<'_>>> {
        let Some(q) = self.index.get(dest, context) else {
            return Ok(None);
        };
        if let Some(run) = q.disk_run_of(seq) {
            return self
                .run_records(dest, context, *run, seq)
                .next()
                .transpose();
        }
        q.entry_of(seq).map(|e| self.record(e)).transpose()
    }

    /// Every kept record to `dest` on `context` with a sequence number ≥
    /// `from`, in order (an error for a record that cannot be read back,
    /// after which the iteration should stop).
    pub fn iter_from(
        &self,
        dest: u32,
        context: u32,
        from: u64,
    ) -> impl Iterator<Item = Result<Record<'_>>> + '_ {
        let q = self.index.get(dest, context);
        let runs: Vec<DiskRun> = q
            .map(|q| {
                q.on_disk
                    .iter()
                    .filter(|r| r.last >= from)
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        let start = q.map_or(0, |q| q.entries.partition_point(|e| e.seq < from));
        let on_disk = runs
            .into_iter()
            .flat_map(move |run| self.run_records(dest, context, run, from));
        let in_memory = q
            .into_iter()
            .flat_map(move |q| q.entries.iter().skip(start))
            .map(|e| self.record(e));
        on_disk.chain(in_memory)
    }

    /// Number of kept records to `dest`.
    pub fn records_to(&self, dest: u32) -> usize {
        self.index.streams_to(dest).map(|(_, q)| q.len()).sum()
    }

    /// The contexts of the kept records to `dest`, in order.
    pub fn contexts_to(&self, dest: u32) -> Vec<u32> {
        self.index
            .streams_to(dest)
            .filter(|(_, q)| !q.is_empty())
            .map(|(c, _)| c)
            .collect()
    }

    /// Destinations with at least one kept record.
    pub fn destinations(&self) -> Vec<u32> {
        let mut d: Vec<u32> = self
            .index
            .iter()
            .filter(|(_, _, q)| !q.is_empty())
            .map(|(d, _, _)| d)
            .collect();
        d.dedup();
        d
    }
}
