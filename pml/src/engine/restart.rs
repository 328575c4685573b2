//! The engine's side of restarting crashed ranks (see [`crate::recovery`]):
//! noticing a restart, dropping the dead process's link, accepting the new
//! process's connection, re-sending from the protocol's log, restoring a
//! checkpoint and connecting a restarted process to the running job.

use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::{
    CatchUp, Connection, EAGER_LIMIT, Engine, Link, Outgoing, PartialDest, RawBytes, Recovery,
    Rendezvous, ReqId, Unexpected, message_header,
};
use crate::bootstrap::{JobEnv, KvClient};
use crate::error::{Error, Result};
use crate::matching::Envelope;
use crate::recovery::{self, EngineSnapshot, JobPage, SavedMessage};
use crate::shm::mailbox::RING_CAPACITY;
use crate::shm::ring::{FrameHeader, RingReader, RingWriter, flags, kind};
use crate::tcp::TcpConn;

/// How long a restarted process waits for an earlier process to publish
/// its address.
const ADDRESS_WAIT: Duration = Duration::from_secs(60);

impl Recovery {
    /// Map the job page and open the listener restarted processes connect to.
    pub(super) fn start(
        env: &JobEnv,
        page_fd: i32,
        kv: &mut KvClient,
        started: Instant,
    ) -> Result<Recovery> {
        let page = JobPage::map(page_fd, env.size)?;
        // SAFETY: the descriptor was inherited for us alone; the mapping
        // stays valid after close.
        unsafe { libc::close(page_fd) };
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
        let exec = std::env::var(crate::bootstrap::env::SPAWNED_AT_NS)
            .ok()
            .and_then(|v| v.parse::<u128>().ok())
            .and_then(|spawned| {
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
            expecting: vec![false; env.size],
            expected: 0,
            suppress: vec![0; env.size],
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
            for p in 0..self.size {
                let msgs = match self.protocol.as_mut() {
                    Some(proto) if p != self.core.rank => proto.recorded_incoming(p),
                    _ => continue,
                };
                if let Some(peer) = self.peers[p].as_mut() {
                    peer.link = Link::Feed(msgs.into());
                }
            }
            return Ok(());
        }
        if let Some(c) = self.catch_up_mut() {
            c.protocol_ready = Some(Instant::now());
        }
        let restored = self.protocol.as_mut().and_then(|p| p.take_restored());
        if let Some(snap) = restored {
            self.restore(snap)?;
        }
        if self.recovery.as_ref().is_some_and(|r| r.incarnation > 0) {
            self.connect_to_job()?;
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
        let replay_end = self.protocol.as_ref().map_or(0, |p| p.replay_end());
        if self.last_call < replay_end || (0..self.size).any(|q| self.send_seq[q] < rc.suppress[q])
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
        self.last_call = snap.last_call;
        self.next_context = self.next_context.max(snap.next_context);
        self.send_seq = snap.send_seq;
        self.core.recv_seq = snap.recv_seq;
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
            call = self.last_call,
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
            match self.connect_to(q, inc) {
                Ok(Some((stream, received, single_copy, host))) => {
                    // The job agreed on single copy before we started.
                    self.single_copy |= single_copy;
                    self.install_link(q, stream, received, single_copy, host)?
                }
                Ok(None) => {}
                Err(why) => {
                    tracing::info!(rank = me, peer = q, "not connected ({why}); waiting for it")
                }
            }
        }
        Ok(())
    }

    /// Connect to incarnation `inc` of `q`. `Ok(None)` if it was restarted
    /// meanwhile (its new process connects to us).
    fn connect_to(
        &mut self,
        q: usize,
        inc: u32,
    ) -> std::result::Result<Option<(Connection, u64, bool, usize)>, String> {
        if let Some(Rendezvous::Sim(_)) = self.recovery.as_ref().map(|r| &r.rendezvous) {
            return Ok(self.sim_connect_to(q, inc));
        }
        let me = self.core.rank;
        let received = self.core.recv_seq[q];
        let single_copy = self.single_copy;
        let (Some(rc), Some(kv)) = (self.recovery.as_ref(), self.kv.as_mut()) else {
            return Ok(None);
        };
        let key = format!("rtcp.{q}.{inc}");
        let deadline = Instant::now() + ADDRESS_WAIT;
        let addr = loop {
            if let Some(a) = kv.get(&key).map_err(|e| e.to_string())? {
                break a;
            }
            if rc.page.incarnation(q) != inc {
                return Ok(None);
            }
            if Instant::now() > deadline {
                return Err(format!("rank {q} published no address"));
            }
            // The peer is itself starting; it publishes its address first thing.
            std::thread::sleep(Duration::from_millis(2));
        };
        let sock: std::net::SocketAddr = addr
            .parse()
            .map_err(|_| format!("bad address {addr:?} for rank {q}"))?;
        let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(5))
            .map_err(|e| format!("connect to {sock}: {e}"))?;
        let hello = recovery::hello_line(
            &rc.token,
            me,
            rc.incarnation,
            received,
            single_copy,
            rc.my_host,
        );
        recovery::write_line(&mut s, &hello)?;
        let page = &rc.page;
        let reply = recovery::read_line(&mut s, || page.incarnation(q) == inc)?;
        let mut parts = reply.split(' ');
        if parts.next() != Some("OK") {
            return Err(format!("refused: {reply}"));
        }
        let their_inc: Option<u32> = parts.next().and_then(|v| v.parse().ok());
        let their_received: Option<u64> = parts.next().and_then(|v| v.parse().ok());
        let their_copy = parts.next();
        let their_host: Option<usize> = parts.next().and_then(|v| v.parse().ok());
        match (their_inc, their_received, their_copy, their_host) {
            (Some(i), Some(r), Some(c @ ("0" | "1")), Some(h)) if i == inc => {
                Ok(Some((Connection::Tcp(s), r, c == "1", h)))
            }
            _ => Err(format!("bad reply {reply:?}")),
        }
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

    /// Accept connections of restarted processes (only while one is expected).
    pub(super) fn accept_restarted(&mut self) -> Result<()> {
        loop {
            let Some(rc) = self.recovery.as_ref() else {
                return Ok(());
            };
            if rc.expected == 0 {
                return Ok(());
            }
            let listener = match &rc.rendezvous {
                Rendezvous::Tcp(l) => l,
                Rendezvous::Sim(_) => return self.sim_accept_restarted(),
            };
            let (mut s, from) = match listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("recovery listener: {e}");
                    return Ok(());
                }
            };
            let mut tries = 0;
            let line = recovery::read_line(&mut s, || {
                tries += 1;
                tries < 50
            });
            let hello = line.and_then(|l| recovery::parse_hello(&l, &rc.token, self.size));
            let recovery::Hello {
                rank: q,
                incarnation: inc,
                received,
                single_copy,
                host,
            } = match hello {
                Ok(h) => h,
                Err(why) => {
                    tracing::warn!("refused a connection from {from}: {why}");
                    continue;
                }
            };
            // The page may announce the restart only now.
            self.notice_restarts();
            let Some(rc) = self.recovery.as_ref() else {
                return Ok(());
            };
            if inc != rc.page.incarnation(q) || rc.page.start_epoch(q) <= rc.my_start {
                tracing::warn!(
                    "refused a connection from {from}: rank {q} incarnation {inc} is not a newer process"
                );
                continue;
            }
            let reply = format!(
                "OK {} {} {} {}\n",
                rc.incarnation,
                self.core.recv_seq[q],
                u8::from(self.single_copy),
                rc.my_host
            );
            self.clear_rings(q, host);
            if let Err(why) = recovery::write_line(&mut s, &reply) {
                tracing::warn!("connection of rank {q} lost during the handshake: {why}");
                continue;
            }
            self.install_link(q, Connection::Tcp(s), received, single_copy, host)?;
        }
    }

    /// Does a process on `host` share this host's memory (and our
    /// mailboxes)?
    fn same_host(&self, host: usize) -> bool {
        self.recovery
            .as_ref()
            .is_some_and(|r| !r.transport_tcp && r.my_host == host)
    }

    /// Clear both rings of the pair (`q`, us) if it talks over shared
    /// memory. The accepting side does it, before its reply: our link to
    /// `q` is down (we write nothing), `q`'s old process is dead, and its
    /// new process waits for the reply before it touches either ring.
    fn clear_rings(&mut self, q: usize, host: usize) {
        let me = self.core.rank;
        let shm = self.same_host(host);
        if let (true, Some(own), Some(theirs)) =
            (shm, self.own.as_ref(), self.mailboxes[q].as_ref())
        {
            // SAFETY: both rings lie in live mappings and nobody uses them
            // now (see above).
            unsafe {
                crate::shm::ring::reset(own.ring(q), RING_CAPACITY);
                crate::shm::ring::reset(theirs.ring(me), RING_CAPACITY);
            }
        }
    }

    /// The link to `q` after the handshake: its rings (cleared by each
    /// side before its handshake line) on one host, else the connection.
    fn new_link(
        &mut self,
        q: usize,
        conn: Connection,
        single_copy: bool,
        host: usize,
    ) -> Result<(Link, bool)> {
        let stream = match conn {
            Connection::Tcp(s) => s,
            Connection::Sim(link) => return Ok((Link::Sim(link), false)),
        };
        let me = self.core.rank;
        let shm = self.same_host(host);
        if let (true, Some(own), Some(theirs)) =
            (shm, self.own.as_ref(), self.mailboxes[q].as_ref())
        {
            self.core.pids[q] = theirs.pid().load(std::sync::atomic::Ordering::Acquire) as i32;
            // SAFETY: as at join: ring `me` of q's mailbox is written only
            // by us and ring `q` of ours read only by us; both mappings
            // live as long as the engine.
            let (writer, reader) = unsafe {
                (
                    RingWriter::new(theirs.ring(me), RING_CAPACITY),
                    RingReader::new(own.ring(q), RING_CAPACITY),
                )
            };
            drop(stream);
            return Ok((
                Link::Shm { writer, reader },
                self.single_copy && single_copy,
            ));
        }
        let conn = TcpConn::new(stream)
            .map_err(|e| Error::Bootstrap(format!("connection to rank {q}: {e}")))?;
        Ok((Link::Tcp(conn), false))
    }

    /// A connection with `q`'s current process is up: `received` is how
    /// many of our messages it has (`single_copy`: it can read our
    /// memory). Re-send the rest from the log.
    pub(super) fn install_link(
        &mut self,
        q: usize,
        conn: Connection,
        received: u64,
        single_copy: bool,
        host: usize,
    ) -> Result<()> {
        self.drop_link(q);
        let (link, single_copy) = self.new_link(q, conn, single_copy, host)?;
        if let Some(rc) = self.recovery.as_mut() {
            rc.expect(q, false);
            rc.suppress[q] = received;
        }
        let logged = self
            .protocol
            .as_mut()
            .map(|p| p.logged_messages(q, received))
            .unwrap_or_default();
        // Which of q's synchronous messages wait here unmatched: a newer
        // process of q completes its re-executed synchronous sends by it.
        let unmatched: Vec<u64> = self
            .core
            .matching
            .unexpected_in_order()
            .into_iter()
            .filter(|(env, u)| {
                env.source == q && matches!(u, Unexpected::Eager { sync: Some(_), .. })
            })
            .map(|(env, _)| env.seq)
            .collect();
        let received_from_q = self.core.recv_seq[q];
        let Some(peer) = self.peers[q].as_mut() else {
            return Ok(());
        };
        peer.link = link;
        peer.single_copy = single_copy;
        peer.broken = false;
        for (expected, m) in (received + 1..).zip(&logged) {
            if m.seq != expected {
                return Err(Error::EngineFailed(format!(
                    "the sender log lacks message {expected} to rank {q} (next kept: {})",
                    m.seq
                )));
            }
            let data = RawBytes {
                ptr: m.ptr as *mut u8,
                len: m.len,
            };
            let token = peer.sync_waiting.get(&m.seq).copied();
            let item = if m.len <= EAGER_LIMIT {
                let mut hdr = message_header(kind::EAGER, m.tag, m.context, m.seq, m.len);
                if let Some(t) = token {
                    hdr.flags |= flags::SYNC;
                    hdr.aux0 = t;
                }
                Outgoing::Frame {
                    hdr,
                    data,
                    complete: None,
                }
            } else {
                let mut hdr = message_header(kind::FRAG, m.tag, m.context, m.seq, m.len);
                if let Some(t) = token {
                    hdr.flags |= flags::SYNC;
                    hdr.aux1 = t;
                }
                Outgoing::Fragments {
                    hdr,
                    data,
                    offset: 0,
                    complete: None,
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
        let control = |k: u8, seq: u64| {
            let mut hdr = FrameHeader::new(k);
            hdr.seq = seq;
            Outgoing::header_only(hdr)
        };
        for seq in unmatched {
            peer.pending.push_back(control(kind::SYNC_UNMATCHED, seq));
        }
        peer.pending
            .push_back(control(kind::SYNC_STATE_END, received_from_q));
        tracing::info!(
            rank = self.core.rank,
            peer = q,
            resent = logged.len(),
            "link to a restarted process is up"
        );
        self.push_pending(q);
        Ok(())
    }

    /// Save a checkpoint (see [`crate::Comm::checkpoint`]). False without
    /// a protocol (nothing to restart from, nothing saved).
    pub(crate) fn checkpoint(&mut self, app: &[u8]) -> Result<bool> {
        self.check_alive()?;
        if self.protocol.is_none() {
            return Ok(false);
        }
        if self.core.slots.iter().any(|s| s.in_use) {
            return Err(Error::RequestState(
                "checkpoint while a request is in flight (complete every request first)",
            ));
        }
        // Our frames to live peers leave first: an acknowledgement still
        // queued here would be lost with a crash after the checkpoint.
        self.wait_until(|e| {
            e.peers
                .iter()
                .flatten()
                .all(|p| p.broken || (p.pending.is_empty() && p.link.unsent() == 0))
        })?;
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
        let snap = EngineSnapshot {
            last_call: self.last_call,
            next_context: self.next_context,
            send_seq: self.send_seq.clone(),
            recv_seq: self.core.recv_seq.clone(),
            unexpected,
        };
        let frees = self.hook(|p| p.checkpoint(&snap, app))?.unwrap_or_default();
        let me = self.core.rank;
        for (peer, up_to) in frees {
            if up_to == 0 {
                continue;
            }
            if peer == me {
                self.hook(|p| p.free_log(me, up_to))?;
            } else {
                let mut hdr = crate::shm::ring::FrameHeader::new(kind::GC);
                hdr.seq = up_to;
                self.core.control_out.push((peer, hdr));
            }
        }
        self.flush_control();
        self.last_checkpoint = Instant::now();
        Ok(true)
    }

    /// [`Engine::checkpoint`] if `interval` has passed since the last one
    /// (or since the start).
    pub(crate) fn checkpoint_due(&self, interval: Duration) -> bool {
        self.protocol.is_some() && self.last_checkpoint.elapsed() >= interval
    }

    /// The application state of the checkpoint this process restarted from.
    pub(crate) fn restart_state(&self) -> Option<Vec<u8>> {
        self.protocol.as_ref().and_then(|p| p.restart_state())
    }

    /// This process is a restarted incarnation (not the first start).
    pub(crate) fn incarnation(&self) -> u32 {
        self.recovery.as_ref().map_or(0, |r| r.incarnation)
    }

    /// Tell the protocol which senders checkpointed.
    pub(super) fn apply_gc_notices(&mut self) -> Result<()> {
        if self.core.gc_notices.is_empty() {
            return Ok(());
        }
        let notices = std::mem::take(&mut self.core.gc_notices);
        for (peer, up_to) in notices {
            self.hook(|p| p.free_log(peer, up_to))?;
        }
        Ok(())
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
    /// restarted process is expected.
    pub(super) fn idle_fds(&self) -> Option<libc::pollfd> {
        use std::os::fd::AsRawFd;
        let rc = self.recovery.as_ref()?;
        let Rendezvous::Tcp(listener) = &rc.rendezvous else {
            return None;
        };
        (rc.expected > 0).then(|| libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
    }

    /// Re-executed sends up to this sequence number were already received
    /// (and a replayed rank transmits nothing).
    pub(super) fn suppressed(&self, dest: usize, seq: u64) -> bool {
        self.replay_alone
            || self
                .recovery
                .as_ref()
                .is_some_and(|r| seq <= r.suppress[dest])
    }
}
