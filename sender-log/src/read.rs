//! Reading kept records back: by destination and sequence number.

use crate::SenderLog;
use crate::format::{Location, Record, SEGMENT_HEADER, decode_record, record_span};
use crate::index::{DiskRun, Entry};

impl SenderLog {
    /// The record at `offset` of segment `segment` (mapping it first if it
    /// is on disk).
    fn record_at(&self, segment: u64, offset: usize) -> Option<Record<'_>> {
        let seg = self.segments.get(&segment)?;
        let bytes = seg.bytes().ok()?;
        let (header, start, len) = decode_record(bytes, offset).ok()??;
        Some(Record {
            header,
            payload: &bytes[start..start + len],
            location: Location {
                segment,
                offset: start as u64,
                len: len as u64,
            },
        })
    }

    fn record(&self, e: &Entry) -> Option<Record<'_>> {
        self.record_at(e.segment, e.offset)
    }

    /// The records of `run` to `dest` from sequence number `from` on, read
    /// from its segment on disk in order.
    fn run_records(&self, dest: u32, run: DiskRun, from: u64) -> impl Iterator<Item = Record<'_>> {
        let mut offset = SEGMENT_HEADER;
        std::iter::from_fn(move || {
            loop {
                let r = self.record_at(run.segment, offset)?;
                offset += record_span(r.payload.len());
                let h = r.header;
                if h.dest == dest && h.seq >= from.max(run.first) && h.seq <= run.last {
                    return Some(r);
                }
                if h.dest == dest && h.seq > run.last {
                    return None;
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

    /// The record of message `seq` to `dest`, if logged and not freed.
    pub fn get(&self, dest: u32, seq: u64) -> Option<Record<'_>> {
        let q = self.index.get(dest)?;
        if let Some(run) = q.disk_run_of(seq) {
            return self.run_records(dest, *run, seq).next();
        }
        self.record(q.entry_of(seq)?)
    }

    /// Every kept record to `dest` with a sequence number ≥ `from`, in order.
    pub fn iter_from(&self, dest: u32, from: u64) -> impl Iterator<Item = Record<'_>> + '_ {
        let q = self.index.get(dest);
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
            .flat_map(move |run| self.run_records(dest, run, from));
        let in_memory = q
            .into_iter()
            .flat_map(move |q| q.entries.iter().skip(start))
            .filter_map(|e| self.record(e));
        on_disk.chain(in_memory)
    }

    /// Number of kept records to `dest`.
    pub fn records_to(&self, dest: u32) -> usize {
        self.index.get(dest).map_or(0, |q| q.len())
    }

    /// Destinations with at least one kept record.
    pub fn destinations(&self) -> Vec<u32> {
        let mut d: Vec<u32> = self
            .index
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(d, _)| d)
            .collect();
        d.sort_unstable();
        d
    }
}
