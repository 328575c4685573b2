//! Coordinated checkpointing (`--protocol coordinated`): the engine's
//! part. Checkpoints are taken at the program's checkpoint calls
//! (`Comm::checkpoint`, `Comm::checkpoint_if_due`), which every rank
//! makes in the same number and where no message crosses between the
//! ranks' calls of the same number (see DESIGN.md, "Coordinated
//! checkpointing"). The calls are numbered 0, 1, 2, … on every rank.
//!
//! * **Agreement.** A rank that wants a checkpoint (an explicit
//!   `checkpoint`, its interval due) *proposes* its next call number to
//!   every peer; a rank that hears a proposal proposes its own next call
//!   at once, from whatever call it is in. The checkpoint is taken at the
//!   largest proposal, which every rank learns before it passes its own
//!   proposal: a rank waits for every proposal at each checkpoint call
//!   from its own on. A rank that finalizes tells the others how many
//!   calls it made (it makes no more): that stands for its proposal.
//! * **Drain** (LAM/MPI's bookmark exchange). At the agreed call each
//!   rank sends every peer, once all its frames have left, how many
//!   messages it sent it per context, then an end marker. Frames of a
//!   pair arrive in order: once a peer's marker is in, every message it
//!   sent before the checkpoint has been received (matched, or waiting
//!   unexpected — then saved with the checkpoint and delivered again
//!   after a restart), and the counts must agree.
//! * **Commit.** Each rank writes its part ([`Protocol::checkpoint`]),
//!   tells every peer, and returns only when every peer has written its
//!   part: a checkpoint counts once every rank has written it, and no
//!   message sent after it can reach a rank that has not yet saved its
//!   state. The launcher restarts every rank from the newest checkpoint
//!   that every rank wrote.
//!
//! [`Protocol::checkpoint`]: crate::protocol::Protocol::checkpoint

use std::time::{Duration, Instant};

use super::{Engine, Link};
use crate::error::{Error, Result};
use crate::lanes::LaneMap;
use crate::shm::ring::{FrameHeader, kind};

/// How long a rank waits at a global checkpoint for its peers before it
/// says so.
const SLOW_PEERS: Duration = Duration::from_secs(10);

/// Where a rank stands in the agreement on global checkpoints.
#[derive(Debug)]
pub(super) struct Coordination {
    /// Checkpoint calls made so far: the number of the next one.
    calls: u64,
    /// Number of the next global checkpoint (1 for the first).
    round: u64,
    /// Each rank's proposal for `round`, this one's included.
    proposals: Vec<Option<u64>>,
    /// Proposals for `round + 1` that came while `round` was being taken.
    early: Vec<Option<u64>>,
    /// Checkpoint calls of each rank that finalized (it makes no more).
    finished: Vec<Option<u64>>,
    /// Bookmarks of the drain under way: per peer, messages sent per
    /// context, and whether its end marker came.
    bookmarks: Vec<LaneMap<u64>>,
    bookmarks_ended: Vec<bool>,
    /// Peers that wrote their part of `round`.
    written: Vec<bool>,
    /// Every link is up: false in a process restarted with every rank
    /// until it is linked to all (a frame sent over a link not yet up is
    /// lost, and nothing is kept to send again).
    linked: bool,
    /// Frames that came before then, acted on once linked (a proposal
    /// is answered with one).
    held: Vec<(usize, FrameHeader)>,
}

impl Coordination {
    /// A rank of `size` starting at the beginning; `linked`: not a
    /// process restarted with every rank (which holds what comes until it
    /// is linked to all).
    pub(super) fn new(size: usize, linked: bool) -> Coordination {
        Coordination {
            calls: 0,
            round: 1,
            proposals: vec![None; size],
            early: vec![None; size],
            finished: vec![None; size],
            bookmarks: vec![LaneMap::new(); size],
            bookmarks_ended: vec![false; size],
            written: vec![false; size],
            linked,
            held: Vec::new(),
        }
    }

    /// A process restarted from global checkpoint `index`, taken at its
    /// checkpoint call number `call`: it resumes after that call.
    pub(super) fn resume_after(&mut self, index: u64, call: u64) -> Result<()> {
        let (Some(round), Some(calls)) = (index.checked_add(1), call.checked_add(1)) else {
            return Err(Error::Unrecoverable(format!(
                "global checkpoint {index} was taken at checkpoint call {call}: out of range"
            )));
        };
        self.round = round;
        self.calls = calls;
        Ok(())
    }

    /// The agreed call of the round, once every rank's proposal is known.
    fn target(&self) -> Option<u64> {
        self.proposals
            .iter()
            .zip(&self.finished)
            .map(|(p, f)| p.or(*f))
            .try_fold(0u64, |m, p| Some(m.max(p?)))
    }
}

fn frame(k: u8, context: u32, seq: u64, aux0: u64) -> FrameHeader {
    let mut hdr = FrameHeader::new(k);
    hdr.context = context;
    hdr.seq = seq;
    hdr.aux0 = aux0;
    hdr
}

impl Engine {
    /// A checkpoint call under coordinated checkpointing (see the module
    /// docs): `explicit` for `checkpoint`, else `checkpoint_if_due` with
    /// its `interval`. `Some(call)` if the global checkpoint is agreed
    /// for this call: take it with [`Engine::take_global_checkpoint`].
    pub(super) fn coordinated_call(
        &mut self,
        explicit: bool,
        interval: Option<Duration>,
    ) -> Result<Option<u64>> {
        self.check_alive()?;
        let me = self.core.rank;
        let Some(co) = self.coordination.as_ref() else {
            return Ok(None);
        };
        let call = co.calls;
        // Asked for from outside, and not yet taken?
        let asked = self
            .recovery
            .as_ref()
            .is_some_and(|r| r.page.checkpoint_requests() > r.page.checkpoint_requests_taken());
        let wanted =
            explicit || asked || interval.is_some_and(|i| self.last_checkpoint.elapsed() >= i);
        if wanted
            && self
                .coordination
                .as_ref()
                .is_some_and(|c| c.proposals[me].is_none())
        {
            self.propose();
        }
        let proposed = self
            .coordination
            .as_ref()
            .is_some_and(|c| c.proposals[me].is_some());
        if proposed {
            let round = self.coordination.as_ref().map_or(0, |c| c.round);
            self.wait_for_peers("propose a call for", round, call, |c, q| {
                c.proposals[q].is_some()
            })?;
            let Some(target) = self.coordination.as_ref().and_then(Coordination::target) else {
                return Err(Error::Unrecoverable(
                    "the ranks' proposals for a global checkpoint went missing".into(),
                ));
            };
            if target < call {
                return Err(Error::Unrecoverable(format!(
                    "global checkpoint agreed at checkpoint call {target}, which this rank passed (it is at call {call})"
                )));
            }
            if target == call {
                return Ok(Some(call));
            }
        }
        if let Some(co) = self.coordination.as_mut() {
            co.calls += 1;
        }
        Ok(None)
    }

    /// Propose this rank's next checkpoint call for the current round.
    fn propose(&mut self) {
        let me = self.core.rank;
        let Some(co) = self.coordination.as_mut() else {
            return;
        };
        if co.proposals[me].is_some() {
            return;
        }
        co.proposals[me] = Some(co.calls);
        tracing::debug!(global = co.round, call = co.calls, "proposed");
        let hdr = frame(kind::COORD_PROPOSE, 0, co.calls, co.round);
        for q in (0..self.size).filter(|&q| q != me) {
            self.core.control_out.push((q, hdr));
        }
        self.flush_control();
    }

    /// Take global checkpoint `round` at checkpoint call `call`: drain,
    /// write, commit.
    pub(super) fn take_global_checkpoint(&mut self, call: u64, app: &[u8]) -> Result<()> {
        let me = self.core.rank;
        let round = self.coordination.as_ref().map_or(0, |c| c.round);
        // The requests from outside this checkpoint answers (it completes
        // after every one of them).
        let requests = self
            .recovery
            .as_ref()
            .map_or(0, |r| r.page.checkpoint_requests());
        // Everything this rank sent before the checkpoint leaves first.
        self.check_no_request_in_flight()?;
        self.wait_own_frames_left()?;
        for q in (0..self.size).filter(|&q| q != me) {
            let counts: Vec<(u32, u64)> = self.send_seq[q].iter().collect();
            for (ctx, n) in counts {
                self.core
                    .control_out
                    .push((q, frame(kind::COORD_BOOKMARK, ctx, n, 0)));
            }
            self.core
                .control_out
                .push((q, frame(kind::COORD_BOOKMARKS_END, 0, 0, round)));
        }
        self.flush_control();
        vpml_fault_points::fault_point!("coordinated.bookmarks_sent");
        self.wait_for_peers("reach", round, call, |c, q| c.bookmarks_ended[q])?;
        self.check_every_peer_reached(call)?;
        let mut snap = self.snapshot()?;
        snap.checkpoint_call = call;
        snap.global_index = round;
        self.hook(|p| p.checkpoint(&snap, app))?;
        vpml_fault_points::fault_point!("coordinated.written");
        let hdr = frame(kind::COORD_WRITTEN, 0, 0, round);
        for q in (0..self.size).filter(|&q| q != me) {
            self.core.control_out.push((q, hdr));
        }
        self.flush_control();
        self.wait_for_peers("write", round, call, |c, q| c.written[q])?;
        self.check_every_peer_reached(call)?;
        vpml_fault_points::fault_point!("coordinated.committed");
        if let Some(rc) = self.recovery.as_ref() {
            rc.page.set_checkpoint_requests_taken(requests);
            rc.page
                .set_global_checkpoint(u32::try_from(round).unwrap_or(u32::MAX));
        }
        let mut next_proposed = false;
        if let Some(co) = self.coordination.as_mut() {
            co.round += 1;
            co.calls = call + 1;
            co.proposals = std::mem::replace(&mut co.early, vec![None; self.size]);
            co.bookmarks = vec![LaneMap::new(); self.size];
            co.bookmarks_ended = vec![false; self.size];
            co.written = vec![false; self.size];
            next_proposed = co.proposals.iter().any(Option::is_some);
        }
        if next_proposed {
            // A peer done first proposed the next one already.
            self.propose();
        }
        self.last_checkpoint = Instant::now();
        Ok(())
    }

    /// Wait until every peer `has` what this stage of global checkpoint
    /// `round` (at checkpoint call `call`) needs of it, or finalized;
    /// say so once if that takes long — the likely cause is a program
    /// that breaks the rule the checkpoint calls must keep.
    fn wait_for_peers(
        &mut self,
        stage: &str,
        round: u64,
        call: u64,
        has: impl Fn(&Coordination, usize) -> bool,
    ) -> Result<()> {
        let me = self.core.rank;
        let start = Instant::now();
        let mut warned = false;
        self.wait_until(|e| {
            let Some(c) = e.coordination.as_ref() else {
                return true;
            };
            let missing: Vec<usize> = (0..e.size)
                .filter(|&q| q != me && !has(c, q) && c.finished[q].is_none())
                .collect();
            if missing.is_empty() {
                return true;
            }
            if !warned && start.elapsed() >= SLOW_PEERS {
                warned = true;
                tracing::warn!(
                    "waiting {} s for rank(s) {missing:?} to {stage} global checkpoint {round} at checkpoint call {call}; if they wait for a message sent after a checkpoint call, they never will (see \"Coordinated checkpointing\" in DESIGN.md)",
                    SLOW_PEERS.as_secs()
                );
            }
            false
        })
    }

    /// A process restarted with every rank (nothing is kept to send
    /// again): wait until its link to every rank is up before it sends,
    /// and say so if that takes long.
    pub(super) fn wait_for_every_link(&mut self) -> Result<()> {
        let start = Instant::now();
        let mut warned = false;
        self.wait_until(|e| {
            let dead = |p: &Option<super::link::Peer>| {
                p.as_ref().is_some_and(|p| matches!(p.link, Link::Dead))
            };
            let expected = e.recovery.as_ref().map_or(0, |r| r.expected);
            if expected == 0 && !e.peers.iter().any(dead) {
                return true;
            }
            if !warned && start.elapsed() >= SLOW_PEERS {
                warned = true;
                let missing: Vec<usize> = (0..e.size).filter(|&q| dead(&e.peers[q])).collect();
                tracing::warn!(
                    "restarted with every rank, still not linked to rank(s) {missing:?} after {} s",
                    SLOW_PEERS.as_secs()
                );
            }
            false
        })?;
        if let Some(co) = self.coordination.as_mut() {
            co.linked = true;
        }
        // What came meanwhile (a proposal to answer).
        self.apply_coordination()
    }

    /// A peer that finalized without its part of the checkpoint at
    /// `call` never will: the ranks' checkpoint calls differ.
    fn check_every_peer_reached(&self, call: u64) -> Result<()> {
        let Some(co) = self.coordination.as_ref() else {
            return Ok(());
        };
        let me = self.core.rank;
        for q in (0..self.size).filter(|&q| q != me) {
            // One that took part wrote its part before it finalized.
            if let Some(n) = co.finished[q]
                && !(co.bookmarks_ended[q] && co.written[q])
            {
                return Err(Error::Unrecoverable(format!(
                    "rank {q} finalized after {n} checkpoint call(s) without its part of global checkpoint {} at call {call}: every rank must make the same checkpoint calls",
                    co.round
                )));
            }
        }
        Ok(())
    }

    /// Act on the coordination frames that came (from progress).
    pub(super) fn apply_coordination(&mut self) -> Result<()> {
        let mut frames = std::mem::take(&mut self.core.coordination_in);
        if let Some(co) = self.coordination.as_mut() {
            if !co.linked {
                co.held.append(&mut frames);
                return Ok(());
            }
            if !co.held.is_empty() {
                frames.splice(0..0, std::mem::take(&mut co.held));
            }
        }
        for (q, hdr) in frames {
            self.apply_coordination_frame(q, &hdr)?;
        }
        Ok(())
    }

    fn apply_coordination_frame(&mut self, q: usize, hdr: &FrameHeader) -> Result<()> {
        tracing::debug!(
            peer = q,
            kind = hdr.kind,
            global = hdr.aux0,
            seq = hdr.seq,
            "coordination frame"
        );
        let corrupt = |reason: String| Error::CorruptFrame { peer: q, reason };
        let Some(co) = self.coordination.as_mut() else {
            return Err(corrupt(
                "a coordinated-checkpoint frame, but this job does not coordinate checkpoints"
                    .into(),
            ));
        };
        let round = co.round;
        let this_round = |what: &str| {
            if hdr.aux0 == round {
                Ok(())
            } else {
                Err(corrupt(format!(
                    "{what} for global checkpoint {}, this rank is at {round}",
                    hdr.aux0
                )))
            }
        };
        match hdr.kind {
            kind::COORD_PROPOSE if hdr.aux0 == round => {
                if co.proposals[q].is_some() {
                    return Err(corrupt(format!(
                        "a second proposal for global checkpoint {round}"
                    )));
                }
                co.proposals[q] = Some(hdr.seq);
                self.propose();
            }
            kind::COORD_PROPOSE if hdr.aux0 == round + 1 => co.early[q] = Some(hdr.seq),
            kind::COORD_PROPOSE => this_round("a proposal")?,
            kind::COORD_DONE => co.finished[q] = Some(hdr.seq),
            kind::COORD_BOOKMARK => *co.bookmarks[q].entry(hdr.context) = hdr.seq,
            kind::COORD_BOOKMARKS_END => {
                this_round("bookmarks")?;
                let sent = std::mem::take(&mut co.bookmarks[q]);
                let received = &self.core.recv_seq[q];
                let contexts: Vec<u32> =
                    sent.iter().chain(received.iter()).map(|(c, _)| c).collect();
                for ctx in contexts {
                    let (s, r) = (sent.get(ctx), received.get(ctx));
                    if s != r {
                        return Err(Error::Unrecoverable(format!(
                            "rank {q} sent {s} message(s) on context {ctx} before global checkpoint {round}, this rank received {r}: a message crossed the checkpoint calls (every rank must call checkpoint where no message is in flight between two ranks' calls of the same number)"
                        )));
                    }
                }
                co.bookmarks_ended[q] = true;
            }
            kind::COORD_WRITTEN => {
                this_round("a commit")?;
                co.written[q] = true;
            }
            other => return Err(corrupt(format!("unknown coordination frame {other}"))),
        }
        Ok(())
    }

    /// Finalizing: tell every peer how many checkpoint calls this rank
    /// made (it makes no more).
    pub(super) fn announce_coordination_done(&mut self) {
        let me = self.core.rank;
        let Some(co) = self.coordination.as_ref() else {
            return;
        };
        let hdr = frame(kind::COORD_DONE, 0, co.calls, 0);
        for q in (0..self.size).filter(|&q| q != me) {
            self.core.control_out.push((q, hdr));
        }
        self.flush_control();
    }
}
