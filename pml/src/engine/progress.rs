//! Progress: one pass over every channel, idling on the doorbell, the
//! failed state, and shutdown (finalize, abort).

use std::sync::atomic::{Ordering, fence};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::link::Link;
use super::requests::{ReqId, SlotKind};
use super::{DIVERGED_EXIT_CODE, Engine, SLEEP_SLICE};
use crate::error::{Error, Result};
use crate::shm::{doorbell_fence, futex};

/// The longest sleep when the doorbell's membarrier failed: a writer may
/// then have missed that this rank sleeps.
const BRIEF_SLEEP: Duration = Duration::from_millis(1);

impl Engine {
    /// Sleep on the doorbell unless something is already waiting.
    pub(super) fn sleep(&mut self) {
        self.core.stats.sleeps += 1;
        if self.replay_alone
            && self
                .peers
                .iter()
                .flatten()
                .all(|p| matches!(&p.link, Link::Feed(q) if q.is_empty()))
        {
            // Nothing else can ever arrive.
            let e = Error::EngineFailed(
                "replay: the rank waits for a message the recording does not have (its execution diverged)".into(),
            );
            self.fail(&e);
            return;
        }
        if let Some(sim) = &self.sim {
            // Simulated: another rank runs meanwhile.
            sim.idle();
            return;
        }
        let Some(own) = self.own.clone() else {
            // A single rank waiting for itself can never be woken.
            std::thread::sleep(SLEEP_SLICE);
            return;
        };
        let bell = own.doorbell();
        if let Some(longest) = self.arm_doorbell() {
            // TCP peers wake us through the socket, shared-memory ones
            // through the doorbell; with both, poll the sockets briefly.
            let mut fds: Vec<PollFd<'_>> = self
                .peers
                .iter()
                .flatten()
                .filter_map(|p| match &p.link {
                    Link::Tcp(c) => Some(PollFd::from_borrowed_fd(
                        c.fd(),
                        if c.queued() > 0 {
                            PollFlags::IN | PollFlags::OUT
                        } else {
                            PollFlags::IN
                        },
                    )),
                    Link::Shm { .. } | Link::Dead | Link::Feed(_) | Link::Sim(_) => None,
                })
                .collect();
            fds.extend(self.idle_fds());
            if fds.is_empty() {
                futex::wait(bell, 1, longest);
            } else {
                // With a shared-memory peer the slice is 1 ms, no longer
                // than `longest` can be.
                let any_shm = self.peers.iter().flatten().any(|p| p.link.is_shm());
                let ms = if any_shm {
                    1
                } else {
                    SLEEP_SLICE.as_millis() as i32
                };
                let timeout = Timespec {
                    tv_sec: i64::from(ms / 1000),
                    tv_nsec: i64::from(ms % 1000) * 1_000_000,
                };
                // Woken, timed out or interrupted (EINTR): look again either way.
                let _ = poll(&mut fds, Some(&timeout));
            }
        }
        bell.store(0, Ordering::Relaxed);
    }

    /// Arm this rank's doorbell (peers then ring it) and say how long the
    /// rank may sleep: `None` if something is already waiting (a frame to
    /// read, or room for a frame waiting to be written: the reader may
    /// have freed space before the doorbell was armed), else the longest
    /// sleep — [`SLEEP_SLICE`], or [`BRIEF_SLEEP`] when this rank sleeps
    /// with membarrier and the call failed ([`doorbell_fence`]). Only for
    /// an engine with a mailbox.
    pub(super) fn arm_doorbell(&mut self) -> Option<Duration> {
        let mut longest = SLEEP_SLICE;
        if let Some(own) = &self.own {
            own.doorbell().store(1, Ordering::SeqCst);
            if own.sleeps_with_membarrier().load(Ordering::Relaxed) != 0 {
                if !doorbell_fence::before_sleep() {
                    longest = BRIEF_SLEEP;
                }
            } else {
                fence(Ordering::SeqCst);
            }
        }
        let ready =
            self.peers.iter_mut().flatten().any(|p| {
                p.link.has_frame() || p.pending.front().is_some_and(|o| o.fits(&mut p.link))
            });
        (!ready).then_some(longest)
    }

    /// One pass over every channel. Returns true if anything happened.
    ///
    /// A fatal error (corrupt frame, failed remote read) puts the engine in
    /// the failed state: every queued send and posted receive is dropped, so
    /// no user buffer is referenced any more, and every later call fails.
    pub(crate) fn progress(&mut self) -> Result<bool> {
        if let Some(why) = &self.failed {
            return Err(Error::EngineFailed(why.clone()));
        }
        self.progresses = self.progresses.wrapping_add(1);
        match self.progress_channels() {
            Ok(any) => {
                self.report_matches()?;
                Ok(any)
            }
            Err(e) => {
                self.fail(&e);
                Err(e)
            }
        }
    }

    /// Calls of [`Engine::progress`] so far.
    pub(crate) fn progresses(&self) -> u64 {
        self.progresses
    }

    pub(super) fn check_alive(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(Error::EngineFailed(why.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn fail(&mut self, e: &Error) {
        if self.failed.is_some() {
            // Failed already (the first failure stopped what it had to).
            return;
        }
        if matches!(e, Error::Diverged(_) | Error::Unrecoverable(_)) {
            // The launcher says this one's line.
            tracing::debug!(rank = self.core.rank, "fatal: {e}");
        } else {
            tracing::error!(rank = self.core.rank, "fatal: {e}");
        }
        if let Error::Diverged(why) | Error::Unrecoverable(why) = e {
            // Exact or loud: whatever the application does with the
            // error, the job stops here, with this line.
            self.abort(DIVERGED_EXIT_CODE, why);
        }
        // (Said once: a failure reported from a failed engine keeps its
        // words.)
        self.failed = Some(match e {
            Error::EngineFailed(why) => why.clone(),
            e => e.to_string(),
        });
        for peer in self.peers.iter_mut().flatten() {
            peer.pending.clear();
            peer.partial = None;
            // Nothing may keep pointing at a receive's buffer.
            peer.link.abandon_direct();
        }
        for id in self.core.matching.drain_posted() {
            self.core.complete(id);
        }
        let active: Vec<ReqId> = self
            .core
            .slots
            .iter()
            .enumerate()
            // (A group completes with its parts, whose statuses it takes.)
            .filter(|(_, s)| s.in_use && !s.done && s.kind != SlotKind::Group)
            .map(|(i, s)| ReqId::slot(i as u32, s.generation))
            .collect();
        for id in active {
            self.core.complete(id);
        }
    }

    fn progress_channels(&mut self) -> Result<bool> {
        if self.quiet() {
            return Ok(false);
        }
        let mut any = false;
        // Every pass, under a protocol: a peer restarted (the job page's
        // epoch moved), a restarted peer's connection is due, or this
        // process is catching up. One look in the common case.
        if self.recovery_due() {
            self.notice_restarts();
            self.accept_restarted()?;
            self.check_caught_up();
        }
        for p in 0..self.peers.len() {
            if self.chaos != 0 {
                // xorshift64: skip this peer on about a quarter of passes.
                self.chaos ^= self.chaos << 13;
                self.chaos ^= self.chaos >> 7;
                self.chaos ^= self.chaos << 17;
                if self.chaos.is_multiple_of(4) {
                    continue;
                }
            }
            let Some(peer) = self.peers[p].as_mut() else {
                continue;
            };
            let mut frames = 0;
            let mut died = false;
            // Over TCP, a fragment read straight into its receive goes on
            // first: nothing else can be read before its payload is in.
            let mut reading = true;
            if peer.link.direct_pending() {
                match peer.link.continue_direct() {
                    Some(hdr) => {
                        self.core.fragment_placed(p, peer, &hdr)?;
                        frames += 1;
                    }
                    None => reading = false,
                }
            }
            if reading {
                loop {
                    let hdr = match peer.link.peek() {
                        Ok(Some(h)) => h,
                        Ok(None) => break,
                        Err(reason) => return Err(Error::CorruptFrame { peer: p, reason }),
                    };
                    self.core.handle_frame(p, peer, &hdr)?;
                    if self.core.gone.take().is_some() {
                        died = true;
                        break;
                    }
                    peer.link.consume(&hdr);
                    // Its ring was read: receives may look at it again.
                    peer.looks_to_skip = 0;
                    frames += 1;
                    if frames >= 64 {
                        break;
                    }
                }
            }
            if reading
                && !died
                && let Some(hdr) = peer.link.incomplete_fragment()
                && let Some(dst) = self.core.direct_destination(peer, &hdr)
            {
                // SAFETY: `dst` lies in the buffer of a receive that
                // matched this message and stays active until its last
                // fragment is in (a matched receive cannot be cancelled);
                // `fail` abandons the read and `drop_link` drops the
                // connection before the receive could complete otherwise.
                unsafe { peer.link.start_direct(hdr, dst) };
                if let Some(hdr) = peer.link.continue_direct() {
                    self.core.fragment_placed(p, peer, &hdr)?;
                    frames += 1;
                }
            }
            if died {
                // The sender died before we could read its message: its
                // next process sends it again.
                tracing::info!(rank = self.core.rank, peer = p, "peer died");
                self.drop_link(p);
                any = true;
                continue;
            }
            if self.peers[p].is_none() {
                continue;
            }
            if frames > 0 {
                any = true;
                self.release_read(p);
            }
            if !self.peers[p].as_ref().is_none_or(|q| q.pending.is_empty()) {
                any |= self.push_pending(p);
            }
        }
        if !self.core.control_out.is_empty() {
            self.flush_control();
            any = true;
        }
        self.apply_gc_notices()?;
        if !self.core.coordination_in.is_empty() {
            self.apply_coordination()?;
            any = true;
        }
        Ok(any)
    }

    /// Recovery business for this pass: a peer restarted (the job page's
    /// epoch moved), a restarted peer's connection is due, or this process
    /// is catching up.
    #[inline]
    fn recovery_due(&self) -> bool {
        self.recovery.as_ref().is_some_and(|rc| {
            rc.page.epoch() != rc.seen_epoch || rc.expected > 0 || rc.catching_up.is_some()
        })
    }

    /// Nothing for a pass to do, seen in one look per peer: no frame in
    /// any ring, nothing queued to send, no recovery business, and only
    /// shared-memory links (a socket must be read to know). A waiting
    /// rank polls this in a loop: the quicker it is, the sooner the
    /// rank sees a message come in.
    #[inline]
    fn quiet(&self) -> bool {
        self.quiet_but(None)
    }

    /// [`Engine::quiet`], but for a frame waiting in `reading`'s ring
    /// (the one a receive taken straight from that ring is about to read).
    #[inline]
    pub(super) fn quiet_but(&self, reading: Option<usize>) -> bool {
        if self.chaos != 0
            || !self.core.control_out.is_empty()
            || !self.core.gc_notices.is_empty()
            || !self.core.coordination_in.is_empty()
            || self.recovery_due()
        {
            return false;
        }
        self.peers.iter().enumerate().all(|(i, p)| {
            p.as_ref().is_none_or(|p| {
                p.pending.is_empty()
                    && match &p.link {
                        Link::Shm { reader, .. } => reading == Some(i) || !reader.has_frame(),
                        Link::Dead => true,
                        Link::Tcp(_) | Link::Feed(_) | Link::Sim(_) => false,
                    }
            })
        })
    }

    // -------------------------------------------------------------- shutdown

    /// Complete every outgoing operation, then tell the launcher we are done.
    pub(crate) fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        // A failed rank never tells the launcher it finished cleanly: the
        // launcher would wait for the others, which may wait for it.
        self.check_alive()?;
        self.wait_until(|e| {
            e.peers
                .iter()
                .flatten()
                .all(|p| p.pending.is_empty() && p.link.unsent() == 0)
                && e.core
                    .slots
                    .iter()
                    .all(|s| !s.in_use || s.done || s.kind != SlotKind::Send)
        })?;
        self.hook(|p| p.finalize())?;
        self.announce_coordination_done();
        if self.publish_stats
            && let Some(kv) = self.kv.as_mut()
        {
            let s = self.core.stats;
            let mut pairs = vec![
                format!("protocol={}", self.protocol.name()),
                format!("messages_sent={}", s.messages_sent),
                format!("bytes_sent={}", s.bytes_sent),
                format!("messages_received={}", s.messages_received),
                format!("received_at_start={}", s.received_at_start),
                format!("sleeps={}", s.sleeps),
            ];
            for (k, v) in self.protocol.stats() {
                pairs.push(format!("{k}={v}"));
            }
            kv.put(&format!("stats.{}", self.core.rank), &pairs.join(","))?;
        }
        self.check_alive()?;
        if let Some(kv) = self.kv.as_mut() {
            kv.finalize()?;
        }
        if let Some(sim) = &self.sim {
            sim.finalized(self.core.rank);
        }
        self.wait_for_everyone()?;
        self.finalized = true;
        Ok(())
    }

    /// This rank asked the launcher to stop the job: the launcher's line
    /// says why, the rank need not say it again.
    pub(crate) fn stopped_job(&self) -> bool {
        self.stopped_job
    }

    /// Ask the launcher to stop the job.
    pub(crate) fn abort(&mut self, code: i32, message: &str) {
        // (Said by the launcher only if it heard: else the rank says it.)
        match self.kv.as_mut().map(|kv| kv.abort(code, message)) {
            Some(Ok(())) => self.stopped_job = true,
            Some(Err(e)) => tracing::warn!("abort could not reach the launcher: {e}"),
            None => {}
        }
    }
}
