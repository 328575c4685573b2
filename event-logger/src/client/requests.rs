//! Request–reply calls on the replicas: reading events back, truncating,
//! checkpoint copies and counters.

use std::time::Instant;

use super::connection::{mark_down, write_frame};
use super::{Client, ClientError, Pending, Reply, lock, status, usable, wait};
use crate::event::{Event, EventBatch, EventId};
use crate::wire::{Message, Stats, encode_frame};

impl Client {
    /// The stored events with ids ≥ `from`, in order, read from the replica
    /// holding the most events.
    pub fn get_events(&self, from: EventId) -> Result<Vec<(EventId, Event)>, ClientError> {
        let rep = {
            let st = lock(&self.shared.st);
            let mut best = 0;
            for (i, r) in st.reps.iter().enumerate() {
                if r.acked > st.reps[best].acked {
                    best = i;
                }
            }
            best
        };
        Ok(self.get_from(rep, from)?.events())
    }

    pub(super) fn get_from(&self, rep: usize, from: EventId) -> Result<EventBatch, ClientError> {
        let rank = self.shared.cfg.rank;
        match self.request(rep, "get events", |req| Message::Get { req, rank, from })? {
            Reply::Events(b) => Ok(b),
            _ => Err(self.unexpected(rep)),
        }
    }

    /// Lets every replica forget the events up to `up_to` (which must be
    /// durable), reclaiming whole segment files; returns the files and bytes
    /// reclaimed over all replicas.
    pub fn truncate(&self, up_to: EventId) -> Result<(u32, u64), ClientError> {
        let durable = self.durable();
        if up_to > durable {
            return Err(ClientError::Usage(format!(
                "cannot truncate up to event {up_to}: only events up to {durable} are durable"
            )));
        }
        let rank = self.shared.cfg.rank;
        let mut total = (0, 0);
        for rep in 0..self.shared.addrs.len() {
            match self.request(rep, "truncate", |req| Message::Truncate {
                req,
                rank,
                up_to,
            })? {
                Reply::Truncated(files, bytes) => {
                    total.0 += files;
                    total.1 += bytes;
                }
                _ => return Err(self.unexpected(rep)),
            }
        }
        Ok(total)
    }

    /// Store `bytes` on every replica as the off-host copy of this rank's
    /// checkpoint `index` (each keeps the newest two), for a restart on
    /// another host after this one is lost.
    pub fn save_copy(&self, index: u64, bytes: &[u8]) -> Result<(), ClientError> {
        let parts: Vec<&[u8]> = if bytes.is_empty() {
            vec![bytes]
        } else {
            bytes.chunks(crate::copies::PART_BYTES).collect()
        };
        for rep in 0..self.shared.addrs.len() {
            let mut offset = 0u64;
            for (i, part) in parts.iter().enumerate() {
                let last = i + 1 == parts.len();
                let reply =
                    self.request(rep, "save a checkpoint copy", |req| Message::SaveCopy {
                        req,
                        index,
                        offset,
                        last,
                        bytes: part.to_vec(),
                    })?;
                if !matches!(reply, Reply::CopySaved) {
                    return Err(self.unexpected(rep));
                }
                offset += part.len() as u64;
            }
        }
        Ok(())
    }

    /// The newest checkpoint copy of `rank` (of this job) that a replica of
    /// this client holds: `(index, bytes)`, or `None` if none holds one.
    pub fn load_copy(&self, rank: u32) -> Result<Option<(u64, Vec<u8>)>, ClientError> {
        let mut newest: Option<(usize, u64)> = None;
        for rep in 0..self.shared.addrs.len() {
            if let (index, ..) = self.copy_part(rep, rank, 0, 0)?
                && index > newest.map_or(0, |(_, i)| i)
            {
                newest = Some((rep, index));
            }
        }
        let Some((rep, index)) = newest else {
            return Ok(None);
        };
        match self.read_copy(rep, rank, index)? {
            Some(bytes) => Ok(Some((index, bytes))),
            None => Err(self.vanished(rep, rank, index)),
        }
    }

    /// Remove this rank's copies numbered above `above` from every
    /// replica (a restart from checkpoint `above` takes their numbers
    /// again). Copies a replaced process is still sending are refused
    /// from the moment this client connected.
    pub fn drop_copies_above(&self, above: u64) -> Result<(), ClientError> {
        for rep in 0..self.shared.addrs.len() {
            let reply = self.request(rep, "drop checkpoint copies", |req| Message::DropCopies {
                req,
                above,
            })?;
            if !matches!(reply, Reply::CopySaved) {
                return Err(self.unexpected(rep));
            }
        }
        Ok(())
    }

    /// Copy `index` of `rank`'s checkpoint that `accept` takes, from the
    /// first replica that holds one; `Ok(None)` if none does. A replica
    /// that fails to answer, or whose copy `accept` refuses (saying why),
    /// is passed over while another may hold a good one; if none does,
    /// the reasons are the error.
    pub fn load_copy_at(
        &self,
        rank: u32,
        index: u64,
        accept: impl Fn(&[u8]) -> Result<(), String>,
    ) -> Result<Option<Vec<u8>>, String> {
        let mut why = Vec::new();
        for rep in 0..self.shared.addrs.len() {
            let addr = self.shared.addrs[rep];
            match self.read_copy(rep, rank, index) {
                Ok(Some(bytes)) => match accept(&bytes) {
                    Ok(()) => return Ok(Some(bytes)),
                    Err(e) => why.push(format!("the copy on {addr}: {e}")),
                },
                Ok(None) => {}
                Err(e) => why.push(e.to_string()),
            }
        }
        if why.is_empty() {
            Ok(None)
        } else {
            Err(why.join("; "))
        }
    }

    /// The whole of copy `index` (not 0) of `rank` from replica `rep`;
    /// `None` if it holds none.
    fn read_copy(&self, rep: usize, rank: u32, index: u64) -> Result<Option<Vec<u8>>, ClientError> {
        let mut bytes = Vec::new();
        loop {
            let (got, total, part) = self.copy_part(rep, rank, index, bytes.len() as u64)?;
            if bytes.is_empty() && got == 0 {
                return Ok(None);
            }
            if got != index || part.is_empty() && (bytes.len() as u64) < total {
                return Err(self.vanished(rep, rank, index));
            }
            bytes.extend_from_slice(&part);
            if bytes.len() as u64 >= total {
                return Ok(Some(bytes));
            }
        }
    }

    fn vanished(&self, rep: usize, rank: u32, index: u64) -> ClientError {
        ClientError::Protocol {
            addr: self.shared.addrs[rep],
            why: format!("checkpoint copy {index} of rank {rank} vanished while read"),
        }
    }

    /// One part of a checkpoint copy: (index, total, bytes).
    fn copy_part(
        &self,
        rep: usize,
        rank: u32,
        index: u64,
        offset: u64,
    ) -> Result<(u64, u64, Vec<u8>), ClientError> {
        match self.request(rep, "load a checkpoint copy", |req| Message::LoadCopy {
            req,
            rank,
            index,
            offset,
        })? {
            Reply::CopyData(index, total, at, bytes) if at == offset => Ok((index, total, bytes)),
            _ => Err(self.unexpected(rep)),
        }
    }

    /// Counters of every replica, in replica order.
    pub fn stats(&self) -> Result<Vec<Stats>, ClientError> {
        (0..self.shared.addrs.len())
            .map(
                |rep| match self.request(rep, "stats", |req| Message::Stats { req })? {
                    Reply::Stats(s) => Ok(s),
                    _ => Err(self.unexpected(rep)),
                },
            )
            .collect()
    }

    fn unexpected(&self, rep: usize) -> ClientError {
        ClientError::Protocol {
            addr: self.shared.addrs[rep],
            why: "reply of the wrong kind".into(),
        }
    }

    /// Sends a request to replica `rep` (retrying across reconnects) and
    /// waits for its reply.
    fn request(
        &self,
        rep: usize,
        what: &'static str,
        msg: impl Fn(u64) -> Message,
    ) -> Result<Reply, ClientError> {
        let sh = &*self.shared;
        let started = Instant::now();
        let timeout = sh.cfg.timeout;
        let mut st = lock(&sh.st);
        loop {
            usable(&st)?;
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(ClientError::RequestTimeout {
                    what,
                    waited,
                    status: status(sh, &st),
                });
            }
            if !st.reps[rep].up {
                st = wait(sh, st, timeout - waited);
                continue;
            }
            let generation = st.reps[rep].generation;
            let req = st.next_req;
            st.next_req += 1;
            st.requests.insert(
                req,
                Pending {
                    rep,
                    partial: EventBatch::new(),
                    outcome: None,
                },
            );
            drop(st);
            let mut frame = Vec::new();
            encode_frame(&msg(req), &mut frame);
            let sent = write_frame(sh, rep, generation, &frame);
            st = lock(&sh.st);
            if let Err(e) = sent {
                st.requests.remove(&req);
                mark_down(sh, &mut st, rep, generation, format!("write failed: {e}"));
                continue;
            }
            loop {
                let outcome = st.requests.get_mut(&req).and_then(|p| p.outcome.take());
                match outcome {
                    Some(Ok(reply)) => {
                        st.requests.remove(&req);
                        return Ok(reply);
                    }
                    // The connection was lost: ask again once it is back.
                    Some(Err(ClientError::Closed)) if !st.closing => {
                        st.requests.remove(&req);
                        break;
                    }
                    Some(Err(e)) => {
                        st.requests.remove(&req);
                        return Err(e);
                    }
                    None => {}
                }
                let waited = started.elapsed();
                if st.fatal.is_some() || st.closing || waited >= timeout {
                    st.requests.remove(&req);
                    break;
                }
                st = wait(sh, st, timeout - waited);
            }
        }
    }
}
