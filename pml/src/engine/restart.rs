//! The engine's side of restarting crashed ranks (see [`crate::recovery`]):
//! noticing a restart, dropping the dead process's link, installing the
//! link to a new process and re-sending from the protocol's log what it
//! lacks, restoring a checkpoint and connecting a restarted process to the
//! running job. How the two processes meet is in `tcp_rendezvous.rs` (real
//! jobs) and `sim_rendezvous.rs` (the simulator).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};

use super::{
    CatchUp, Connection, EAGER_LIMIT, Engine, Link, Outgoing, PartialDest, RawBytes, Recovery,
    Rendezvous, ReqId, Unexpected, message_header,
};
use crate::bootstrap::{JobEnv, KvClient};
use crate::error::{Error, Result};
use crate::lanes::LaneMap;
use crate::matching::Envelope;
use crate::protocol::CallId;
use crate::recovery::{EngineSnapshot, JobPage};
use crate::shm::ring::{FrameHeader, flags, kind};

/// How many times a restarted process opens a handshake a peer closed.
const HANDSHAKE_TRIES: u32 = 5;

impl Recovery {
    /// Map the job page and open the listener restarted processes connect to.
    pub(super) fn start(
        env: &JobEnv,
        page_fd: i32,
        kv: &mut KvClient,
        started: Instant,
        spawned_at_ns: Option<u128>,
    ) -> Result<Recovery> {
        let page = JobPage::map(page_fd, env.size)?;
        super::join::close_inherited(page_fd);
        let listener = TcpListener::bind((kv.local_ip(), 0))
            .and_then(|l| l.set_nonblocking(true).map(|_| l))
            .map_err(|e| Error::Bootstrap(format!("recovery listener: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Bootstrap(format!("recovery listener: {e}")))?;
        kv.put(
            &format!("rtcp.{}.{}", env.rank, env.incarnation),
            &addr.to_string(),
        )?;
        let known_inc = (0..env.size).map(|q| page.incarnation(q)).collect();
        let exec = spawned_at_ns.and_then(|spawned| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?
                .as_nanos();
            let behind = now.checked_sub(spawned)?;
            Some(Duration::from_nanos(
                behind.saturating_sub(started.elapsed().as_nanos()) as u64,
            ))
        });
        let catching_up = (env.incarnation > 0).then_some(CatchUp {
            exec,
            join_started: started,
            joined: started,
            protocol_ready: None,
            connected: None,
        });
        Ok(Recovery {
            seen_epoch: page.epoch(),
            my_start: page.start_epoch(env.rank),
            incarnation: env.incarnation,
            known_inc,
            rendezvous: Rendezvous::Tcp(listener),
            handshakes: Vec::new(),
            expecting: vec![false; env.size],
            expected: 0,
            suppress: vec![LaneMap::new(); env.size],
            my_host: env.host_of.get(env.rank).copied().unwrap_or(0),
            transport_tcp: env.transport_tcp,
            token: env.token.clone(),
            catching_up,
            page,
        })
    }
}

impl Recovery {
    /// Whether a connection from `q`'s newer process is expected.
    fn expect(&mut self, q: usize, yes: bool) {
        if self.expecting[q] != yes {
            self.expecting[q] = yes;
            if yes {
                self.expected += 1;
            } else {
                self.expected -= 1;
            }
        }
    }
}

impl Engine {
    /// The protocol is installed: restore its checkpoint (if this process
    /// restarts from one) and, in a restarted process, connect to the job.
    pub(super) fn after_protocol_installed(&mut self) -> Result<()> {
        if self.replay_alone {
            let me = self.core.rank;
            for p in (0..self.size).filter(|&p| p != me) {
                let msgs = self.hook(|proto| proto.recorded_incoming(p))?;
                if let Some(peer) = self.peers[p].as_mut() {
                    peer.link = Link::Feed(msgs.into());
                }
            }
            return Ok(());
        }
        if let Some(c) = self.catch_up_mut() {
            c.protocol_ready = Some(Instant::now());
        }
        let restored = self.protocol.take_restored();
        if let Some(snap) = restored {
            self.restore(snap)?;
        }
        if self.recovery.as_ref().is_some_and(|r| r.incarnation > 0) {
            self.connect_to_job()?;
            if self.coordination.is_some() {
                // Every rank restarted together and nothing is logged: a
                // message sent over a link not yet up would be lost, so
                // none is sent before every link is up.
                self.wait_for_every_link()?;
            }
            vpml_fault_points::fault_point!("recovery.connected");
        }
        if let Some(c) = self.catch_up_mut() {
            c.connected = Some(Instant::now());
        }
        Ok(())
    }

    fn catch_up_mut(&mut self) -> Option<&mut CatchUp> {
        self.recovery.as_mut()?.catching_up.as_mut()
    }

    /// Is this process re-executing what an earlier one did (a restarted
    /// rank before it caught up, or a rank replayed alone)?
    #[inline]
    pub(crate) fn reexecuting(&self) -> bool {
        self.replay_alone
            || self
                .recovery
                .as_ref()
                .is_some_and(|r| r.catching_up.is_some())
    }

    /// May a process of `q` restarted after this one's crash forget what
    /// we do not hold of its previous process's messages (see
    /// [`crate::protocol::Protocol::peer_holds`])? Only if no durable
    /// event of ours may name one: we are past any re-execution of our
    /// own (every logged call reached), and no receive of ours is bound
    /// to `q` by the log or by a first fragment ([`Slot::pinned`]: the
    /// message it takes next may be the one a logged match names).
    ///
    /// [`Slot::pinned`]: super::requests::Slot
    pub(crate) fn settled_for(&self, q: usize) -> bool {
        !self.reexecuting()
            && self.past_logged_calls()
            && !self
                .core
                .matching
                .posted_from(q)
                .any(|&id| self.core.slot(id).is_some_and(|s| s.pinned))
    }

    /// Has every lane reached its last logged call (or has none)?
    fn past_logged_calls(&self) -> bool {
        self.replay_ends
            .iter()
            .all(|(lane, end)| self.last_in(lane) >= end)
    }

    /// A restarted process has caught up once it is past its last logged
    /// event and has re-executed every send its peers already had: print
    /// how long each stage of its recovery took.
    pub(super) fn check_caught_up(&mut self) {
        let Some(rc) = self.recovery.as_ref() else {
            return;
        };
        if rc.catching_up.is_none() {
            return;
        }
        if self.coordination.is_some()
            && rc
                .catching_up
                .as_ref()
                .is_some_and(|c| c.connected.is_none())
        {
            // Restarted with every rank: caught up once linked to all.
            return;
        }
        if !self.past_logged_calls()
            || (0..self.size).any(|q| {
                rc.suppress[q]
                    .iter()
                    .any(|(ctx, had)| self.send_seq[q].get(ctx) < had)
            })
        {
            return;
        }
        let Some(c) = self.recovery.as_mut().and_then(|r| r.catching_up.take()) else {
            return;
        };
        let now = Instant::now();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let ready = c.protocol_ready.unwrap_or(c.joined);
        let connected = c.connected.unwrap_or(ready);
        if self.coordination.is_some() {
            // Every rank restarted: no events, no re-execution to wait for.
            eprintln!(
                "vpml: rank {} (incarnation {}) resumed {:.1} ms after entering vpml: process start {}, join {:.1} ms, checkpoint {:.1} ms, connect to every rank {:.1} ms",
                self.core.rank,
                self.incarnation(),
                ms(now - c.join_started),
                c.exec
                    .map_or("unknown".into(), |d| format!("{:.1} ms", ms(d))),
                ms(c.joined - c.join_started),
                ms(ready - c.joined),
                ms(connected - ready),
            );
            return;
        }
        let events = self
            .protocol_stats()
            .into_iter()
            .find(|(k, _)| k == "events_replayed")
            .map_or(0, |(_, v)| v);
        eprintln!(
            "vpml: rank {} (incarnation {}) caught up {:.1} ms after entering vpml: process start {}, join {:.1} ms, checkpoint and {events} events {:.1} ms, connect and re-send {:.1} ms, re-execution {:.1} ms",
            self.core.rank,
            self.incarnation(),
            ms(now - c.join_started),
            c.exec
                .map_or("unknown".into(), |d| format!("{:.1} ms", ms(d))),
            ms(c.joined - c.join_started),
            ms(ready - c.joined),
            ms(connected - ready),
            ms(now - connected),
        );
    }

    fn restore(&mut self, snap: EngineSnapshot) -> Result<()> {
        if snap.send_seq.len() != self.size || snap.recv_seq.len() != self.size {
            return Err(Error::Bootstrap(format!(
                "the checkpoint is for a job of {} ranks, this one has {}",
                snap.send_seq.len(),
                self.size
            )));
        }
        let (process, lanes): (Vec<_>, Vec<_>) = snap
            .last_calls
            .iter()
            .partition(|&&(lane, _)| lane == CallId::PROCESS_LANE);
        self.last_calls = LaneMap::from_pairs(lanes);
        self.all_calls = process.first().map_or(0, |&(_, n)| n);
        self.next_context = self.next_context.max(snap.next_context);
        self.world_idups = self.world_idups.max(snap.world_idups);
        self.send_seq = snap.send_seq;
        self.core.recv_seq = snap.recv_seq;
        if let Some(co) = self.coordination.as_mut() {
            co.resume_after(snap.global_index, snap.checkpoint_call)?;
        }
        for m in snap.unexpected {
            let env = Envelope {
                source: m.source,
                tag: m.tag,
                context: m.context,
                seq: m.seq,
                len: m.data.len(),
            };
            let sync = (m.sync_token != 0).then_some(m.sync_token);
            self.core
                .matching
                .push_unexpected(env, Unexpected::Eager { data: m.data, sync });
        }
        tracing::info!(
            rank = self.core.rank,
            lanes = snap.last_calls.len(),
            "restored the engine state of a checkpoint"
        );
        Ok(())
    }

    /// A restarted process connects to every process started before it
    /// (the later ones connect to us).
    fn connect_to_job(&mut self) -> Result<()> {
        let me = self.core.rank;
        let Some(rc) = self.recovery.as_mut() else {
            return Ok(());
        };
        rc.seen_epoch = rc.page.epoch();
        for q in 0..self.size {
            if q == me {
                continue;
            }
            let Some(rc) = self.recovery.as_mut() else {
                return Ok(());
            };
            let inc = rc.page.incarnation(q);
            rc.known_inc[q] = inc;
            if rc.page.start_epoch(q) > rc.my_start {
                rc.expect(q, true);
                continue;
            }
            // A peer may close a handshake it could not take then (too
            // many at once): try again while it is the same process.
            let mut tries = 0;
            loop {
                tries += 1;
                match self.connect_to(q, inc) {
                    Ok(Some(l)) => {
                        // The job agreed on single copy before we started.
                        self.single_copy |= l.single_copy;
                        self.install_link(q, l.conn, l.received, l.single_copy, l.host, l.settled)?
                    }
                    Ok(None) => {}
                    Err(why)
                        if tries < HANDSHAKE_TRIES
                            && why.contains("closed during the handshake")
                            && self
                                .recovery
                                .as_ref()
                                .is_some_and(|rc| rc.page.incarnation(q) == inc) =>
                    {
                        tracing::info!(rank = me, peer = q, "handshake closed ({why}); again");
                        continue;
                    }
                    Err(why) => {
                        tracing::info!(rank = me, peer = q, "not connected ({why}); waiting for it")
                    }
                }
                break;
            }
        }
        Ok(())
    }

    /// Act on restarts the job page announces: drop the links of restarted
    /// ranks and expect their new processes.
    pub(super) fn notice_restarts(&mut self) {
        let Some(rc) = self.recovery.as_mut() else {
            return;
        };
        let epoch = rc.page.epoch();
        if epoch == rc.seen_epoch {
            return;
        }
        rc.seen_epoch = epoch;
        let mut restarted = Vec::new();
        for q in 0..self.size {
            if q == self.core.rank {
                continue;
            }
            let inc = rc.page.incarnation(q);
            if inc != rc.known_inc[q] {
                rc.known_inc[q] = inc;
                let newer = rc.page.start_epoch(q) > rc.my_start;
                rc.expect(q, newer);
                restarted.push(q);
            }
        }
        for q in restarted {
            tracing::info!(rank = self.core.rank, peer = q, "peer restarted");
            self.drop_link(q);
        }
    }

    /// Forget everything in flight with `q`'s dead process: its partial
    /// message (the receive goes back to the posted queue), our queued
    /// frames (every message is in the log and is re-sent), and reads it
    /// still owed us (of the log, or of a caller's buffer: those sends
    /// complete).
    pub(super) fn drop_link(&mut self, q: usize) {
        let Some(peer) = self.peers[q].as_mut() else {
            return;
        };
        if let Some(part) = peer.partial.take()
            && let PartialDest::Posted(p) = part.dest
        {
            self.core.matching.repost(p);
        }
        peer.link = Link::Dead;
        peer.broken = true;
        peer.single_copy = false;
        peer.sync_unmatched = None;
        peer.sync_unmatched_incoming.clear();
        peer.sync_received_incoming = LaneMap::new();
        let drained: Vec<Outgoing> = peer.pending.drain(..).collect();
        // Sends it was to read in place: the log re-sends them.
        let unread = std::mem::take(&mut peer.fin_waiting);
        for token in unread.into_values() {
            self.core.complete(ReqId::from_token(token));
        }
        for item in drained {
            let complete = match item {
                Outgoing::Frame { complete, .. } | Outgoing::Fragments { complete, .. } => complete,
            };
            if let Some(id) = complete {
                self.core.complete(id);
            }
        }
    }

    /// A connection with `q`'s current process is up: `received` is how
    /// many of our messages on each context it has (`single_copy`: it can
    /// read our memory; `settled`: [`Engine::settled_for`] held there, so
    /// the protocol may forget what it does not hold). Re-send the rest
    /// from the log.
    pub(super) fn install_link(
        &mut self,
        q: usize,
        conn: Connection,
        received: LaneMap<u64>,
        single_copy: bool,
        host: usize,
        settled: bool,
    ) -> Result<()> {
        self.drop_link(q);
        let (link, single_copy) = self.new_link(q, conn, single_copy, host)?;
        if let Some(rc) = self.recovery.as_mut() {
            rc.expect(q, false);
            rc.suppress[q] = received.clone();
        }
        if settled {
            self.protocol.peer_holds(q, &received);
        }
        let logged = self.hook(|p| p.logged_messages(q, &received))?;
        // Every message q has not received must be there, in order.
        let mut next = received.clone();
        for m in &logged {
            let last = next.entry(m.context);
            if m.seq != *last + 1 {
                let e = Error::Unrecoverable(format!(
                    "rank {} cannot re-send the messages restarted rank {q} needs: the sender log lacks message {} on context {} (next kept: {})",
                    self.core.rank,
                    *last + 1,
                    m.context,
                    m.seq
                ));
                self.fail(&e);
                return Err(e);
            }
            *last = m.seq;
        }
        // Which of q's synchronous messages wait here unmatched: a newer
        // process of q completes its re-executed synchronous sends by it.
        let unmatched: Vec<(u32, u64)> = self
            .core
            .matching
            .unexpected_in_order()
            .into_iter()
            .filter(|(env, u)| {
                env.source == q && matches!(u, Unexpected::Eager { sync: Some(_), .. })
            })
            .map(|(env, _)| (env.context, env.seq))
            .collect();
        let received_from_q = self.core.recv_seq[q].clone();
        let Some(peer) = self.peers[q].as_mut() else {
            return Ok(());
        };
        peer.link = link;
        peer.single_copy = single_copy;
        peer.broken = false;
        for m in &logged {
            let data = RawBytes {
                ptr: m.bytes.as_ptr() as *mut u8,
                len: m.bytes.len(),
            };
            let token = peer.sync_waiting.get(&(m.context, m.seq)).copied();
            let item = if m.bytes.len() <= EAGER_LIMIT {
                let mut hdr = message_header(kind::EAGER, m.tag, m.context, m.seq, m.bytes.len());
                if let Some(t) = token {
                    hdr.flags |= flags::SYNC;
                    hdr.aux0 = t;
                }
                Outgoing::Frame {
                    hdr,
                    data,
                    complete: None,
                    _loan: m.bytes.loan(),
                }
            } else {
                let mut hdr = message_header(kind::FRAG, m.tag, m.context, m.seq, m.bytes.len());
                if let Some(t) = token {
                    hdr.flags |= flags::SYNC;
                    hdr.aux1 = t;
                }
                Outgoing::Fragments {
                    hdr,
                    data,
                    offset: 0,
                    complete: None,
                    _loan: m.bytes.loan(),
                }
            };
            peer.pending.push_back(item);
        }
        // Part of the re-sent messages may be out already.
        self.push_pending(q);
        vpml_fault_points::fault_point!("recovery.resending");
        let Some(peer) = self.peers[q].as_mut() else {
            return Ok(());
        };
        let control = |k: u8, context: u32, seq: u64| {
            let mut hdr = FrameHeader::new(k);
            hdr.context = context;
            hdr.seq = seq;
            Outgoing::header_only(hdr)
        };
        for (context, seq) in unmatched {
            peer.pending
                .push_back(control(kind::SYNC_UNMATCHED, context, seq));
        }
        for (context, seq) in received_from_q.iter() {
            peer.pending
                .push_back(control(kind::SYNC_RECEIVED, context, seq));
        }
        peer.pending.push_back(control(kind::SYNC_STATE_END, 0, 0));
        tracing::info!(
            rank = self.core.rank,
            peer = q,
            resent = logged.len(),
            "link to a restarted process is up"
        );
        self.push_pending(q);
        Ok(())
    }

    /// The application state of the checkpoint this process restarted from.
    pub(crate) fn restart_state(&self) -> Option<Vec<u8>> {
        self.protocol.restart_state()
    }

    /// This process is a restarted incarnation (not the first start).
    pub(crate) fn incarnation(&self) -> u32 {
        self.recovery.as_ref().map_or(0, |r| r.incarnation)
    }

    /// After finalize, a rank keeps serving (re-sends to a rank that may
    /// still crash) until every rank has finalized.
    pub(super) fn wait_for_everyone(&mut self) -> Result<()> {
        if self.recovery.is_none() {
            return Ok(());
        }
        self.wait_until(|e| e.recovery.as_ref().is_none_or(|r| r.page.all_finalized()))
    }

    /// Extra descriptors to poll while idle: the listener, while a
    /// restarted process is expected, and the connections whose
    /// handshake is still coming.
    pub(super) fn idle_fds(&self) -> Vec<PollFd<'_>> {
        let Some(rc) = self.recovery.as_ref() else {
            return Vec::new();
        };
        let Rendezvous::Tcp(listener) = &rc.rendezvous else {
            return Vec::new();
        };
        if rc.expected == 0 {
            return Vec::new();
        }
        std::iter::once(PollFd::new(listener, PollFlags::IN))
            .chain(
                rc.handshakes
                    .iter()
                    .map(|h| PollFd::new(h.stream(), PollFlags::IN)),
            )
            .collect()
    }

    /// Re-executed sends on `ctx` up to this sequence number were already
    /// received (and a replayed rank transmits nothing).
    #[inline]
    pub(super) fn suppressed(&self, dest: usize, ctx: u32, seq: u64) -> bool {
        self.replay_alone
            || self
                .recovery
                .as_ref()
                .is_some_and(|r| seq <= r.suppress[dest].get(ctx))
    }
}
