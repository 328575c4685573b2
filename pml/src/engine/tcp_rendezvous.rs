//! How a restarted process links to the running ranks over TCP (and, on
//! one host, back onto shared memory): it looks up each earlier process's
//! recovery listener in the launcher's key/value store, connects and says
//! hello (its rank, incarnation, how many of the peer's messages it has);
//! the peer checks the greeting against the job page, answers with how
//! many of the restarted process's messages it has, and both install the
//! link ([`Engine::install_link`] re-sends what the other lacks). The
//! simulator's form of the same handshake is `sim_rendezvous.rs`.

use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::{Connection, Engine, Link, Rendezvous};
use crate::error::{Error, Result};
use crate::lanes::LaneMap;
use crate::recovery;
use crate::shm::mailbox::RING_CAPACITY;
use crate::shm::ring::{RingReader, RingWriter};
use crate::tcp::TcpConn;

/// How long a restarted process waits for an earlier process to publish
/// its address.
const ADDRESS_WAIT: Duration = Duration::from_secs(60);

/// A link a restarted process set up with an earlier process.
pub(super) struct Linked {
    pub(super) conn: Connection,
    /// How many of our messages on each context it has.
    pub(super) received: LaneMap<u64>,
    /// Whether it can read our memory.
    pub(super) single_copy: bool,
    /// The host it runs on.
    pub(super) host: usize,
    /// It is settled ([`Engine::settled_for`]): no durable event of any of
    /// its processes names a message of ours it does not hold (see
    /// [`crate::protocol::Protocol::peer_holds`]).
    pub(super) settled: bool,
}

impl Engine {
    /// Connect to incarnation `inc` of `q`. `Ok(None)` if it was restarted
    /// meanwhile (its new process connects to us).
    pub(super) fn connect_to(
        &mut self,
        q: usize,
        inc: u32,
    ) -> std::result::Result<Option<Linked>, String> {
        if let Some(Rendezvous::Sim(_)) = self.recovery.as_ref().map(|r| &r.rendezvous) {
            return Ok(self.sim_connect_to(q, inc));
        }
        let me = self.core.rank;
        let received = self.core.recv_seq[q].clone();
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
        let hello = recovery::hello_line(&rc.token, me, rc.incarnation, single_copy, rc.my_host);
        let counts = recovery::format_counts(&received);
        recovery::write_line(&mut s, &format!("{hello}{counts}\n"))?;
        let page = &rc.page;
        let reply =
            recovery::read_line(&mut s, recovery::MAX_HELLO, || page.incarnation(q) == inc)?;
        let mut parts = reply.split(' ');
        if parts.next() != Some("OK") {
            return Err(format!("refused: {reply}"));
        }
        let their_inc: Option<u32> = parts.next().and_then(|v| v.parse().ok());
        let their_copy = parts.next();
        let their_host: Option<usize> = parts.next().and_then(|v| v.parse().ok());
        // (Unsaid: not settled, the safe answer.)
        let settled = parts.next() == Some("1");
        let (Some(i), Some(c @ ("0" | "1")), Some(h)) = (their_inc, their_copy, their_host) else {
            return Err(format!("bad reply {reply:?}"));
        };
        if i != inc {
            return Err(format!("bad reply {reply:?}"));
        }
        let line =
            recovery::read_line(&mut s, recovery::MAX_COUNTS, || page.incarnation(q) == inc)?;
        let r = recovery::parse_counts(&line).map_err(|why| format!("bad reply: {why}"))?;
        Ok(Some(Linked {
            conn: Connection::Tcp(s),
            received: r,
            single_copy: c == "1",
            host: h,
            settled,
        }))
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
            let mut alive = || {
                tries += 1;
                tries < 50
            };
            let line = recovery::read_line(&mut s, recovery::MAX_HELLO, &mut alive);
            let hello = line.and_then(|l| recovery::parse_hello(&l, &rc.token, self.size));
            // The job's token was shown: the counts may be long.
            let counts = hello.and_then(|h| {
                let line = recovery::read_line(&mut s, recovery::MAX_COUNTS, &mut alive)?;
                Ok((h, recovery::parse_counts(&line)?))
            });
            let (
                recovery::Hello {
                    rank: q,
                    incarnation: inc,
                    single_copy,
                    host,
                },
                received,
            ) = match counts {
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
                "OK {} {} {} {}\n{}\n",
                rc.incarnation,
                u8::from(self.single_copy),
                rc.my_host,
                u8::from(self.settled_for(q)),
                recovery::format_counts(&self.core.recv_seq[q]),
            );
            self.clear_rings(q, host);
            if let Err(why) = recovery::write_line(&mut s, &reply) {
                tracing::warn!("connection of rank {q} lost during the handshake: {why}");
                continue;
            }
            // (A newer process is itself re-executing: not settled.)
            self.install_link(q, Connection::Tcp(s), received, single_copy, host, false)?;
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
    pub(super) fn new_link(
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
}
