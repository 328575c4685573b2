//! The client a rank uses to make its events durable on one or more loggers.
//!
//! Threads: one driver thread per replica connects (and reconnects) and
//! reads that logger's replies. Puts are written by the calling thread when
//! the connection is free (so a single event costs no thread hand-off); a
//! put that finds another thread writing leaves its events for that thread,
//! which sends everything queued before it stops — that is how events are
//! batched. Events stay queued in memory until every replica acknowledged
//! them, so they can be sent again to a logger that restarted.
//!
//! Modules: `config` holds the options and errors; `connection` the driver
//! threads (connect, hello, read replies); `put` queueing events and
//! tracking their durability; `requests` the request–reply calls (get,
//! truncate, checkpoint copies, stats).

mod config;
mod connection;
mod put;
mod requests;

use std::collections::{HashMap, VecDeque};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::event::{EventBatch, EventId};
use crate::wire::{Message, Stats, encode_frame};

pub use config::{ClientConfig, ClientError};
use connection::{drive, write_frame};
use put::{advance, pump, push_event};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Events queued for sending, with consecutive ids.
struct Chunk {
    first: EventId,
    count: u32,
    bytes: Vec<u8>,
}

impl Chunk {
    fn last(&self) -> EventId {
        self.first + u64::from(self.count) - 1
    }
}

/// State of one replica's connection.
#[derive(Default)]
struct Rep {
    up: bool,
    writing: bool,
    /// Highest id written to the current connection.
    sent: EventId,
    /// Highest id the logger acknowledged as durable.
    acked: EventId,
    /// Connection generation (bumped at every Welcome).
    generation: u64,
    /// Highest id and first kept id at the first Welcome.
    welcomed: Option<(EventId, EventId)>,
    last_error: Option<String>,
    goodbye: bool,
}

enum Reply {
    Events(EventBatch),
    Truncated(u32, u64),
    Stats(Stats),
    CopySaved,
    /// (index, total, offset, bytes)
    CopyData(u64, u64, u64, Vec<u8>),
}

struct Pending {
    rep: usize,
    partial: EventBatch,
    outcome: Option<Result<Reply, ClientError>>,
}

struct State {
    last_id: EventId,
    numbering_ready: bool,
    queue: VecDeque<Chunk>,
    queued_events: usize,
    reps: Vec<Rep>,
    fatal: Option<ClientError>,
    closing: bool,
    next_req: u64,
    requests: HashMap<u64, Pending>,
}

struct Shared {
    cfg: ClientConfig,
    addrs: Vec<SocketAddr>,
    st: Mutex<State>,
    cv: Condvar,
    durable: AtomicU64,
    /// Write halves: (generation, stream) of each replica's connection.
    streams: Vec<Mutex<Option<(u64, TcpStream)>>>,
}

/// A rank's connection to its event loggers. See the module docs.
pub struct Client {
    shared: Arc<Shared>,
    drivers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("job", &self.shared.cfg.job)
            .field("rank", &self.shared.cfg.rank)
            .field("loggers", &self.shared.addrs)
            .finish()
    }
}

impl Client {
    /// Connects to the rank's replicas (every one must answer within the
    /// time-out), continues numbering after the highest id any of them
    /// holds, and copies to lagging replicas the events they miss.
    pub fn connect(cfg: ClientConfig) -> Result<Client, ClientError> {
        let n = cfg.loggers.len();
        if n == 0 {
            return Err(ClientError::Config("no event logger given".into()));
        }
        if cfg.replicas == 0 || cfg.replicas > n {
            return Err(ClientError::Config(format!(
                "replicas must be between 1 and the number of loggers ({n}), not {}",
                cfg.replicas
            )));
        }
        if !crate::auth::valid_job_name(&cfg.job) {
            return Err(ClientError::Config(format!(
                "invalid job name {:?}",
                cfg.job
            )));
        }
        let addrs: Vec<SocketAddr> = (0..cfg.replicas)
            .map(|j| cfg.loggers[(cfg.rank as usize + j) % n])
            .collect();
        for (i, a) in addrs.iter().enumerate() {
            if addrs[..i].contains(a) {
                return Err(ClientError::Config(format!("logger {a} is listed twice")));
            }
        }
        let k = addrs.len();
        let shared = Arc::new(Shared {
            addrs,
            st: Mutex::new(State {
                last_id: 0,
                numbering_ready: false,
                queue: VecDeque::new(),
                queued_events: 0,
                reps: (0..k).map(|_| Rep::default()).collect(),
                fatal: None,
                closing: false,
                next_req: 1,
                requests: HashMap::new(),
            }),
            cv: Condvar::new(),
            durable: AtomicU64::new(0),
            streams: (0..k).map(|_| Mutex::new(None)).collect(),
            cfg,
        });
        let mut client = Client {
            shared: Arc::clone(&shared),
            drivers: Vec::new(),
        };
        for r in 0..k {
            let s = Arc::clone(&shared);
            let h = std::thread::Builder::new()
                .name(format!("el-client-{r}"))
                .spawn(move || drive(&s, r))
                .map_err(|e| ClientError::Config(format!("cannot start a thread: {e}")))?;
            client.drivers.push(h);
        }
        client.start()?;
        Ok(client)
    }

    fn start(&self) -> Result<(), ClientError> {
        let sh = &*self.shared;
        let started = Instant::now();
        let deadline = started + sh.cfg.timeout;
        let mut st = lock(&sh.st);
        loop {
            if let Some(e) = &st.fatal {
                return Err(e.clone());
            }
            if st.reps.iter().all(|r| r.welcomed.is_some()) {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                let (i, rep) = st
                    .reps
                    .iter()
                    .enumerate()
                    .find(|(_, r)| r.welcomed.is_none())
                    .map_or((0, None), |(i, r)| (i, r.last_error.clone()));
                return Err(ClientError::Unreachable {
                    addr: sh.addrs[i],
                    waited: started.elapsed(),
                    cause: rep.unwrap_or_else(|| "no answer".into()),
                });
            }
            st = sh
                .cv
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let highs: Vec<EventId> = st
            .reps
            .iter()
            .map(|r| r.welcomed.map_or(0, |w| w.0))
            .collect();
        let top = highs.iter().copied().max().unwrap_or(0);
        let low = highs.iter().copied().min().unwrap_or(0);
        st.last_id = top;
        st.numbering_ready = true;
        advance(sh, &mut st);
        drop(st);
        if low < top {
            // Some replica misses events another holds (the previous
            // incarnation died between the two puts): copy them over so every
            // replica holds the same prefix before new events follow.
            let leader = highs.iter().position(|&h| h == top).unwrap_or(0);
            let batch = self.get_from(leader, low + 1)?;
            if batch.first() != low + 1 || batch.last() < top {
                return Err(ClientError::Protocol {
                    addr: sh.addrs[leader],
                    why: format!(
                        "cannot bring the other replicas up to date: it holds events {}..={} instead of {}..={top}",
                        batch.first(),
                        batch.last(),
                        low + 1
                    ),
                });
            }
            let mut st = lock(&sh.st);
            for (id, ev) in batch.events() {
                if id > top {
                    break;
                }
                push_event(&mut st, sh.cfg.max_batch_bytes, id, &ev);
            }
            drop(st);
            for r in 0..sh.addrs.len() {
                pump(sh, r);
            }
        }
        Ok(())
    }

    /// The loggers this rank uses, primary first.
    pub fn replicas(&self) -> &[SocketAddr] {
        &self.shared.addrs
    }

    /// Waits until every queued event is durable, says goodbye to the
    /// loggers and closes the connections.
    pub fn close(mut self) -> Result<(), ClientError> {
        let result = self.wait_all_durable();
        let sh = Arc::clone(&self.shared);
        let mut frame = Vec::new();
        encode_frame(&Message::Bye, &mut frame);
        let gens: Vec<(usize, u64)> = {
            let st = lock(&sh.st);
            st.reps
                .iter()
                .enumerate()
                .filter(|(_, r)| r.up)
                .map(|(i, r)| (i, r.generation))
                .collect()
        };
        for (rep, generation) in &gens {
            let _ = write_frame(&sh, *rep, *generation, &frame);
        }
        // Wait (bounded) for the goodbyes so the sessions end cleanly.
        let deadline = Instant::now() + Duration::from_secs(2).min(sh.cfg.timeout);
        let mut st = lock(&sh.st);
        while gens
            .iter()
            .any(|(r, _)| st.reps[*r].up && !st.reps[*r].goodbye)
        {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = wait(&sh, st, deadline - now);
        }
        drop(st);
        self.shutdown();
        result
    }

    fn shutdown(&mut self) {
        let sh = &*self.shared;
        {
            let mut st = lock(&sh.st);
            st.closing = true;
            for p in st.requests.values_mut() {
                p.outcome.get_or_insert(Err(ClientError::Closed));
            }
        }
        sh.cv.notify_all();
        for s in &sh.streams {
            if let Some((_, stream)) = &*lock(s) {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
        for h in self.drivers.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn wait<'a>(sh: &'a Shared, st: MutexGuard<'a, State>, d: Duration) -> MutexGuard<'a, State> {
    sh.cv
        .wait_timeout(st, d)
        .map(|(g, _)| g)
        .unwrap_or_else(|p| p.into_inner().0)
}

/// The client may still be used: no fatal error, not closing.
fn usable(st: &State) -> Result<(), ClientError> {
    if let Some(e) = &st.fatal {
        return Err(e.clone());
    }
    if st.closing {
        return Err(ClientError::Closed);
    }
    Ok(())
}

/// One line on each replica, for errors.
fn status(sh: &Shared, st: &State) -> String {
    st.reps
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let addr = sh.addrs[i];
            if r.up {
                format!("logger {addr}: connected, acked {}", r.acked)
            } else {
                let why = r.last_error.as_deref().unwrap_or("not connected yet");
                format!("logger {addr}: down ({why})")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn fatal(sh: &Shared, st: &mut State, e: ClientError) {
    tracing::error!(error = %e, "event-logger client failed");
    st.fatal.get_or_insert(e);
    sh.cv.notify_all();
}
