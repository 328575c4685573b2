//! Putting events: numbering and queueing them, sending them to each
//! replica (batching what queued meanwhile), and tracking which are durable.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::connection::{mark_down, write_frame};
use super::{Chunk, Client, ClientError, Shared, State, lock, status, usable, wait};
use crate::event::{Event, EventBatch, EventId};
use crate::server::MAX_PUT_EVENT_BYTES;
use crate::wire::encode_put_raw;

#[cfg(doc)]
use super::ClientConfig;

impl Client {
    /// Queues one event and returns its id. See [`Client::put_batch`].
    pub fn put(&self, event: &Event) -> Result<EventId, ClientError> {
        self.put_batch(std::slice::from_ref(event))
    }

    /// Queues events, numbers them consecutively and starts sending them;
    /// returns the id of the last one (the current last id if `events` is
    /// empty). Does not wait for acknowledgement, only for room when too
    /// many events are in flight.
    pub fn put_batch(&self, events: &[Event]) -> Result<EventId, ClientError> {
        let sh = &*self.shared;
        for e in events {
            if e.encoded_len() > sh.cfg.max_batch_bytes.min(MAX_PUT_EVENT_BYTES) {
                return Err(ClientError::Usage(format!(
                    "an event of {} bytes exceeds the put size limit",
                    e.encoded_len()
                )));
            }
        }
        let started = Instant::now();
        let mut st = lock(&sh.st);
        loop {
            usable(&st)?;
            if st.queued_events == 0 || st.queued_events + events.len() <= sh.cfg.max_pending_events
            {
                break;
            }
            let waited = started.elapsed();
            if waited >= sh.cfg.timeout {
                let durable = sh.durable.load(Ordering::Acquire);
                return Err(ClientError::Timeout {
                    id: durable + 1,
                    durable,
                    waited,
                    status: status(sh, &st),
                });
            }
            st = wait(sh, st, sh.cfg.timeout - waited);
        }
        for e in events {
            let id = st.last_id + 1;
            push_event(&mut st, sh.cfg.max_batch_bytes, id, e);
        }
        let last = st.last_id;
        // Send now only to replicas with nothing in flight; the others get
        // these events, batched with later ones, when their ack arrives
        // (or at once when someone waits for them).
        let idle: Vec<usize> = if sh.cfg.send_eagerly {
            (0..st.reps.len())
                .filter(|&r| st.reps[r].acked >= st.reps[r].sent)
                .collect()
        } else {
            Vec::new()
        };
        drop(st);
        for r in idle {
            pump(sh, r);
        }
        Ok(last)
    }

    /// Id of the last event queued (0 if none).
    pub fn last_id(&self) -> EventId {
        lock(&self.shared.st).last_id
    }

    /// Highest durable id: acknowledged by every replica (by every replica
    /// that is up, with [`ClientConfig::survivors_acknowledge`]).
    pub fn durable(&self) -> EventId {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// Blocks until event `id` (and so every earlier one) is durable (see
    /// [`Client::durable`]), for at most the configured time-out.
    pub fn wait_durable(&self, id: EventId) -> Result<(), ClientError> {
        self.wait_durable_timeout(id, self.shared.cfg.timeout)
    }

    /// Blocks until every event queued so far is durable — the commit rule
    /// before a send. Returns at once when nothing is pending.
    pub fn wait_all_durable(&self) -> Result<(), ClientError> {
        let last = self.last_id();
        self.wait_durable(last)
    }

    /// [`Client::wait_durable`] with an explicit limit.
    pub fn wait_durable_timeout(&self, id: EventId, timeout: Duration) -> Result<(), ClientError> {
        let sh = &*self.shared;
        if sh.durable.load(Ordering::Acquire) >= id {
            return Ok(());
        }
        // Send whatever is still queued instead of waiting for an ack to
        // carry it out.
        for r in 0..sh.addrs.len() {
            pump(sh, r);
        }
        // The acknowledgement usually arrives within a loopback round trip:
        // a short spin avoids sleeping and being woken for it.
        let spin_until = Instant::now() + Duration::from_micros(50);
        while Instant::now() < spin_until {
            if sh.durable.load(Ordering::Acquire) >= id {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        let started = Instant::now();
        let mut st = lock(&sh.st);
        if id > st.last_id {
            return Err(ClientError::Usage(format!(
                "event {id} was never put (last id is {})",
                st.last_id
            )));
        }
        loop {
            let durable = sh.durable.load(Ordering::Acquire);
            if durable >= id {
                return Ok(());
            }
            usable(&st)?;
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(ClientError::Timeout {
                    id,
                    durable,
                    waited,
                    status: status(sh, &st),
                });
            }
            st = wait(sh, st, timeout - waited);
        }
    }
}

/// Appends one event to the queue, numbering it `id` (= last id + 1).
pub(super) fn push_event(st: &mut State, max_batch: usize, id: EventId, e: &Event) {
    st.last_id = id;
    st.queued_events += 1;
    // Extend the last chunk while no replica has started sending it.
    let max_sent = st.reps.iter().map(|r| r.sent).max().unwrap_or(0);
    if let Some(c) = st.queue.back_mut()
        && c.first > max_sent
        && c.bytes.len() + e.encoded_len() <= max_batch
        && c.count < u32::MAX
    {
        e.encode(id, &mut c.bytes);
        c.count += 1;
        return;
    }
    let mut bytes = Vec::with_capacity(e.encoded_len());
    e.encode(id, &mut bytes);
    st.queue.push_back(Chunk {
        first: id,
        count: 1,
        bytes,
    });
}

/// Sends replica `rep` every queued event it has not been sent, unless
/// another thread is already doing so (that thread will send ours too).
pub(super) fn pump(sh: &Shared, rep: usize) {
    let mut st = lock(&sh.st);
    if st.reps[rep].writing {
        return;
    }
    st.reps[rep].writing = true;
    let mut frame = Vec::new();
    loop {
        let r = &st.reps[rep];
        if !r.up || st.fatal.is_some() {
            break;
        }
        let (generation, sent) = (r.generation, r.sent);
        let start = st.queue.partition_point(|c| c.last() <= sent);
        let mut parts: Vec<&[u8]> = Vec::new();
        let (mut count, mut bytes, mut last) = (0u32, 0usize, sent);
        for c in st.queue.range(start..) {
            let part: &[u8] = if c.first <= sent {
                // Resending after a reconnect from the middle of a chunk.
                let b = EventBatch::parse(c.count, &c.bytes).unwrap_or_default();
                let (n, s) = b.suffix_from(sent + 1);
                let off = c.bytes.len() - s.len();
                count += n;
                &c.bytes[off..]
            } else {
                if count > 0 && bytes + c.bytes.len() > sh.cfg.max_batch_bytes {
                    break;
                }
                count += c.count;
                &c.bytes
            };
            bytes += part.len();
            last = c.last();
            parts.push(part);
        }
        if count == 0 {
            break;
        }
        frame.clear();
        encode_put_raw(sh.cfg.rank, count, &parts, &mut frame);
        st.reps[rep].sent = last;
        drop(st);
        let result = write_frame(sh, rep, generation, &frame);
        st = lock(&sh.st);
        if let Err(e) = result {
            mark_down(sh, &mut st, rep, generation, format!("write failed: {e}"));
        }
    }
    st.reps[rep].writing = false;
}

/// Recomputes the durable id and drops the events every replica holds.
///
/// With [`ClientConfig::survivors_acknowledge`], an event is durable once
/// every replica that is up acknowledged it: while a logger is down (and
/// restarted), the survivors acknowledge; with none up, nothing becomes
/// durable. The queue keeps what any replica lacks, to send it again when
/// that replica is back.
pub(super) fn advance(sh: &Shared, st: &mut State) {
    let survivors = sh.cfg.survivors_acknowledge;
    let durable = st
        .reps
        .iter()
        .filter(|r| r.up || !survivors)
        .map(|r| r.acked)
        .min()
        .unwrap_or(0)
        .min(st.last_id);
    if durable > sh.durable.load(Ordering::Relaxed) {
        sh.durable.store(durable, Ordering::Release);
    }
    let held_by_all = st.reps.iter().map(|r| r.acked).min().unwrap_or(0);
    while let Some(c) = st.queue.front() {
        if c.last() > held_by_all {
            break;
        }
        st.queued_events -= c.count as usize;
        st.queue.pop_front();
    }
}
