//! TCP transport: one connection per pair of ranks carrying the same frames
//! as the shared-memory rings (a 64-byte [`FrameHeader`] whose `frame_len`
//! is 64 + payload bytes, then the payload), nonblocking, `TCP_NODELAY`.
//!
//! Large messages go as fragments of up to [`MAX_FRAME_PAYLOAD`] bytes
//! (there is no single-copy read across a socket). A fragment leaves from
//! the sender's memory (see [`DIRECT_PAYLOAD`]), and a fragment whose
//! payload is still arriving when its header has is read from the socket
//! straight into the receive's buffer ([`TcpConn::start_direct`]): the
//! bytes are copied by the kernel only.
//!
//! Connections are set up during bootstrap through the launcher's
//! key/value exchange: every rank listens on the interface that reaches the
//! launcher (loopback on one host), publishes its address, connects to
//! the ranks below it and accepts the ranks above it; each connection
//! starts with the job token and the connecting rank, and a connection with
//! a wrong token is refused (and logged) without affecting the job.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use crate::bootstrap::{JobEnv, KvClient};
use crate::error::{Error, Result};
use crate::shm::ring::{FrameHeader, HEADER_LEN, kind};

/// Largest payload of one frame on a connection.
pub(crate) const MAX_FRAME_PAYLOAD: usize = 256 * 1024;
/// Bytes a writer may queue before `try_write` reports "full" for a
/// small frame.
const MAX_QUEUED: usize = 8 << 20;
/// Fragments of large messages with at least this many payload bytes are
/// accepted only when nothing is queued: they go from the sender's memory
/// straight to the socket, and only the part the socket did not take is
/// copied. The rest wait in the engine's queue, still in the sender's
/// memory, instead of being copied into `out` first.
const DIRECT_PAYLOAD: usize = 8 * 1024;
/// Receive buffer: room for many small frames per read; a partial frame is
/// moved to the front when less than a largest frame's room is left.
const INBUF: usize = 1 << 20;
/// Most bytes one read takes into `inbuf`. Reading stops at the header of
/// a large fragment still arriving, so at most a chunk or two of its
/// payload lands in `inbuf` (one read when its header came, one when it
/// reached `start`); the rest is read straight into its receive
/// (`start_direct`). Reading all the socket has at once would take whole
/// fragments into `inbuf`, to be copied out again.
const READ_CHUNK: usize = 64 * 1024;
/// How long bootstrap waits for connections.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// One end of a rank-to-rank connection.
pub(crate) struct TcpConn {
    stream: TcpStream,
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
    out: Vec<u8>,
    out_pos: usize,
    closed: bool,
    /// The last read found the socket empty: look before reading again.
    drained: bool,
    /// A fragment's payload being read straight into a receive's buffer.
    direct: Option<DirectRead>,
}

/// The payload of the frame `hdr` going to `dst` (`len` bytes, `done` of
/// them there).
struct DirectRead {
    hdr: FrameHeader,
    dst: *mut u8,
    len: usize,
    done: usize,
}

impl TcpConn {
    pub(crate) fn new(stream: TcpStream) -> std::io::Result<TcpConn> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(TcpConn {
            stream,
            inbuf: vec![0; INBUF],
            start: 0,
            end: 0,
            out: Vec::new(),
            out_pos: 0,
            closed: false,
            drained: false,
            direct: None,
        })
    }

    /// The socket, for `poll`.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// Bytes queued but not yet written to the socket.
    pub(crate) fn queued(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Room for a frame of kind `k` with `payload` bytes? (See
    /// [`DIRECT_PAYLOAD`].)
    pub(crate) fn has_room(&mut self, k: u8, payload: usize) -> bool {
        let limit = if k == kind::FRAG && payload >= DIRECT_PAYLOAD {
            0
        } else {
            MAX_QUEUED
        };
        if self.queued() > limit {
            self.flush();
        }
        self.queued() <= limit
    }

    /// Queue one frame and start writing it. False if too much is queued.
    pub(crate) fn try_write(&mut self, hdr: &FrameHeader, payload: &[u8]) -> bool {
        if !self.has_room(hdr.kind, payload.len()) {
            return false;
        }
        let mut h = *hdr;
        h.frame_len = (HEADER_LEN + payload.len()) as u32;
        let mut raw = [0u8; HEADER_LEN];
        // SAFETY: FrameHeader is a plain repr(C) struct of integers no larger
        // than HEADER_LEN; copying its bytes is a valid serialisation.
        unsafe {
            std::ptr::copy_nonoverlapping(
                &h as *const FrameHeader as *const u8,
                raw.as_mut_ptr(),
                std::mem::size_of::<FrameHeader>(),
            );
        }
        // With nothing queued, write straight from the caller's bytes and
        // queue only what the socket did not take.
        let mut skip = 0;
        if self.queued() == 0 && !self.closed {
            loop {
                let parts = [std::io::IoSlice::new(&raw), std::io::IoSlice::new(payload)];
                match self.stream.write_vectored(&parts) {
                    Ok(n) => skip = n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => {
                        tracing::debug!("tcp write failed: {e}");
                        self.closed = true;
                    }
                }
                break;
            }
        }
        if skip < HEADER_LEN {
            self.out.extend_from_slice(&raw[skip..]);
            self.out.extend_from_slice(payload);
        } else {
            self.out.extend_from_slice(&payload[skip - HEADER_LEN..]);
        }
        self.flush();
        true
    }

    /// Write as much queued output as the socket takes now.
    pub(crate) fn flush(&mut self) {
        while self.out_pos < self.out.len() && !self.closed {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => self.closed = true,
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // The peer is gone; the launcher deals with dead ranks.
                    tracing::debug!("tcp write failed: {e}");
                    self.closed = true;
                }
            }
        }
        if self.closed || self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        } else if self.out_pos > MAX_QUEUED {
            self.out.drain(..self.out_pos);
            self.out_pos = 0;
        }
    }

    fn fill(&mut self) {
        if self.closed {
            return;
        }
        if self.start > 0
            && (self.start == self.end
                || self.inbuf.len() - self.end < HEADER_LEN + MAX_FRAME_PAYLOAD)
        {
            self.inbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        // Frames from `scan` on may be incomplete (all before it are not).
        let mut scan = self.start;
        loop {
            let room = (self.inbuf.len() - self.end).min(READ_CHUNK);
            let chunk = &mut self.inbuf[self.end..self.end + room];
            let Some(n) = read_some(&mut self.stream, &mut self.closed, &mut self.drained, chunk)
            else {
                return;
            };
            self.end += n;
            while let Some(h) = self.header_at(scan) {
                let len = h.frame_len as usize;
                if len < HEADER_LEN || scan + len > self.end {
                    break;
                }
                scan += len;
            }
            // A large fragment whose payload is still coming: leave the
            // rest in the socket, for the engine to read it straight into
            // its receive (`start_direct`). A short read took all the
            // socket had.
            let large_coming = self
                .header_at(scan)
                .is_some_and(|h| large_fragment(&h) && scan + h.frame_len as usize > self.end);
            if n < room || self.end == self.inbuf.len() || large_coming {
                return;
            }
        }
    }

    fn header(&self) -> Option<FrameHeader> {
        self.header_at(self.start)
    }

    /// The header of the frame buffered at `at`, if all of it is there.
    fn header_at(&self, at: usize) -> Option<FrameHeader> {
        if self.end < at + HEADER_LEN {
            return None;
        }
        // SAFETY: HEADER_LEN bytes are buffered at `at`; read_unaligned
        // copies them into a plain integer struct (any bit pattern is valid).
        Some(unsafe { std::ptr::read_unaligned(self.inbuf[at..].as_ptr() as *const FrameHeader) })
    }

    /// Is a whole frame buffered?
    pub(crate) fn has_frame(&self) -> bool {
        self.direct.is_none()
            && self.header().is_some_and(|h| {
                (h.frame_len as usize) <= self.end - self.start
                    && h.frame_len as usize >= HEADER_LEN
            })
    }

    /// The next complete frame's header, reading what the socket has.
    pub(crate) fn peek(&mut self) -> std::result::Result<Option<FrameHeader>, String> {
        self.flush();
        if self.direct.is_some() {
            // The stream is inside a payload read directly.
            return Ok(None);
        }
        if !self.has_frame() {
            self.fill();
        }
        let Some(h) = self.header() else {
            return Ok(None);
        };
        let len = h.frame_len as usize;
        if !(HEADER_LEN..=HEADER_LEN + MAX_FRAME_PAYLOAD).contains(&len) {
            return Err(format!("frame length {len} out of bounds"));
        }
        if self.end - self.start < len {
            return Ok(None);
        }
        Ok(Some(h))
    }

    /// The first `len` payload bytes of the current frame.
    pub(crate) fn payload(
        &self,
        hdr: &FrameHeader,
        len: usize,
    ) -> std::result::Result<&[u8], String> {
        if HEADER_LEN + len > hdr.frame_len as usize {
            return Err(format!(
                "payload of {len} bytes does not fit a {}-byte frame",
                hdr.frame_len
            ));
        }
        let at = self.start + HEADER_LEN;
        Ok(&self.inbuf[at..at + len])
    }

    /// The header of the next frame if it is a fragment of at least
    /// [`DIRECT_PAYLOAD`] bytes whose payload has not all arrived: it can
    /// go straight where it belongs ([`TcpConn::start_direct`]).
    pub(crate) fn incomplete_fragment(&self) -> Option<FrameHeader> {
        if self.direct.is_some() {
            return None;
        }
        let h = self.header()?;
        (large_fragment(&h) && self.end - self.start < h.frame_len as usize).then_some(h)
    }

    /// Read the payload of the frame [`TcpConn::incomplete_fragment`]
    /// returned into `dst`: what is buffered now, the rest straight from
    /// the socket as it comes ([`TcpConn::continue_direct`]).
    ///
    /// # Safety
    /// `dst` is valid for writes of the frame's payload bytes, and nothing
    /// else uses them, until `continue_direct` returned the header or the
    /// connection is dropped or abandoned ([`TcpConn::abandon_direct`]).
    pub(crate) unsafe fn start_direct(&mut self, hdr: FrameHeader, dst: *mut u8) {
        let len = hdr.frame_len as usize - HEADER_LEN;
        let have = self.end - self.start - HEADER_LEN;
        debug_assert!(have < len);
        // SAFETY: the caller's contract; `have` < `len` buffered bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.inbuf[self.start + HEADER_LEN..].as_ptr(), dst, have)
        };
        // Everything buffered belonged to this frame.
        self.start = 0;
        self.end = 0;
        self.direct = Some(DirectRead {
            hdr,
            dst,
            len,
            done: have,
        });
    }

    /// Go on with a direct read: its frame's header once the whole payload
    /// is in place (the frame is then consumed). Queued output goes on
    /// too: the peer may be waiting for it before it sends the rest.
    pub(crate) fn continue_direct(&mut self) -> Option<FrameHeader> {
        self.flush();
        let d = self.direct.as_mut()?;
        while d.done < d.len {
            // SAFETY: `start_direct`'s contract; done < len.
            let rest = unsafe { std::slice::from_raw_parts_mut(d.dst.add(d.done), d.len - d.done) };
            match read_some(&mut self.stream, &mut self.closed, &mut self.drained, rest) {
                Some(n) => d.done += n,
                None => break,
            }
        }
        if d.done < d.len {
            return None;
        }
        let hdr = d.hdr;
        self.direct = None;
        Some(hdr)
    }

    /// Is a direct read under way?
    pub(crate) fn direct_pending(&self) -> bool {
        self.direct.is_some()
    }

    /// Forget a direct read (its buffer is gone); the stream, left inside
    /// a frame, is unusable from then on.
    pub(crate) fn abandon_direct(&mut self) {
        if self.direct.take().is_some() {
            self.closed = true;
        }
    }

    /// Drop the current frame.
    pub(crate) fn consume(&mut self, hdr: &FrameHeader) {
        self.start += hdr.frame_len as usize;
        if self.start >= self.end {
            self.start = 0;
            self.end = 0;
        }
    }
}

/// Is `h` a fragment large enough to be read straight into its receive
/// ([`DIRECT_PAYLOAD`]), all of its frame payload?
fn large_fragment(h: &FrameHeader) -> bool {
    let len = h.frame_len as usize;
    h.kind == kind::FRAG
        && (HEADER_LEN + DIRECT_PAYLOAD..=HEADER_LEN + MAX_FRAME_PAYLOAD).contains(&len)
        && h.aux0 == (len - HEADER_LEN) as u64
}

/// One read of what `stream` has into `buf` (not empty): the bytes read,
/// or `None` when nothing is there now or the connection ended (`closed`
/// is then set; the launcher deals with dead ranks).
///
/// Once a read found the socket empty (`drained`), a poll without timeout
/// looks before the next: unlike a read it does not take the socket's
/// lock, so a rank spinning for a message does not hold up the kernel
/// delivering that message into the socket (a 1 MiB ping-pong over
/// loopback was 1.3x slower with reads alone).
fn read_some(
    stream: &mut TcpStream,
    closed: &mut bool,
    drained: &mut bool,
    buf: &mut [u8],
) -> Option<usize> {
    if *drained && !*closed {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if poll(&mut [PollFd::new(&*stream, PollFlags::IN)], Some(&now)) == Ok(0) {
            return None;
        }
    }
    while !*closed {
        match stream.read(buf) {
            Ok(0) => *closed = true,
            Ok(n) => {
                *drained = false;
                return Some(n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                *drained = true;
                return None;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!("tcp read failed: {e}");
                *closed = true;
            }
        }
    }
    None
}

/// Connect every pair of ranks (see the module docs). Returns the
/// connection to each peer by rank (`None` for ourselves).
pub(crate) fn connect_all(env: &JobEnv, kv: &mut KvClient) -> Result<Vec<Option<TcpConn>>> {
    let io = |what: &str| {
        let what = what.to_string();
        move |e: std::io::Error| Error::Bootstrap(format!("tcp {what}: {e}"))
    };
    // The interface that reaches the launcher reaches the other hosts.
    let listener = TcpListener::bind((kv.local_ip(), 0)).map_err(io("listen"))?;
    let addr = listener.local_addr().map_err(io("listen"))?;
    kv.put(&format!("tcp.{}", env.rank), &addr.to_string())?;
    kv.fence()?;
    let mut conns: Vec<Option<TcpConn>> = (0..env.size).map(|_| None).collect();
    for (peer, slot) in conns.iter_mut().enumerate().take(env.rank) {
        if !env.over_tcp(env.rank, peer) {
            continue;
        }
        let a = kv
            .get(&format!("tcp.{peer}"))?
            .ok_or_else(|| Error::Bootstrap(format!("rank {peer} published no tcp address")))?;
        let mut s =
            TcpStream::connect(&a).map_err(io(&format!("connect to rank {peer} at {a}")))?;
        s.write_all(format!("VPMLTCP1 {} {}\n", env.token, env.rank).as_bytes())
            .map_err(io("handshake"))?;
        *slot = Some(TcpConn::new(s).map_err(io("setup"))?);
    }
    listener.set_nonblocking(true).map_err(io("listen"))?;
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut missing = (env.rank + 1..env.size)
        .filter(|&p| env.over_tcp(env.rank, p))
        .count();
    while missing > 0 {
        match listener.accept() {
            Ok((s, from)) => match handshake(s, env) {
                Ok((peer, s))
                    if peer > env.rank && conns[peer].is_none() && env.over_tcp(env.rank, peer) =>
                {
                    conns[peer] = Some(TcpConn::new(s).map_err(io("setup"))?);
                    missing -= 1;
                }
                Ok((peer, _)) => {
                    tracing::warn!("refused a second connection claiming rank {peer} from {from}")
                }
                Err(why) => tracing::warn!("refused a connection from {from}: {why}"),
            },
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(Error::Bootstrap(format!(
                        "tcp: {missing} rank(s) did not connect within {} s",
                        CONNECT_TIMEOUT.as_secs()
                    )));
                }
                // Wait for the next connection attempt (not a busy loop).
                use rustix::event::{PollFd, PollFlags, Timespec, poll};
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_secs(1));
                let left = Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: left.subsec_nanos().into(),
                };
                // Woken, timed out or interrupted: accept again either way.
                let _ = poll(&mut [PollFd::new(&listener, PollFlags::IN)], Some(&left));
            }
            Err(e) => return Err(io("accept")(e)),
        }
    }
    Ok(conns)
}

/// Read and check `VPMLTCP1 <token> <rank>\n` (bounded in size and time).
fn handshake(mut s: TcpStream, env: &JobEnv) -> std::result::Result<(usize, TcpStream), String> {
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 256 {
        match s.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => line.push(byte[0]),
            Ok(_) => return Err("closed during the handshake".into()),
            Err(e) => return Err(format!("handshake: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&line);
    let mut parts = text.split(' ');
    if parts.next() != Some("VPMLTCP1") {
        return Err("not a vpml connection".into());
    }
    if parts.next() != Some(env.token.as_str()) {
        return Err("wrong job token".into());
    }
    let rank: usize = parts
        .next()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r < env.size)
        .ok_or("bad rank")?;
    s.set_read_timeout(None).map_err(|e| e.to_string())?;
    Ok((rank, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(token: &str) -> JobEnv {
        JobEnv {
            job_id: "j".into(),
            rank: 0,
            size: 4,
            kv_addr: String::new(),
            token: token.into(),
            mailbox_fds: vec![],
            local_size: 4,
            host_cores: 2,
            transport_tcp: true,
            host_of: vec![0; 4],
            job_page_fd: None,
            incarnation: 0,
            restart_from: 0,
        }
    }

    fn attempt(line: &[u8]) -> std::result::Result<usize, String> {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.write_all(line).unwrap();
        let (s, _) = l.accept().unwrap();
        handshake(s, &env("right-token")).map(|(r, _)| r)
    }

    #[test]
    fn connections_must_present_the_job_token_and_a_rank_of_the_job() {
        assert_eq!(attempt(b"VPMLTCP1 right-token 3\n"), Ok(3));
        assert_eq!(
            attempt(b"VPMLTCP1 wrong-token 3\n"),
            Err("wrong job token".into())
        );
        assert_eq!(attempt(b"VPMLTCP1 right-token 9\n"), Err("bad rank".into()));
        assert_eq!(
            attempt(b"GET / HTTP/1.0\n"),
            Err("not a vpml connection".into())
        );
    }

    /// The bytes of frame `h` with `payload` as `try_write` sends them.
    fn frame_bytes(h: &FrameHeader, payload: &[u8]) -> Vec<u8> {
        let mut h = *h;
        h.frame_len = (HEADER_LEN + payload.len()) as u32;
        let mut out = vec![0u8; HEADER_LEN];
        // SAFETY: as in `try_write`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                &h as *const FrameHeader as *const u8,
                out.as_mut_ptr(),
                std::mem::size_of::<FrameHeader>(),
            );
        }
        out.extend_from_slice(payload);
        out
    }

    /// Read from `rx` until `f` gives something (the bytes were written to
    /// loopback already; each try reads what arrived).
    fn until<T>(rx: &mut TcpConn, mut f: impl FnMut(&mut TcpConn) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(v) = f(rx) {
                return v;
            }
            assert!(Instant::now() < deadline, "loopback bytes never arrived");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_large_fragment_still_arriving_is_read_straight_into_its_destination() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let mut rx = TcpConn::new(b).unwrap();
        let payload: Vec<u8> = (0..MAX_FRAME_PAYLOAD)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let mut h = FrameHeader::new(kind::FRAG);
        h.seq = 5;
        h.aux0 = payload.len() as u64;
        let bytes = frame_bytes(&h, &payload);
        // The header and a first part: the fragment is seen, incomplete,
        // and the connection reads no further into its buffer.
        tx.write_all(&bytes[..HEADER_LEN + 1000]).unwrap();
        let seen = until(&mut rx, |rx| {
            assert!(rx.peek().unwrap().is_none(), "the frame is not whole yet");
            rx.incomplete_fragment()
        });
        assert_eq!((seen.seq, seen.aux0), (5, payload.len() as u64));
        let mut dst = vec![0u8; payload.len()];
        // SAFETY: `dst` holds the payload and outlives the read below.
        unsafe { rx.start_direct(seen, dst.as_mut_ptr()) };
        assert!(rx.direct_pending() && !rx.has_frame());
        // The rest of the payload, then a small frame behind it.
        tx.write_all(&bytes[HEADER_LEN + 1000..]).unwrap();
        let mut next = FrameHeader::new(kind::EAGER);
        next.seq = 6;
        tx.write_all(&frame_bytes(&next, b"after")).unwrap();
        let done = until(&mut rx, |rx| {
            assert!(
                rx.peek().unwrap().is_none(),
                "nothing is read past the payload"
            );
            rx.continue_direct()
        });
        assert_eq!(done.seq, 5);
        assert!(dst == payload, "the payload arrived whole, in order");
        let h = until(&mut rx, |rx| rx.peek().unwrap());
        assert_eq!(h.seq, 6);
        assert_eq!(rx.payload(&h, 5).unwrap(), b"after");
    }

    #[test]
    fn a_large_fragment_behind_small_frames_stays_in_the_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        // Room for more of the fragment than the reader may take (the
        // accepted socket inherits it).
        rustix::net::sockopt::set_socket_recv_buffer_size(&l, 1 << 20).unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let mut rx = TcpConn::new(b).unwrap();
        let payload: Vec<u8> = (0..MAX_FRAME_PAYLOAD).map(|i| (i % 253) as u8).collect();
        let mut small = FrameHeader::new(kind::EAGER);
        small.seq = 1;
        let mut large = FrameHeader::new(kind::FRAG);
        large.seq = 2;
        large.aux0 = payload.len() as u64;
        let mut bytes = frame_bytes(&small, b"first");
        bytes.extend(frame_bytes(&large, &payload));
        // Written from a thread: the socket need not take it all at once.
        let writer = std::thread::spawn(move || tx.write_all(&bytes).map(|_| tx));
        // Before reading, more than two chunks of the payload wait in the
        // socket: reading all there is would copy them into the buffer.
        let waiting = HEADER_LEN + 5 + HEADER_LEN + 2 * READ_CHUNK + 1;
        until(&mut rx, |rx| {
            let n = rustix::io::ioctl_fionread(&rx.stream).unwrap();
            (n as usize >= waiting).then_some(())
        });
        let h = until(&mut rx, |rx| rx.peek().unwrap());
        assert_eq!((h.seq, rx.payload(&h, 5).unwrap()), (1, &b"first"[..]));
        rx.consume(&h);
        let seen = until(&mut rx, |rx| {
            assert!(
                rx.peek().unwrap().is_none(),
                "the fragment is not whole yet"
            );
            rx.incomplete_fragment()
        });
        assert_eq!(seen.seq, 2);
        // Each look read at most one chunk of it into the buffer.
        let buffered = rx.end - rx.start - HEADER_LEN;
        assert!(
            buffered <= 2 * READ_CHUNK,
            "{buffered} payload bytes were copied into the buffer"
        );
        let mut dst = vec![0u8; payload.len()];
        // SAFETY: `dst` holds the payload and outlives the read below.
        unsafe { rx.start_direct(seen, dst.as_mut_ptr()) };
        let done = until(&mut rx, |rx| rx.continue_direct());
        assert_eq!(done.seq, 2);
        assert!(dst == payload, "the payload arrived whole, in order");
        let _tx = writer.join().unwrap().unwrap();
    }

    #[test]
    fn output_queued_behind_a_full_socket_still_leaves_during_a_direct_read() {
        // Two ranks sending each other large messages at once: each may
        // wait in a direct read for bytes the other sends only once its
        // own queued output got out.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut conn = TcpConn::new(s).unwrap();
        let fragment = vec![3u8; MAX_FRAME_PAYLOAD];
        let mut h = FrameHeader::new(kind::FRAG);
        h.aux0 = fragment.len() as u64;
        // The peer reads nothing yet: fill the socket until a tail waits.
        let mut accepted = 0;
        while conn.try_write(&h, &fragment) {
            accepted += HEADER_LEN + fragment.len();
        }
        assert!(conn.queued() > 0, "a tail waits behind the full socket");
        // A fragment from the peer, begun: read directly.
        let mut incoming = FrameHeader::new(kind::FRAG);
        incoming.aux0 = fragment.len() as u64;
        let bytes = frame_bytes(&incoming, &fragment);
        (&peer).write_all(&bytes[..HEADER_LEN + 100]).unwrap();
        // (Reading only: `peek` would also flush.)
        let seen = until(&mut conn, |c| {
            c.fill();
            c.incomplete_fragment()
        });
        assert!(conn.queued() > 0);
        let mut dst = vec![0u8; fragment.len()];
        // SAFETY: `dst` holds the payload and outlives the read.
        unsafe { conn.start_direct(seen, dst.as_mut_ptr()) };
        // The peer drains everything this side accepted; only then does
        // it send the rest of its fragment.
        peer.set_nonblocking(true).unwrap();
        let mut got = 0;
        let mut buf = vec![0u8; 1 << 20];
        until(&mut conn, |c| {
            assert!(c.continue_direct().is_none(), "the rest is not sent yet");
            match (&peer).read(&mut buf) {
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            (got == accepted).then_some(())
        });
        peer.set_nonblocking(false).unwrap();
        (&peer).write_all(&bytes[HEADER_LEN + 100..]).unwrap();
        until(&mut conn, TcpConn::continue_direct);
        assert!(dst == fragment);
    }

    #[test]
    fn frames_cross_a_connection_in_pieces() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let (mut tx, mut rx) = (TcpConn::new(a).unwrap(), TcpConn::new(b).unwrap());
        let mut sent = 0u64;
        let mut got = 0u64;
        while got < 300 {
            if sent < 300 {
                let mut h = FrameHeader::new(crate::shm::ring::kind::EAGER);
                h.seq = sent;
                let len = (sent as usize * 997) % MAX_FRAME_PAYLOAD;
                if tx.try_write(&h, &vec![sent as u8; len]) {
                    sent += 1;
                }
            }
            tx.flush();
            if let Some(h) = rx.peek().unwrap() {
                assert_eq!(h.seq, got);
                let len = (got as usize * 997) % MAX_FRAME_PAYLOAD;
                assert!(rx.payload(&h, len).unwrap().iter().all(|&x| x == got as u8));
                rx.consume(&h);
                got += 1;
            }
        }
    }
}
