//! The engine's part of a checkpoint: its state (call counter, channel
//! counters, unexpected messages) handed to the protocol with the
//! application's bytes, and the garbage-collection notices that follow
//! (senders may free their log records up to what this rank received).

use std::time::{Duration, Instant};

use super::{Engine, Unexpected};
use crate::error::{Error, Result};
use crate::protocol::CallId;
use crate::recovery::{EngineSnapshot, SavedMessage};
use crate::shm::ring::kind;

/// Where a checkpoint that is due is taken.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CheckpointAt {
    /// This rank's own (`pessimist`).
    Local,
    /// The global checkpoint agreed at this checkpoint call (`coordinated`).
    Global(u64),
}

impl Engine {
    /// Save a checkpoint (see [`crate::Comm::checkpoint`]). False if the
    /// protocol takes none (`none`: nothing to restart from, nothing saved).
    pub(crate) fn checkpoint(&mut self, app: &[u8]) -> Result<bool> {
        self.check_alive()?;
        if !self.protocol.takes_checkpoints() {
            return Ok(false);
        }
        if self.coordination.is_some() {
            return match self.coordinated_call(true, None)? {
                Some(call) => self.checkpoint_at(CheckpointAt::Global(call), app),
                None => Ok(false),
            };
        }
        self.check_no_request_in_flight()?;
        // Our frames to live peers leave first: an acknowledgement still
        // queued here would be lost with a crash after the checkpoint.
        self.wait_own_frames_left()?;
        let snap = self.snapshot()?;
        let frees = self.hook(|p| p.checkpoint(&snap, app))?;
        let me = self.core.rank;
        for (peer, ctx, up_to) in frees {
            if up_to == 0 {
                continue;
            }
            if peer == me {
                self.hook(|p| p.free_log(me, ctx, up_to))?;
            } else {
                let mut hdr = crate::shm::ring::FrameHeader::new(kind::GC);
                hdr.context = ctx;
                hdr.seq = up_to;
                self.core.control_out.push((peer, hdr));
            }
        }
        self.flush_control();
        self.last_checkpoint = Instant::now();
        Ok(true)
    }

    /// A checkpoint is taken between requests: an error if one is in
    /// flight.
    pub(super) fn check_no_request_in_flight(&self) -> Result<()> {
        if self.core.slots.iter().any(|s| s.in_use) {
            return Err(Error::RequestState(
                "checkpoint while a request is in flight (complete every request first)",
            ));
        }
        Ok(())
    }

    /// Wait until every frame this rank queued for a live peer has left.
    pub(super) fn wait_own_frames_left(&mut self) -> Result<()> {
        self.wait_until(|e| {
            e.peers
                .iter()
                .flatten()
                .all(|p| p.broken || (p.pending.is_empty() && p.link.unsent() == 0))
        })
    }

    /// The engine's state for a checkpoint (once every frame has left):
    /// call numbers, channel counters and the unexpected messages.
    pub(super) fn snapshot(&mut self) -> Result<EngineSnapshot> {
        self.report_matches()?;
        let mut unexpected = Vec::new();
        for (env, u) in self.core.matching.unexpected_in_order() {
            let (data, sync) = match u {
                Unexpected::Eager { data, sync } => (data.clone(), sync.unwrap_or(0)),
                // With a protocol, large messages are read when they arrive.
                Unexpected::Rendezvous { .. } | Unexpected::SelfSync { .. } => {
                    return Err(Error::RequestState(
                        "checkpoint with a message still in its sender's memory",
                    ));
                }
            };
            unexpected.push(SavedMessage {
                source: env.source,
                tag: env.tag,
                context: env.context,
                seq: env.seq,
                sync_token: sync,
                data,
            });
        }
        Ok(EngineSnapshot {
            last_calls: self
                .last_calls
                .iter()
                .chain(std::iter::once((CallId::PROCESS_LANE, self.all_calls)))
                .collect(),
            next_context: self.next_context,
            world_idups: self.world_idups,
            send_seq: self.send_seq.clone(),
            recv_seq: self.core.recv_seq.clone(),
            unexpected,
            checkpoint_call: 0,
            global_index: 0,
        })
    }

    /// A checkpoint call of `checkpoint_if_due`: whether a checkpoint is
    /// to be taken here — `interval` has passed since the last one (or
    /// the start), or, with coordinated checkpoints, the ranks agreed on
    /// this call for the next one. Take it with [`Engine::checkpoint_at`]
    /// (the caller makes the state meanwhile, outside the engine).
    pub(crate) fn checkpoint_if_due(&mut self, interval: Duration) -> Result<Option<CheckpointAt>> {
        if self.coordination.is_some() {
            return Ok(self
                .coordinated_call(false, Some(interval))?
                .map(CheckpointAt::Global));
        }
        Ok(self.checkpoint_due(interval).then_some(CheckpointAt::Local))
    }

    /// Take the checkpoint [`Engine::checkpoint_if_due`] said is due,
    /// with the application's `app` bytes.
    pub(crate) fn checkpoint_at(&mut self, at: CheckpointAt, app: &[u8]) -> Result<bool> {
        match at {
            CheckpointAt::Local => self.checkpoint(app),
            CheckpointAt::Global(call) => {
                self.take_global_checkpoint(call, app)?;
                Ok(true)
            }
        }
    }

    /// [`Engine::checkpoint`] if `interval` has passed since the last one
    /// (or since the start).
    pub(crate) fn checkpoint_due(&self, interval: Duration) -> bool {
        self.protocol.takes_checkpoints() && self.last_checkpoint.elapsed() >= interval
    }

    /// Tell the protocol which senders checkpointed.
    pub(super) fn apply_gc_notices(&mut self) -> Result<()> {
        if self.core.gc_notices.is_empty() {
            return Ok(());
        }
        let notices = std::mem::take(&mut self.core.gc_notices);
        for (peer, ctx, up_to) in notices {
            self.hook(|p| p.free_log(peer, ctx, up_to))?;
        }
        Ok(())
    }
}
