//! The event loggers of a simulated job, in memory.
//!
//! Each rank's events get ids 1, 2, 3, … as in the real loggers. An event
//! is durable only once the scheduler's `SimLoggers::tick` says so, at a
//! moment drawn from the seed: that is the loggers' latency. A rank waiting
//! for durability hands the baton on until it comes.

use std::sync::{Arc, Mutex, MutexGuard};

use vpml_event_logger::{ClientError, Event, EventId};
use vpml_vprotocol::event_log::EventLog;

use crate::check::Checker;
use crate::sched::Sched;

#[derive(Default)]
struct RankEvents {
    /// Events not yet truncated, oldest first.
    events: Vec<(EventId, Event)>,
    last: EventId,
    durable: EventId,
    copy: Option<(u64, Vec<u8>)>,
}

/// Every rank's logged events.
pub(crate) struct SimLoggers {
    ranks: Mutex<Vec<RankEvents>>,
}

impl SimLoggers {
    pub(crate) fn new(ranks: usize) -> SimLoggers {
        SimLoggers {
            ranks: Mutex::new((0..ranks).map(|_| RankEvents::default()).collect()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<RankEvents>> {
        self.ranks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Highest id rank `rank` put.
    pub(crate) fn last_id(&self, rank: usize) -> EventId {
        self.lock()[rank].last
    }

    /// Highest id of rank `rank` that is durable.
    pub(crate) fn durable(&self, rank: usize) -> EventId {
        self.lock()[rank].durable
    }

    /// A hand-over: about half the time, some rank's pending events become
    /// durable, up to an id drawn from the seed.
    pub(crate) fn tick(&self, rng: &mut fastrand::Rng) {
        let mut ranks = self.lock();
        if !rng.bool() {
            return;
        }
        let pending: Vec<usize> = (0..ranks.len())
            .filter(|&r| ranks[r].durable < ranks[r].last)
            .collect();
        if pending.is_empty() {
            return;
        }
        let r = &mut ranks[pending[rng.usize(..pending.len())]];
        r.durable = rng.u64(r.durable + 1..=r.last);
    }
}

impl SimLoggers {
    /// Rank `rank`'s process crashed: of its events not yet durable, the
    /// loggers got a prefix (drawn from the seed) and the rest died with
    /// the process. Returns how many survived.
    pub(crate) fn crash(&self, rank: usize, rng: &mut fastrand::Rng) -> u64 {
        let mut ranks = self.lock();
        let r = &mut ranks[rank];
        let cut = rng.u64(r.durable..=r.last);
        r.events.retain(|(id, _)| *id <= cut);
        let survived = cut - r.durable;
        r.durable = cut;
        r.last = cut;
        survived
    }
}

/// How a rank's client treats durability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acknowledge {
    /// As the real client: `wait_all_durable` returns once the loggers
    /// hold every event.
    WhenDurable,
    /// A broken client that reports events durable at once (to show that
    /// the simulator catches a broken commit rule).
    AtOnce,
}

/// One rank's view of the simulated loggers (its protocol's [`EventLog`]).
pub(crate) struct SimClient {
    pub(crate) rank: usize,
    pub(crate) loggers: Arc<SimLoggers>,
    pub(crate) sched: Arc<Sched>,
    pub(crate) checker: Arc<Checker>,
    pub(crate) acknowledge: Acknowledge,
}

impl EventLog for SimClient {
    fn put(&self, event: &Event) -> Result<EventId, ClientError> {
        let mut ranks = self.loggers.lock();
        let r = &mut ranks[self.rank];
        r.last += 1;
        let id = r.last;
        r.events.push((id, event.clone()));
        Ok(id)
    }

    fn last_id(&self) -> EventId {
        self.loggers.last_id(self.rank)
    }

    fn durable(&self) -> EventId {
        match self.acknowledge {
            Acknowledge::WhenDurable => self.loggers.durable(self.rank),
            Acknowledge::AtOnce => self.loggers.last_id(self.rank),
        }
    }

    fn wait_all_durable(&self) -> Result<(), ClientError> {
        if self.acknowledge == Acknowledge::WhenDurable {
            while self.loggers.durable(self.rank) < self.loggers.last_id(self.rank) {
                self.sched.yield_now(self.rank);
            }
        }
        self.checker.committed(self.rank);
        Ok(())
    }

    fn get_events(&self, from: EventId) -> Result<Vec<(EventId, Event)>, ClientError> {
        let ranks = self.loggers.lock();
        let r = &ranks[self.rank];
        // Only durable events survive a logger: a restarted rank sees those.
        Ok(r.events
            .iter()
            .filter(|(id, _)| *id >= from && *id <= r.durable)
            .cloned()
            .collect())
    }

    fn truncate(&self, up_to: EventId) -> Result<(), ClientError> {
        let mut ranks = self.loggers.lock();
        let r = &mut ranks[self.rank];
        if up_to > r.durable {
            return Err(ClientError::Usage(format!(
                "truncate up to {up_to}, beyond the durable {}",
                r.durable
            )));
        }
        r.events.retain(|(id, _)| *id > up_to);
        Ok(())
    }

    fn save_copy(&self, index: u64, bytes: &[u8]) -> Result<(), ClientError> {
        self.loggers.lock()[self.rank].copy = Some((index, bytes.to_vec()));
        Ok(())
    }

    fn load_copy(&self, rank: u32) -> Result<Option<(u64, Vec<u8>)>, ClientError> {
        Ok(self
            .loggers
            .lock()
            .get(rank as usize)
            .and_then(|r| r.copy.clone()))
    }
}
