//! The rules of DESIGN.md, checked while a simulated job runs.
//!
//! * **Commit rule.** When the first frame of an application message
//!   leaves a rank, every event that rank created before the message was
//!   sent is durable on the loggers: those put before the send call
//!   started, those the call put before the protocol committed (matches
//!   made earlier, a lazily logged run of failed tests), and — for a frame
//!   that leaves inside its call before any commit — everything put so
//!   far.
//! * **Re-execution is exact.** A restarted process sends, as each
//!   message, the bytes its earlier process sent as that message (the
//!   bytes hash everything the program observed before).
//! * **The bytes that left arrive.** Every message received is, byte for
//!   byte, one that left its sender as that message (first send or a
//!   re-send from the sender log).
//! * **Exactly once, in channel order.** Each receiver gets every message
//!   of each sender once, numbered 1, 2, 3, … as the sender numbered them
//!   (checked by the program, which knows what it sent).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::loggers::SimLoggers;
use crate::sched::Sched;

#[derive(Default)]
struct Sends {
    /// (from, to, seq) → events the sender had put when the send call began.
    required: BTreeMap<(usize, usize, u64), u64>,
    /// The message whose send call each rank is inside, if any, and
    /// whether the protocol committed (waited for its events) in it yet.
    in_call: BTreeMap<usize, ((usize, u64), bool)>,
    /// (from, to, seq) → digest of the bytes of the latest send call of
    /// that message.
    called: BTreeMap<(usize, usize, u64), u64>,
    /// (from, to, seq) → digest of the bytes that left as that message
    /// (a send that never left — its process crashed first — binds no
    /// re-execution: the events it followed may have died with it).
    left: BTreeMap<(usize, usize, u64), u64>,
}

/// Watches every frame of a simulated job.
pub(crate) struct Checker {
    sends: Mutex<Sends>,
    loggers: Arc<SimLoggers>,
    sched: Arc<Sched>,
}

impl Checker {
    pub(crate) fn new(loggers: Arc<SimLoggers>, sched: Arc<Sched>) -> Checker {
        Checker {
            sends: Mutex::default(),
            loggers,
            sched,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Sends> {
        self.sends.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rank `from` begins the send call of its message `seq` to `to`,
    /// whose bytes hash to `digest`. A re-executing process must send the
    /// bytes its previous process sent. (Stricter than the protocol, which
    /// lets go of a message no settled peer took — see `vprotocol`'s
    /// `previous_sends` — for programs whose choices past their last
    /// logged event rest on timing; the simulator's programs make none,
    /// so their re-executions send every message alike.)
    pub(crate) fn send_begins(&self, from: usize, to: usize, seq: u64, digest: u64) {
        let put = self.loggers.last_id(from);
        let mut s = self.lock();
        s.required.insert((from, to, seq), put);
        s.in_call.insert(from, ((to, seq), false));
        s.called.insert((from, to, seq), digest);
        if s.left.get(&(from, to, seq)).is_some_and(|&d| d != digest) {
            drop(s);
            self.sched.stop(format!(
                "re-execution diverged silently: rank {from} sent other bytes as message {seq} to rank {to} than its earlier process did"
            ));
        }
    }

    /// Rank `rank`'s protocol waited until its events were durable (the
    /// commit before a send): inside a send call, every event put so far
    /// precedes that message (the matches made before the call, a run of
    /// failed tests flushed for it).
    pub(crate) fn committed(&self, rank: usize) {
        let put = self.loggers.last_id(rank);
        let mut s = self.lock();
        if let Some(((to, seq), done)) = s.in_call.get_mut(&rank) {
            *done = true;
            let key = (rank, *to, *seq);
            let r = s.required.entry(key).or_insert(0);
            *r = (*r).max(put);
        }
    }

    /// Rank `to` received message `seq` from `from`, whose bytes hash to
    /// `digest`: they must be the bytes that left as that message.
    pub(crate) fn received(&self, from: usize, to: usize, seq: u64, digest: u64) {
        let s = self.lock();
        let why = match s.left.get(&(from, to, seq)) {
            Some(&d) if d == digest => return,
            Some(_) => format!(
                "rank {to} received other bytes as message {seq} from rank {from} than left it"
            ),
            None => {
                format!("rank {to} received message {seq} from rank {from}, which never left it")
            }
        };
        drop(s);
        self.sched.stop(why);
    }

    /// Rank `from`'s send call returned (or its process crashed).
    pub(crate) fn send_ends(&self, from: usize) {
        self.lock().in_call.remove(&from);
    }

    /// The first frame of message `seq` leaves `from` for `to`.
    pub(crate) fn message_leaves(&self, from: usize, to: usize, seq: u64) {
        let durable = self.loggers.durable(from);
        let need = {
            let mut s = self.lock();
            if let Some(&d) = s.called.get(&(from, to, seq)) {
                s.left.entry((from, to, seq)).or_insert(d);
            }
            let required = s.required.get(&(from, to, seq)).copied().unwrap_or(0);
            match s.in_call.get(&from) {
                // Leaving inside its own call before any commit: nothing
                // put so far may be pending (a send that skipped the
                // protocol must have had nothing to wait for). Strict:
                // an event put by progress while a send waits for room
                // counts too — the programs never receive while sending.
                Some(&(m, false)) if m == (to, seq) => required.max(self.loggers.last_id(from)),
                _ => required,
            }
        };
        if durable < need {
            self.sched.stop(format!(
                "commit rule broken: rank {from} sent message {seq} to rank {to} while its events up to {need} were not all durable (durable: {durable})"
            ));
        }
    }
}
