//! How a restarted process links to the running ranks over TCP (and, on
//! one host, back onto shared memory): it looks up each earlier process's
//! recovery listener in the launcher's key/value store, connects and says
//! hello (its rank, incarnation, how many of the peer's messages it has);
//! the peer checks the greeting against the job page, answers with how
//! many of the restarted process's messages it has, and both install the
//! link ([`Engine::install_link`] re-sends what the other lacks). The
//! simulator's form of the same handshake is `sim_rendezvous.rs`.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
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

/// How long a connection to the recovery listener may stay silent in its
/// handshake (a restarted process sends it at once).
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(5);
/// At most this many handshakes beyond the job's size are read at once
/// (every other rank may restart together); a new connection beyond drops
/// the oldest that sent nothing, else the oldest.
const MAX_HANDSHAKES: usize = 16;

/// A connection to the recovery listener whose two handshake lines (hello,
/// then counts) have not all come: read as bytes arrive.
pub(super) struct Handshake {
    stream: TcpStream,
    from: SocketAddr,
    bytes: Vec<u8>,
    /// When it was accepted or last sent bytes.
    heard: Instant,
    /// How far `bytes` was searched for a line's end.
    scanned: usize,
    /// The hello line, checked (token included).
    hello: Option<recovery::Hello>,
}

/// Where a [`Handshake`] stands.
enum Step {
    Waiting,
    Done(recovery::Hello, LaneMap<u64>),
    Refused(String),
}

impl Handshake {
    fn new(stream: TcpStream, from: SocketAddr) -> Handshake {
        Handshake {
            stream,
            from,
            bytes: Vec::new(),
            heard: Instant::now(),
            scanned: 0,
            hello: None,
        }
    }

    /// Its descriptor, to wait for its bytes.
    pub(super) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Read what came and act on each complete line. Before its hello
    /// (and token) checked out, a connection may send [`recovery::MAX_HELLO`]
    /// bytes only; the counts may be long.
    fn advance(&mut self, token: &str, size: usize) -> Step {
        let mut chunk = [0u8; 4096];
        loop {
            let limit = match self.hello {
                None => recovery::MAX_HELLO + 1,
                Some(_) => recovery::MAX_COUNTS + 1,
            };
            // (Only the bytes not searched yet: a counts line may be long.)
            let from = self.scanned;
            let newline = self.bytes[from..]
                .iter()
                .position(|&b| b == b'\n')
                .map(|n| from + n);
            self.scanned = self.bytes.len();
            if let Some(end) = newline {
                let line = String::from_utf8_lossy(&self.bytes[..end]).into_owned();
                self.bytes.drain(..=end);
                self.scanned = 0;
                match self.hello.take() {
                    None => match recovery::parse_hello(&line, token, size) {
                        Ok(h) => {
                            self.hello = Some(h);
                            continue;
                        }
                        Err(why) => return Step::Refused(why),
                    },
                    Some(h) => {
                        if let Err(e) = self.stream.set_nonblocking(false) {
                            return Step::Refused(format!("handshake: {e}"));
                        }
                        return match recovery::parse_counts(&line) {
                            Ok(counts) => Step::Done(h, counts),
                            Err(why) => Step::Refused(why),
                        };
                    }
                }
            }
            if self.bytes.len() >= limit {
                return Step::Refused("handshake line too long".into());
            }
            let room = (limit - self.bytes.len()).min(chunk.len());
            match std::io::Read::read(&mut self.stream, &mut chunk[..room]) {
                Ok(0) => return Step::Refused("closed during the handshake".into()),
                Ok(n) => {
                    self.bytes.extend_from_slice(&chunk[..n]);
                    self.heard = Instant::now();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Waiting,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Step::Refused(format!("handshake: {e}")),
            }
        }
    }
}

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

    /// Accept connections of restarted processes (only while one is
    /// expected) and advance their handshakes with the bytes that came,
    /// never waiting for more: a silent or slow connection delays no one,
    /// and is dropped after [`HANDSHAKE_DEADLINE`] or when
    /// [`MAX_HANDSHAKES`] newer ones wait.
    pub(super) fn accept_restarted(&mut self) -> Result<()> {
        loop {
            // One new connection at a time, then a look at every
            // handshake: what came is read before any is dropped.
            let accepted = self.accept_one()?;
            self.advance_handshakes()?;
            let size = self.size;
            let Some(rc) = self.recovery.as_mut() else {
                return Ok(());
            };
            if rc.handshakes.len() > MAX_HANDSHAKES + size {
                // The oldest that sent nothing, else the oldest.
                let i = rc
                    .handshakes
                    .iter()
                    .position(|h| h.bytes.is_empty() && h.hello.is_none())
                    .unwrap_or(0);
                let h = rc.handshakes.remove(i);
                tracing::warn!(
                    "refused a connection from {}: too many handshakes at once",
                    h.from
                );
            }
            if !accepted {
                return Ok(());
            }
        }
    }

    /// Accept one waiting connection of the recovery listener as a
    /// handshake (while a restarted process is expected): whether there
    /// was one.
    fn accept_one(&mut self) -> Result<bool> {
        loop {
            let Some(rc) = self.recovery.as_mut() else {
                return Ok(false);
            };
            if rc.expected == 0 {
                rc.handshakes.clear();
                return Ok(false);
            }
            let listener = match &rc.rendezvous {
                Rendezvous::Tcp(l) => l,
                Rendezvous::Sim(_) => {
                    self.sim_accept_restarted()?;
                    return Ok(false);
                }
            };
            match listener.accept() {
                Ok((s, from)) => {
                    if let Err(e) = s.set_nonblocking(true) {
                        tracing::warn!("refused a connection from {from}: {e}");
                        continue;
                    }
                    rc.handshakes.push(Handshake::new(s, from));
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("recovery listener: {e}");
                    return Ok(false);
                }
            }
        }
    }

    /// Read what came on every handshake; answer the complete ones, drop
    /// the refused ones and those silent for [`HANDSHAKE_DEADLINE`].
    fn advance_handshakes(&mut self) -> Result<()> {
        let mut i = 0;
        loop {
            let size = self.size;
            let Some(rc) = self.recovery.as_mut() else {
                return Ok(());
            };
            let Some(h) = rc.handshakes.get_mut(i) else {
                return Ok(());
            };
            match h.advance(&rc.token, size) {
                Step::Waiting if h.heard.elapsed() < HANDSHAKE_DEADLINE => i += 1,
                Step::Waiting => {
                    let h = rc.handshakes.remove(i);
                    tracing::warn!(
                        "refused a connection from {}: silent for {} s in its handshake",
                        h.from,
                        HANDSHAKE_DEADLINE.as_secs()
                    );
                }
                Step::Refused(why) => {
                    let h = rc.handshakes.remove(i);
                    tracing::warn!("refused a connection from {}: {why}", h.from);
                }
                Step::Done(hello, received) => {
                    let h = rc.handshakes.remove(i);
                    self.answer_restarted(h.stream, h.from, hello, received)?;
                }
            }
        }
    }

    /// Answer the handshake of a restarted process and link to it.
    fn answer_restarted(
        &mut self,
        mut s: TcpStream,
        from: SocketAddr,
        hello: recovery::Hello,
        received: LaneMap<u64>,
    ) -> Result<()> {
        let recovery::Hello {
            rank: q,
            incarnation: inc,
            single_copy,
            host,
        } = hello;
        // The page may announce the restart only now.
        self.notice_restarts();
        let Some(rc) = self.recovery.as_ref() else {
            return Ok(());
        };
        if inc != rc.page.incarnation(q) || rc.page.start_epoch(q) <= rc.my_start {
            tracing::warn!(
                "refused a connection from {from}: rank {q} incarnation {inc} is not a newer process"
            );
            return Ok(());
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
            return Ok(());
        }
        // (A newer process is itself re-executing: not settled.)
        self.install_link(q, Connection::Tcp(s), received, single_copy, host, false)
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    use super::*;

    const TOKEN: &str = "handshake-test-token";

    /// A handshake on a real connection, and the connecting side.
    fn pair() -> (Handshake, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("listen");
        let client = TcpStream::connect(l.local_addr().expect("address")).expect("connect");
        let (s, from) = l.accept().expect("accept");
        s.set_nonblocking(true).expect("nonblocking");
        (Handshake::new(s, from), client)
    }

    /// Look until the handshake is decided (the bytes are on their way
    /// over loopback; 20 s bounds a bug).
    fn decided(h: &mut Handshake) -> Step {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            match h.advance(TOKEN, 4) {
                Step::Waiting if Instant::now() < end => std::thread::yield_now(),
                Step::Waiting => panic!("no decision in 20 s"),
                other => return other,
            }
        }
    }

    #[test]
    fn a_silent_or_slow_peer_is_never_waited_for() {
        let (mut h, mut client) = pair();
        // Nothing sent: the rank goes on at once.
        assert!(matches!(h.advance(TOKEN, 4), Step::Waiting));
        // Byte by byte, each look takes what came and returns.
        let hello = recovery::hello_line(TOKEN, 2, 1, false, 0);
        let (first, rest) = hello.split_at(7);
        client.write_all(first.as_bytes()).expect("send");
        client.flush().expect("flush");
        let end = Instant::now() + Duration::from_secs(20);
        while h.bytes.len() < first.len() {
            assert!(matches!(h.advance(TOKEN, 4), Step::Waiting));
            assert!(Instant::now() < end, "the first bytes never came");
        }
        client.write_all(rest.as_bytes()).expect("send");
        client.write_all(b"5:12,7:3\n").expect("send");
        match decided(&mut h) {
            Step::Done(hello, counts) => {
                assert_eq!((hello.rank, hello.incarnation), (2, 1));
                assert_eq!((counts.get(5), counts.get(7), counts.get(6)), (12, 3, 0));
            }
            Step::Waiting => unreachable!(),
            Step::Refused(why) => panic!("refused: {why}"),
        }
    }

    #[test]
    fn strangers_are_refused_before_they_may_send_much() {
        let refused = |bytes: &[u8]| {
            let (mut h, mut client) = pair();
            client.write_all(bytes).expect("send");
            match decided(&mut h) {
                Step::Refused(why) => why,
                _ => panic!("accepted {bytes:?}"),
            }
        };
        assert_eq!(
            refused(&[b'x'; recovery::MAX_HELLO + 1]),
            "handshake line too long"
        );
        let wrong = recovery::hello_line("another-token-entirely", 2, 1, false, 0);
        assert_eq!(refused(wrong.as_bytes()), "wrong job token");
        assert_eq!(
            refused(b"GET / HTTP/1.1\r\n"),
            "not a vpml recovery connection"
        );
    }
}
