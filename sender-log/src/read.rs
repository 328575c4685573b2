//! Reading kept records back: by destination and sequence number.

use std::collections::VecDeque;

use crate::SenderLog;
use crate::format::{Location, Record, decode_record};
use crate::index::Entry;

impl SenderLog {
    fn record(&self, e: &Entry) -> Option<Record<'_>> {
        let seg = self.segments.get(&e.segment)?;
        let (header, start, len) = decode_record(seg.map.bytes(), e.offset).ok()??;
        Some(Record {
            header,
            payload: &seg.map.bytes()[start..start + len],
            location: Location {
                segment: e.segment,
                offset: start as u64,
                len: len as u64,
            },
        })
    }

    /// The payload bytes at `loc` (as returned by [`SenderLog::append`]),
    /// without re-validating them.
    pub fn payload(&self, loc: &Location) -> Option<&[u8]> {
        let seg = self.segments.get(&loc.segment)?;
        let start = usize::try_from(loc.offset).ok()?;
        let end = start.checked_add(usize::try_from(loc.len).ok()?)?;
        seg.map.bytes().get(start..end)
    }

    /// The record of message `seq` to `dest`, if logged and not freed.
    pub fn get(&self, dest: u32, seq: u64) -> Option<Record<'_>> {
        let q = self.index.get(dest)?;
        let i = q.binary_search_by_key(&seq, |e| e.seq).ok()?;
        self.record(&q[i])
    }

    /// Every kept record to `dest` with a sequence number ≥ `from`, in order.
    pub fn iter_from(&self, dest: u32, from: u64) -> impl Iterator<Item = Record<'_>> + '_ {
        let q = self.index.get(dest);
        let start = q.map_or(0, |q| q.partition_point(|e| e.seq < from));
        q.into_iter()
            .flat_map(move |q| q.iter().skip(start))
            .filter_map(|e| self.record(e))
    }

    /// Number of kept records to `dest`.
    pub fn records_to(&self, dest: u32) -> usize {
        self.index.get(dest).map_or(0, VecDeque::len)
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
