//! The logger: accepts connections, checks them, stores their events and
//! acknowledges them. One thread per connection plus, in `fsync` mode, one
//! flusher thread doing group commits.

use crate::copies;
use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use vpml_fault_points::fault_point;

use crossbeam_channel::{Receiver, Sender};

use crate::auth::Tokens;
use crate::event::{EventBatch, EventId};
use crate::storage::{
    DEFAULT_SEGMENT_BYTES, Durability, RankLog, Storage, StorageConfig, StorageError, read_events,
};
use crate::wire::{
    Decoded, ErrorCode, HEADER_LEN, Hello, MAX_FRAME, Message, Stats, WireError, decode_frame,
    encode_events_raw, encode_frame,
};

/// Largest encoded size of the events of one `Put` (so that any stored
/// record can be sent back in one `Events` frame).
pub const MAX_PUT_EVENT_BYTES: usize = MAX_FRAME as usize - 64;
/// Events are sent back to `Get` in chunks of about this size.
const GET_CHUNK_BYTES: usize = 1 << 20;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking thread cannot leave these structures half-updated in a way
    // that matters more than stopping the logger would; keep serving.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Options of a [`Server`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (default `127.0.0.1:0`: loopback, any port).
    pub listen: SocketAddr,
    /// Data directory (created if missing).
    pub data_dir: PathBuf,
    /// Accepted jobs and tokens.
    pub tokens: Tokens,
    /// When puts are acknowledged.
    pub durability: Durability,
    /// Cut logs at corrupt records instead of refusing to start.
    pub repair: bool,
    /// Size at which a segment file is closed and a new one started.
    pub segment_bytes: u64,
    /// Largest accepted frame payload (at most [`MAX_FRAME`]).
    pub max_frame: u32,
    /// A connection must send `Hello` within this time.
    pub hello_timeout: Duration,
    /// Connections beyond this number are refused.
    pub max_connections: usize,
}

impl ServerConfig {
    /// Defaults: loopback, `write` durability, 64 MiB segments, 16 MiB
    /// frames, 10 s to say hello, 1024 connections.
    pub fn new(data_dir: impl Into<PathBuf>, tokens: Tokens) -> Self {
        ServerConfig {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            data_dir: data_dir.into(),
            tokens,
            durability: Durability::Write,
            repair: false,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            max_frame: MAX_FRAME,
            hello_timeout: Duration::from_secs(10),
            max_connections: 1024,
        }
    }
}

/// A logger that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The data directory could not be loaded.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The listening socket could not be created.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// A thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
}

#[derive(Default)]
struct Metrics {
    open: AtomicU64,
    total: AtomicU64,
    refused: AtomicU64,
    puts: AtomicU64,
    events: AtomicU64,
    bytes: AtomicU64,
    fsyncs: AtomicU64,
}

/// A live connection: a handle to shut its socket down and its thread.
type ConnEntry = (TcpStream, Option<JoinHandle<()>>);

struct Shared {
    cfg: ServerConfig,
    storage: Storage,
    metrics: Metrics,
    stopping: AtomicBool,
    conns: Mutex<HashMap<u64, ConnEntry>>,
    flush_tx: Mutex<Option<Sender<FlushReq>>>,
}

/// A running logger. Dropping it shuts it down like [`Server::shutdown`].
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    flusher: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Loads the data directory (see the crate docs for how damaged files
    /// are handled), binds the listening socket and starts serving.
    pub fn bind(cfg: ServerConfig) -> Result<Server, ServerError> {
        let listener = TcpListener::bind(cfg.listen).map_err(|source| ServerError::Bind {
            addr: cfg.listen,
            source,
        })?;
        Self::serve_on(cfg, listener)
    }

    /// [`Server::bind`] on a listening socket made elsewhere (`cfg.listen`
    /// is ignored): a logger restarted on a socket its launcher keeps
    /// open, so clients never find the address closed or taken.
    pub fn serve_on(cfg: ServerConfig, listener: TcpListener) -> Result<Server, ServerError> {
        let storage = Storage::open(StorageConfig {
            root: cfg.data_dir.clone(),
            durability: cfg.durability,
            segment_bytes: cfg.segment_bytes.max(1),
            repair: cfg.repair,
        })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: cfg.listen,
            source,
        })?;
        let (flush_tx, flush_rx) = crossbeam_channel::unbounded();
        let fsync = cfg.durability == Durability::Fsync;
        let shared = Arc::new(Shared {
            cfg,
            storage,
            metrics: Metrics::default(),
            stopping: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            flush_tx: Mutex::new(fsync.then_some(flush_tx)),
        });
        let flusher = if fsync {
            let s = Arc::clone(&shared);
            Some(
                std::thread::Builder::new()
                    .name("el-flusher".into())
                    .spawn(move || flusher(&s, flush_rx))
                    .map_err(ServerError::Thread)?,
            )
        } else {
            None
        };
        let s = Arc::clone(&shared);
        let acceptor = std::thread::Builder::new()
            .name("el-accept".into())
            .spawn(move || accept_loop(&s, listener))
            .map_err(ServerError::Thread)?;
        tracing::info!(%addr, durability = ?shared.cfg.durability, data_dir = %shared.cfg.data_dir.display(), "event logger listening");
        Ok(Server {
            addr,
            shared,
            acceptor: Some(acceptor),
            flusher,
        })
    }

    /// The address the logger listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes every connection and waits for the threads.
    /// Events acknowledged before stay durable; later ones are not acked.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the acceptor blocked in accept().
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        let conns: Vec<_> = lock(&self.shared.conns).drain().collect();
        for (_, (stream, handle)) in conns {
            let _ = stream.shutdown(Shutdown::Both);
            if let Some(h) = handle {
                let _ = h.join();
            }
        }
        drop(lock(&self.shared.flush_tx).take());
        if let Some(f) = self.flusher.take() {
            let _ = f.join();
        }
        tracing::info!(addr = %self.addr, "event logger stopped");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: TcpListener) {
    let mut next_id = 0u64;
    for incoming in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match incoming {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                // EMFILE and friends: back off instead of spinning.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "?".to_owned(), |a| a.to_string());
        let mut conns = lock(&shared.conns);
        if conns.len() >= shared.cfg.max_connections {
            drop(conns);
            tracing::warn!(%peer, "refusing connection: too many connections");
            shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
            let _ = send_on(
                &stream,
                &Message::Error {
                    req: 0,
                    code: ErrorCode::Unavailable,
                    message: "too many connections".into(),
                },
            );
            continue;
        }
        let Ok(registry_copy) = stream.try_clone() else {
            continue;
        };
        next_id += 1;
        let id = next_id;
        let s = Arc::clone(shared);
        conns.insert(id, (registry_copy, None));
        let spawned = std::thread::Builder::new()
            .name(format!("el-conn-{id}"))
            .spawn(move || {
                serve_connection(&s, stream, &peer);
                lock(&s.conns).remove(&id);
            });
        match spawned {
            Ok(h) => {
                if let Some(entry) = conns.get_mut(&id) {
                    entry.1 = Some(h);
                }
            }
            Err(e) => {
                conns.remove(&id);
                tracing::warn!(error = %e, "cannot start a connection thread");
            }
        }
    }
}

fn send_on(stream: &TcpStream, msg: &Message) -> std::io::Result<()> {
    let mut buf = Vec::new();
    encode_frame(msg, &mut buf);
    (&*stream).write_all(&buf)
}

/// The sending half of a connection, shared with the flusher.
struct ConnWriter {
    stream: Mutex<TcpStream>,
}

impl ConnWriter {
    fn send(&self, msg: &Message) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(64);
        encode_frame(msg, &mut buf);
        self.send_raw(&buf)
    }

    fn send_raw(&self, frame: &[u8]) -> std::io::Result<()> {
        lock(&self.stream).write_all(frame)
    }

    /// Reports a session error and closes the connection.
    fn fail(&self, code: ErrorCode, message: String) {
        let _ = self.send(&Message::Error {
            req: 0,
            code,
            message,
        });
        let _ = lock(&self.stream).shutdown(Shutdown::Both);
    }
}

/// A put waiting for the group commit that makes it durable.
struct FlushReq {
    file: Arc<File>,
    log: Arc<Mutex<RankLog>>,
    conn: Arc<ConnWriter>,
    id: EventId,
}

fn flusher(shared: &Shared, rx: Receiver<FlushReq>) {
    while let Ok(first) = rx.recv() {
        let mut reqs = vec![first];
        reqs.extend(rx.try_iter());
        // One fsync per file covers every put that wrote to it meanwhile.
        let mut synced: HashMap<*const File, Result<(), String>> = HashMap::new();
        for r in &reqs {
            let key = Arc::as_ptr(&r.file);
            if synced.contains_key(&key) {
                continue;
            }
            let outcome = r.file.sync_data().map_err(|e| e.to_string());
            shared.metrics.fsyncs.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = &outcome {
                // After a failed fsync the kernel may have dropped the data:
                // this log can no longer promise anything.
                let why = format!("fsync failed: {e}");
                tracing::error!(error = %e, "fsync failed; the rank's log is marked failed");
                lock(&r.log).fail(why);
            }
            synced.insert(key, outcome);
        }
        let mut acks: HashMap<*const ConnWriter, (Arc<ConnWriter>, EventId)> = HashMap::new();
        for r in reqs {
            match &synced[&Arc::as_ptr(&r.file)] {
                Ok(()) => {
                    let e = acks
                        .entry(Arc::as_ptr(&r.conn))
                        .or_insert_with(|| (Arc::clone(&r.conn), 0));
                    e.1 = e.1.max(r.id);
                }
                Err(e) => r
                    .conn
                    .fail(ErrorCode::Storage, format!("fsync failed: {e}")),
            }
        }
        if !acks.is_empty() {
            fault_point!("logger.before_ack");
        }
        for (_, (conn, id)) in acks {
            // A failed send means the connection is gone; its reader sees it.
            let _ = conn.send(&Message::Ack { highest: id });
        }
    }
}

/// Why a connection is closed by the logger.
struct Close {
    code: ErrorCode,
    reason: String,
}

impl Close {
    fn new(code: ErrorCode, reason: impl Into<String>) -> Self {
        Close {
            code,
            reason: reason.into(),
        }
    }
}

impl From<WireError> for Close {
    fn from(e: WireError) -> Self {
        let code = match e {
            WireError::TooLarge { .. } => ErrorCode::TooLarge,
            _ => ErrorCode::Malformed,
        };
        Close::new(code, e.to_string())
    }
}

fn storage_close(e: StorageError) -> Close {
    let code = match e {
        StorageError::Gap { .. } => ErrorCode::BadRequest,
        StorageError::Stale { .. } => ErrorCode::StaleIncarnation,
        _ => ErrorCode::Storage,
    };
    Close::new(code, e.to_string())
}

struct Session {
    job: String,
    rank: u32,
    incarnation: u32,
    log: Arc<Mutex<RankLog>>,
}

struct Conn<'a> {
    shared: &'a Shared,
    writer: Arc<ConnWriter>,
    flush_tx: Option<Sender<FlushReq>>,
    session: Option<Session>,
    /// Highest id to acknowledge once the read buffer is drained (write mode).
    pending_ack: Option<EventId>,
}

fn serve_connection(shared: &Shared, mut stream: TcpStream, peer: &str) {
    shared.metrics.open.fetch_add(1, Ordering::Relaxed);
    shared.metrics.total.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let writer = match stream.try_clone() {
        Ok(s) => Arc::new(ConnWriter {
            stream: Mutex::new(s),
        }),
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot set up connection");
            shared.metrics.open.fetch_sub(1, Ordering::Relaxed);
            return;
        }
    };
    let mut conn = Conn {
        shared,
        writer,
        flush_tx: lock(&shared.flush_tx).clone(),
        session: None,
        pending_ack: None,
    };
    let outcome = conn.run(&mut stream);
    if let Some(id) = conn.pending_ack.take() {
        let _ = conn.writer.send(&Message::Ack { highest: id });
    }
    let (job, rank) = conn
        .session
        .as_ref()
        .map_or(("-", -1), |s| (s.job.as_str(), i64::from(s.rank)));
    match outcome {
        Ok(()) => tracing::debug!(%peer, job, rank, "connection closed"),
        Err(close) => {
            if !shared.stopping.load(Ordering::SeqCst) {
                tracing::warn!(%peer, job, rank, code = %close.code, reason = %close.reason, "closing connection");
                if matches!(
                    close.code,
                    ErrorCode::Malformed
                        | ErrorCode::TooLarge
                        | ErrorCode::AuthFailed
                        | ErrorCode::BadRequest
                ) {
                    shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            let message = if close.code == ErrorCode::AuthFailed {
                // Do not tell a stranger which jobs exist.
                "unknown job or wrong token".to_owned()
            } else {
                close.reason
            };
            conn.writer.fail(close.code, message);
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    shared.metrics.open.fetch_sub(1, Ordering::Relaxed);
}

impl Conn<'_> {
    /// Reads and handles frames until the peer leaves (`Ok`) or must be
    /// disconnected (`Err`).
    fn run(&mut self, stream: &mut TcpStream) -> Result<(), Close> {
        let hello_timeout = self.shared.cfg.hello_timeout;
        let _ = stream.set_read_timeout(Some(hello_timeout));
        let max = self.shared.cfg.max_frame.min(MAX_FRAME);
        let mut buf = vec![0u8; 64 << 10];
        let (mut start, mut end) = (0usize, 0usize);
        let opened = std::time::Instant::now();
        let mut timeout_cleared = false;
        loop {
            // Handle every complete frame already received.
            loop {
                match decode_frame(&buf[start..end], max)? {
                    Decoded::Frame(msg, used) => {
                        start += used;
                        if !self.handle(msg)? {
                            return Ok(());
                        }
                    }
                    Decoded::NeedMore(need) => {
                        if start > 0 {
                            buf.copy_within(start..end, 0);
                            end -= start;
                            start = 0;
                        }
                        if need > buf.len() {
                            // Grow with the data actually received, never
                            // straight to what a header claims.
                            let grown = need.min(buf.len() * 2).max(HEADER_LEN);
                            buf.resize(grown, 0);
                        }
                        break;
                    }
                }
            }
            if let Some(id) = self.pending_ack.take() {
                fault_point!("logger.before_ack");
                self.writer
                    .send(&Message::Ack { highest: id })
                    .map_err(|e| {
                        Close::new(ErrorCode::Unavailable, format!("cannot send ack: {e}"))
                    })?;
            }
            // Once the Hello is in, the connection may idle as long as the
            // client likes (a rank with no events for minutes is normal).
            if self.session.is_some() && !timeout_cleared {
                let _ = stream.set_read_timeout(None);
                timeout_cleared = true;
            }
            match stream.read(&mut buf[end..]) {
                Ok(0) if end > start => {
                    return Err(Close::new(
                        ErrorCode::Malformed,
                        format!(
                            "connection closed inside a frame ({} bytes received)",
                            end - start
                        ),
                    ));
                }
                Ok(0) => return Ok(()),
                Ok(n) => end += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(Close::new(
                        ErrorCode::BadRequest,
                        format!("no Hello within {} s", hello_timeout.as_secs_f64()),
                    ));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "connection read failed");
                    return Ok(());
                }
            }
            if self.session.is_some() {
                if !timeout_cleared {
                    let _ = stream.set_read_timeout(None);
                    timeout_cleared = true;
                }
            } else if opened.elapsed() > hello_timeout {
                // A peer trickling bytes must not hold a thread forever.
                return Err(Close::new(
                    ErrorCode::BadRequest,
                    format!("no Hello within {} s", hello_timeout.as_secs_f64()),
                ));
            }
        }
    }

    /// Handles one message; `Ok(false)` ends the connection normally.
    fn handle(&mut self, msg: Message) -> Result<bool, Close> {
        let Some(session) = &self.session else {
            return match msg {
                Message::Hello(h) => self.hello(h).map(|()| true),
                _ => Err(Close::new(
                    ErrorCode::BadRequest,
                    "first message is not Hello",
                )),
            };
        };
        match msg {
            Message::Put { rank, batch } => {
                if rank != session.rank {
                    return Err(Close::new(
                        ErrorCode::BadRequest,
                        format!("put for rank {rank} on a session of rank {}", session.rank),
                    ));
                }
                self.put(&batch)?;
            }
            Message::Get { req, rank, from } => self.get(req, rank, from)?,
            Message::Truncate { req, rank, up_to } => {
                if rank != session.rank {
                    return Err(Close::new(
                        ErrorCode::BadRequest,
                        format!(
                            "truncate for rank {rank} on a session of rank {}",
                            session.rank
                        ),
                    ));
                }
                let reply = match lock(&session.log).truncate(up_to) {
                    Ok((segments, bytes)) => {
                        tracing::debug!(
                            job = session.job,
                            rank,
                            up_to,
                            segments,
                            bytes,
                            "truncated"
                        );
                        Message::Truncated {
                            req,
                            segments,
                            bytes,
                        }
                    }
                    Err(e) => storage_error(req, e),
                };
                self.reply(&reply)?;
            }
            Message::Stats { req } => {
                let m = &self.shared.metrics;
                let (highest, first_kept, (segments, bytes)) = {
                    let l = lock(&session.log);
                    (l.highest(), l.first_kept(), l.usage())
                };
                let stats = Stats {
                    connections_open: m.open.load(Ordering::Relaxed),
                    connections_total: m.total.load(Ordering::Relaxed),
                    connections_refused: m.refused.load(Ordering::Relaxed),
                    puts: m.puts.load(Ordering::Relaxed),
                    events_stored: m.events.load(Ordering::Relaxed),
                    bytes_written: m.bytes.load(Ordering::Relaxed),
                    fsyncs: m.fsyncs.load(Ordering::Relaxed),
                    rank_highest: highest,
                    rank_first_kept: first_kept,
                    rank_segments: segments,
                    rank_bytes: bytes,
                };
                self.reply(&Message::StatsReply { req, stats })?;
            }
            Message::Bye => {
                let id = if self.shared.cfg.durability == Durability::Fsync {
                    let (file, id) = {
                        let l = lock(&session.log);
                        (l.active_file(), l.highest())
                    };
                    file.sync_data().map_err(|e| {
                        Close::new(ErrorCode::Storage, format!("fsync failed: {e}"))
                    })?;
                    self.shared.metrics.fsyncs.fetch_add(1, Ordering::Relaxed);
                    Some(id)
                } else {
                    self.pending_ack.take()
                };
                if let Some(id) = id {
                    self.reply(&Message::Ack { highest: id })?;
                }
                self.reply(&Message::Goodbye)?;
                return Ok(false);
            }
            Message::SaveCopy {
                req,
                index,
                offset,
                last,
                bytes,
            } => {
                let dir = self.shared.storage.copies_dir(&session.job, session.rank);
                let reply = match copies::write_part(&dir, index, offset, &bytes, last) {
                    Ok(()) => Message::CopySaved { req },
                    Err(e) => storage_error(req, e),
                };
                self.reply(&reply)?;
            }
            Message::LoadCopy {
                req,
                rank,
                index,
                offset,
            } => {
                // Any rank of the session's job (a rank restarted elsewhere).
                let dir = self.shared.storage.copies_dir(&session.job, rank);
                let reply = match copies::read_part(&dir, index, offset) {
                    Ok(found) => {
                        let (index, total, bytes) = found.unwrap_or_default();
                        Message::CopyData {
                            req,
                            index,
                            total,
                            offset,
                            bytes,
                        }
                    }
                    Err(e) => storage_error(req, e),
                };
                self.reply(&reply)?;
            }
            Message::Hello(_) => return Err(Close::new(ErrorCode::BadRequest, "second Hello")),
            other => {
                return Err(Close::new(
                    ErrorCode::BadRequest,
                    format!("unexpected message from a client: {}", kind_name(&other)),
                ));
            }
        }
        Ok(true)
    }

    fn reply(&self, msg: &Message) -> Result<(), Close> {
        self.writer
            .send(msg)
            .map_err(|e| Close::new(ErrorCode::Unavailable, format!("cannot send reply: {e}")))
    }

    fn hello(&mut self, h: Hello) -> Result<(), Close> {
        if let Err(why) = self.shared.cfg.tokens.check(&h.job, &h.token) {
            return Err(Close::new(
                ErrorCode::AuthFailed,
                format!("job {:?}: {why}", h.job),
            ));
        }
        let log = self
            .shared
            .storage
            .rank(&h.job, h.rank)
            .map_err(storage_close)?;
        let (highest, first_kept, file) = {
            let mut l = lock(&log);
            l.admit(h.incarnation).map_err(storage_close)?;
            (l.highest(), l.first_kept(), l.active_file())
        };
        if self.shared.cfg.durability == Durability::Fsync {
            // The client resends from `highest + 1`: what it is told is stored
            // must be durable.
            file.sync_data()
                .map_err(|e| Close::new(ErrorCode::Storage, format!("fsync failed: {e}")))?;
        }
        tracing::debug!(
            job = h.job,
            rank = h.rank,
            incarnation = h.incarnation,
            highest,
            "session opened"
        );
        self.reply(&Message::Welcome {
            highest,
            first_kept,
        })?;
        self.session = Some(Session {
            job: h.job,
            rank: h.rank,
            incarnation: h.incarnation,
            log,
        });
        Ok(())
    }

    fn put(&mut self, batch: &EventBatch) -> Result<(), Close> {
        let Some(session) = &self.session else {
            return Err(Close::new(ErrorCode::BadRequest, "put before Hello"));
        };
        if batch.as_bytes().len() > MAX_PUT_EVENT_BYTES {
            return Err(Close::new(
                ErrorCode::TooLarge,
                format!(
                    "put of {} bytes of events exceeds {MAX_PUT_EVENT_BYTES}",
                    batch.as_bytes().len()
                ),
            ));
        }
        fault_point!("logger.received");
        let m = &self.shared.metrics;
        m.puts.fetch_add(1, Ordering::Relaxed);
        let appended = lock(&session.log)
            .append(batch, session.incarnation)
            .map_err(storage_close)?;
        m.events.fetch_add(appended.new_events, Ordering::Relaxed);
        m.bytes.fetch_add(appended.bytes, Ordering::Relaxed);
        match &self.flush_tx {
            Some(tx) => tx
                .send(FlushReq {
                    file: appended.file,
                    log: Arc::clone(&session.log),
                    conn: Arc::clone(&self.writer),
                    id: appended.highest,
                })
                .map_err(|_| Close::new(ErrorCode::Unavailable, "logger is shutting down"))?,
            None => self.pending_ack = Some(appended.highest),
        }
        Ok(())
    }

    fn get(&mut self, req: u64, rank: u32, from: EventId) -> Result<(), Close> {
        let Some(session) = &self.session else {
            return Err(Close::new(ErrorCode::BadRequest, "get before Hello"));
        };
        // Any rank of the session's job may be read (recovery, replay tools).
        let log = if rank == session.rank {
            Arc::clone(&session.log)
        } else {
            self.shared
                .storage
                .rank(&session.job, rank)
                .map_err(storage_close)?
        };
        let plan = lock(&log).read_plan(from);
        let mut chunk = Vec::new();
        let mut count = 0u32;
        let mut frame = Vec::new();
        let writer = Arc::clone(&self.writer);
        let mut send = |last: bool, count: u32, events: &[u8]| {
            frame.clear();
            encode_events_raw(req, last, count, events, &mut frame);
            writer.send_raw(&frame)
        };
        let result = read_events(&plan, from.max(1), |n, bytes| {
            if count > 0 && chunk.len() + bytes.len() > GET_CHUNK_BYTES {
                send(false, count, &chunk)?;
                chunk.clear();
                count = 0;
            }
            chunk.extend_from_slice(bytes);
            count += n;
            Ok(())
        });
        let sent = match result {
            Ok(()) => send(true, count, &chunk),
            Err(e) => {
                tracing::error!(error = %e, "cannot read a rank's events");
                let mut buf = Vec::new();
                encode_frame(&storage_error(req, e), &mut buf);
                self.writer.send_raw(&buf)
            }
        };
        sent.map_err(|e| Close::new(ErrorCode::Unavailable, format!("cannot send events: {e}")))
    }
}

/// The reply to request `req` that storage failed.
fn storage_error(req: u64, e: impl std::fmt::Display) -> Message {
    Message::Error {
        req,
        code: ErrorCode::Storage,
        message: e.to_string(),
    }
}

fn kind_name(m: &Message) -> &'static str {
    match m {
        Message::Hello(_) => "Hello",
        Message::Put { .. } => "Put",
        Message::Get { .. } => "Get",
        Message::Truncate { .. } => "Truncate",
        Message::Stats { .. } => "Stats",
        Message::Bye => "Bye",
        Message::Welcome { .. } => "Welcome",
        Message::Ack { .. } => "Ack",
        Message::Events { .. } => "Events",
        Message::Truncated { .. } => "Truncated",
        Message::StatsReply { .. } => "StatsReply",
        Message::Error { .. } => "Error",
        Message::Goodbye => "Goodbye",
        Message::SaveCopy { .. } => "SaveCopy",
        Message::LoadCopy { .. } => "LoadCopy",
        Message::CopySaved { .. } => "CopySaved",
        Message::CopyData { .. } => "CopyData",
    }
}
