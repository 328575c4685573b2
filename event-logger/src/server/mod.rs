//! The logger: accepts connections, checks them, stores their events and
//! acknowledges them. One thread per connection plus, in `fsync` mode, one
//! flusher thread doing group commits.
//!
//! This module holds the configuration, the accept loop and starting and
//! stopping; `conn` the per-connection state machine (hello, puts, requests)
//! and `flusher` the group commit of `fsync` mode.

mod conn;
mod flusher;

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::auth::Tokens;
use crate::storage::{DEFAULT_SEGMENT_BYTES, Durability, Storage, StorageConfig, StorageError};
use crate::strangers::Strangers;
use crate::wire::{ErrorCode, MAX_FRAME, Message, encode_frame};
use conn::serve_connection;
use flusher::{FlushReq, flusher};

/// Largest encoded size of the events of one `Put` (so that any stored
/// record can be sent back in one `Events` frame).
pub const MAX_PUT_EVENT_BYTES: usize = MAX_FRAME as usize - 64;

/// Largest frame payload accepted before a connection's `Hello` (which
/// fits: a job name of at most 64 bytes, a token of at most 256), so a
/// stranger costs the logger a few KiB of buffer at most.
pub const HELLO_MAX_FRAME: u32 = 1024;

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
    /// At most this many silent connections wait for their `Hello` at
    /// once: a new one beyond closes the oldest silent one (see
    /// [`Strangers`]), so idle strangers can never fill the slots
    /// authenticated ranks need (a rank says hello as soon as it connects).
    pub max_unauthenticated: usize,
}

impl ServerConfig {
    /// Defaults: loopback, `write` durability, 64 MiB segments, 16 MiB
    /// frames ([`HELLO_MAX_FRAME`] before `Hello`), 3 s to say hello, 1024
    /// connections of which 64 unauthenticated.
    pub fn new(data_dir: impl Into<PathBuf>, tokens: Tokens) -> Self {
        ServerConfig {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            data_dir: data_dir.into(),
            tokens,
            durability: Durability::Write,
            repair: false,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            max_frame: MAX_FRAME,
            hello_timeout: Duration::from_secs(3),
            max_connections: 1024,
            max_unauthenticated: 64,
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
    /// The connections still waiting for their `Hello`.
    strangers: Strangers,
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
        let strangers = Strangers::new(cfg.max_unauthenticated, cfg.hello_timeout);
        let shared = Arc::new(Shared {
            cfg,
            storage,
            metrics: Metrics::default(),
            stopping: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            strangers,
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
        if conns.len() >= shared.cfg.max_connections && shared.strangers.close_oldest() {
            // A stranger's slot (its thread frees it as it ends).
            shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
        } else if conns.len() >= shared.cfg.max_connections {
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
        let (Ok(registry_copy), Ok(closer)) = (stream.try_clone(), stream.try_clone()) else {
            continue;
        };
        next_id += 1;
        let id = next_id;
        let closed = shared.strangers.admit(id, closer);
        shared
            .metrics
            .refused
            .fetch_add(closed as u64, Ordering::Relaxed);
        let s = Arc::clone(shared);
        conns.insert(id, (registry_copy, None));
        let spawned = std::thread::Builder::new()
            .name(format!("el-conn-{id}"))
            .spawn(move || {
                serve_connection(&s, stream, &peer, id);
                s.strangers.forget(id);
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
                shared.strangers.forget(id);
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
