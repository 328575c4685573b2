//! The client a rank uses to make its events durable on one or more loggers.
//!
//! Threads: one driver thread per replica connects (and reconnects) and
//! reads that logger's replies. Puts are written by the calling thread when
//! the connection is free (so a single event costs no thread hand-off); a
//! put that finds another thread writing leaves its events for that thread,
//! which sends everything queued before it stops — that is how events are
//! batched. Events stay queued in memory until every replica acknowledged
//! them, so they can be sent again to a logger that restarted.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::event::{Event, EventBatch, EventId};
use crate::server::MAX_PUT_EVENT_BYTES;
use crate::wire::{
    Decoded, ErrorCode, Hello, MAX_FRAME, Message, Stats, decode_frame, encode_frame,
    encode_put_raw,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Options of a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Every logger of the job, in the same order for every rank.
    pub loggers: Vec<SocketAddr>,
    /// Job name.
    pub job: String,
    /// This rank.
    pub rank: u32,
    /// This rank's incarnation (0 at first start, +1 per restart).
    pub incarnation: u32,
    /// The job's token.
    pub token: String,
    /// Loggers that must hold an event before it counts as durable: rank r
    /// uses loggers `(r + j) mod N` for `j` in `0..replicas`.
    pub replicas: usize,
    /// Limit for connecting, for [`Client::wait_durable`] and for requests.
    pub timeout: Duration,
    /// Largest size of the events of one `Put` frame.
    pub max_batch_bytes: usize,
    /// `put` blocks while this many events wait for acknowledgement.
    pub max_pending_events: usize,
    /// Send events as soon as they are put (overlapping the logger round
    /// trip with the caller's work). When false, events wait in the queue
    /// until someone waits for durability or an ack clocks them out: one
    /// socket write per batch instead of one per event, which pays off
    /// where waking the logger costs more than the round trip it hides.
    pub send_eagerly: bool,
    /// Count an event durable once every replica that is *up* holds it, so
    /// the survivors acknowledge while a dead logger is restarted. Only
    /// for loggers that are restarted from their files (which hold all
    /// they acknowledged): with loggers nothing restarts, a dead one would
    /// leave events on fewer than `replicas` loggers. Default: false.
    pub survivors_acknowledge: bool,
}

impl ClientConfig {
    /// A configuration with one replica, a 30 s time-out, 1 MiB puts and at
    /// most 1 Mi events in flight.
    pub fn new(
        loggers: Vec<SocketAddr>,
        job: &str,
        rank: u32,
        incarnation: u32,
        token: &str,
    ) -> Self {
        ClientConfig {
            loggers,
            job: job.to_owned(),
            rank,
            incarnation,
            token: token.to_owned(),
            replicas: 1,
            timeout: Duration::from_secs(30),
            max_batch_bytes: 1 << 20,
            max_pending_events: 1 << 20,
            send_eagerly: true,
            survivors_acknowledge: false,
        }
    }
}

/// A client failure. Once a logger refused or lost events, or returned a
/// storage error, every later call returns that error: events can no longer
/// be made durable and the rank must stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The configuration cannot work.
    #[error("invalid event-logger client configuration: {0}")]
    Config(String),
    /// A logger could not be reached in time.
    #[error("cannot reach event logger {addr} within {waited:?}: {cause}")]
    Unreachable {
        /// The logger.
        addr: SocketAddr,
        /// Time spent trying.
        waited: Duration,
        /// The last connection error.
        cause: String,
    },
    /// A logger refused the session or a put.
    #[error("event logger {addr}: {code}: {message}")]
    Refused {
        /// The logger.
        addr: SocketAddr,
        /// What kind of failure.
        code: ErrorCode,
        /// The logger's explanation.
        message: String,
    },
    /// A logger answered something the protocol does not allow.
    #[error("event logger {addr}: protocol violation: {why}")]
    Protocol {
        /// The logger.
        addr: SocketAddr,
        /// What happened.
        why: String,
    },
    /// An event did not become durable in time.
    #[error("event {id} not durable after {waited:?} (durable up to {durable}; {status})")]
    Timeout {
        /// The event waited for.
        id: EventId,
        /// Highest durable event.
        durable: EventId,
        /// Time waited.
        waited: Duration,
        /// State of each replica.
        status: String,
    },
    /// A request did not complete in time.
    #[error("{what} timed out after {waited:?} ({status})")]
    RequestTimeout {
        /// The request.
        what: &'static str,
        /// Time waited.
        waited: Duration,
        /// State of each replica.
        status: String,
    },
    /// A request failed at the logger.
    #[error("event logger {addr}: {code}: {message}")]
    Request {
        /// The logger.
        addr: SocketAddr,
        /// What kind of failure.
        code: ErrorCode,
        /// The logger's explanation.
        message: String,
    },
    /// Misuse of the API.
    #[error("{0}")]
    Usage(String),
    /// The client was closed.
    #[error("event-logger client is closed")]
    Closed,
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

    /// Queues one event and returns its id. See [`Client::put_batch`].
    pub fn put(&self, event: &Event) -> Result<EventId, ClientError> {
        self.put_batch(std::slice::from_ref(event))
    }

    /// Queues events, numbers them consecutively and starts sending them;
    /// returns the id of the last one (the current last id if `events` is
    /// empty). Does not wait for acknowledgement, only for room when too
    /// many events are in flight.
    pub fn put_batch(&self, events: &[Event]) -> Result<EventId, ClientError> {
        let sh = &*self.shared;
        for e in events {
            if e.encoded_len() > sh.cfg.max_batch_bytes.min(MAX_PUT_EVENT_BYTES) {
                return Err(ClientError::Usage(format!(
                    "an event of {} bytes exceeds the put size limit",
                    e.encoded_len()
                )));
            }
        }
        let started = Instant::now();
        let mut st = lock(&sh.st);
        loop {
            usable(&st)?;
            if st.queued_events == 0 || st.queued_events + events.len() <= sh.cfg.max_pending_events
            {
                break;
            }
            let waited = started.elapsed();
            if waited >= sh.cfg.timeout {
                let durable = sh.durable.load(Ordering::Acquire);
                return Err(ClientError::Timeout {
                    id: durable + 1,
                    durable,
                    waited,
                    status: status(sh, &st),
                });
            }
            st = wait(sh, st, sh.cfg.timeout - waited);
        }
        for e in events {
            let id = st.last_id + 1;
            push_event(&mut st, sh.cfg.max_batch_bytes, id, e);
        }
        let last = st.last_id;
        // Send now only to replicas with nothing in flight; the others get
        // these events, batched with later ones, when their ack arrives
        // (or at once when someone waits for them).
        let idle: Vec<usize> = if sh.cfg.send_eagerly {
            (0..st.reps.len())
                .filter(|&r| st.reps[r].acked >= st.reps[r].sent)
                .collect()
        } else {
            Vec::new()
        };
        drop(st);
        for r in idle {
            pump(sh, r);
        }
        Ok(last)
    }

    /// Id of the last event queued (0 if none).
    pub fn last_id(&self) -> EventId {
        lock(&self.shared.st).last_id
    }

    /// Highest durable id: acknowledged by every replica (by every replica
    /// that is up, with [`ClientConfig::survivors_acknowledge`]).
    pub fn durable(&self) -> EventId {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// Blocks until event `id` (and so every earlier one) is durable (see
    /// [`Client::durable`]), for at most the configured time-out.
    pub fn wait_durable(&self, id: EventId) -> Result<(), ClientError> {
        self.wait_durable_timeout(id, self.shared.cfg.timeout)
    }

    /// Blocks until every event queued so far is durable — the commit rule
    /// before a send. Returns at once when nothing is pending.
    pub fn wait_all_durable(&self) -> Result<(), ClientError> {
        let last = self.last_id();
        self.wait_durable(last)
    }

    /// [`Client::wait_durable`] with an explicit limit.
    pub fn wait_durable_timeout(&self, id: EventId, timeout: Duration) -> Result<(), ClientError> {
        let sh = &*self.shared;
        if sh.durable.load(Ordering::Acquire) >= id {
            return Ok(());
        }
        // Send whatever is still queued instead of waiting for an ack to
        // carry it out.
        for r in 0..sh.addrs.len() {
            pump(sh, r);
        }
        // The acknowledgement usually arrives within a loopback round trip:
        // a short spin avoids sleeping and being woken for it.
        let spin_until = Instant::now() + Duration::from_micros(50);
        while Instant::now() < spin_until {
            if sh.durable.load(Ordering::Acquire) >= id {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        let started = Instant::now();
        let mut st = lock(&sh.st);
        if id > st.last_id {
            return Err(ClientError::Usage(format!(
                "event {id} was never put (last id is {})",
                st.last_id
            )));
        }
        loop {
            let durable = sh.durable.load(Ordering::Acquire);
            if durable >= id {
                return Ok(());
            }
            usable(&st)?;
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(ClientError::Timeout {
                    id,
                    durable,
                    waited,
                    status: status(sh, &st),
                });
            }
            st = wait(sh, st, timeout - waited);
        }
    }

    /// The stored events with ids ≥ `from`, in order, read from the replica
    /// holding the most events.
    pub fn get_events(&self, from: EventId) -> Result<Vec<(EventId, Event)>, ClientError> {
        let rep = {
            let st = lock(&self.shared.st);
            let mut best = 0;
            for (i, r) in st.reps.iter().enumerate() {
                if r.acked > st.reps[best].acked {
                    best = i;
                }
            }
            best
        };
        Ok(self.get_from(rep, from)?.events())
    }

    fn get_from(&self, rep: usize, from: EventId) -> Result<EventBatch, ClientError> {
        let rank = self.shared.cfg.rank;
        match self.request(rep, "get events", |req| Message::Get { req, rank, from })? {
            Reply::Events(b) => Ok(b),
            _ => Err(self.unexpected(rep)),
        }
    }

    /// Lets every replica forget the events up to `up_to` (which must be
    /// durable), reclaiming whole segment files; returns the files and bytes
    /// reclaimed over all replicas.
    pub fn truncate(&self, up_to: EventId) -> Result<(u32, u64), ClientError> {
        let durable = self.durable();
        if up_to > durable {
            return Err(ClientError::Usage(format!(
                "cannot truncate up to event {up_to}: only events up to {durable} are durable"
            )));
        }
        let rank = self.shared.cfg.rank;
        let mut total = (0, 0);
        for rep in 0..self.shared.addrs.len() {
            match self.request(rep, "truncate", |req| Message::Truncate {
                req,
                rank,
                up_to,
            })? {
                Reply::Truncated(files, bytes) => {
                    total.0 += files;
                    total.1 += bytes;
                }
                _ => return Err(self.unexpected(rep)),
            }
        }
        Ok(total)
    }

    /// Store `bytes` on every replica as the off-host copy of this rank's
    /// checkpoint `index` (each keeps the newest two), for a restart on
    /// another host after this one is lost.
    pub fn save_copy(&self, index: u64, bytes: &[u8]) -> Result<(), ClientError> {
        let parts: Vec<&[u8]> = if bytes.is_empty() {
            vec![bytes]
        } else {
            bytes.chunks(crate::copies::PART_BYTES).collect()
        };
        for rep in 0..self.shared.addrs.len() {
            let mut offset = 0u64;
            for (i, part) in parts.iter().enumerate() {
                let last = i + 1 == parts.len();
                let reply =
                    self.request(rep, "save a checkpoint copy", |req| Message::SaveCopy {
                        req,
                        index,
                        offset,
                        last,
                        bytes: part.to_vec(),
                    })?;
                if !matches!(reply, Reply::CopySaved) {
                    return Err(self.unexpected(rep));
                }
                offset += part.len() as u64;
            }
        }
        Ok(())
    }

    /// The newest checkpoint copy of `rank` (of this job) that a replica of
    /// this client holds: `(index, bytes)`, or `None` if none holds one.
    pub fn load_copy(&self, rank: u32) -> Result<Option<(u64, Vec<u8>)>, ClientError> {
        let mut newest: Option<(usize, u64)> = None;
        for rep in 0..self.shared.addrs.len() {
            if let (index, ..) = self.copy_part(rep, rank, 0, 0)?
                && index > newest.map_or(0, |(_, i)| i)
            {
                newest = Some((rep, index));
            }
        }
        let Some((rep, index)) = newest else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        loop {
            let (got, total, part) = self.copy_part(rep, rank, index, bytes.len() as u64)?;
            if got != index || part.is_empty() && (bytes.len() as u64) < total {
                return Err(ClientError::Protocol {
                    addr: self.shared.addrs[rep],
                    why: format!("checkpoint copy {index} of rank {rank} vanished while read"),
                });
            }
            bytes.extend_from_slice(&part);
            if bytes.len() as u64 >= total {
                return Ok(Some((index, bytes)));
            }
        }
    }

    /// One part of a checkpoint copy: (index, total, bytes).
    fn copy_part(
        &self,
        rep: usize,
        rank: u32,
        index: u64,
        offset: u64,
    ) -> Result<(u64, u64, Vec<u8>), ClientError> {
        match self.request(rep, "load a checkpoint copy", |req| Message::LoadCopy {
            req,
            rank,
            index,
            offset,
        })? {
            Reply::CopyData(index, total, at, bytes) if at == offset => Ok((index, total, bytes)),
            _ => Err(self.unexpected(rep)),
        }
    }

    /// Counters of every replica, in replica order.
    pub fn stats(&self) -> Result<Vec<Stats>, ClientError> {
        (0..self.shared.addrs.len())
            .map(
                |rep| match self.request(rep, "stats", |req| Message::Stats { req })? {
                    Reply::Stats(s) => Ok(s),
                    _ => Err(self.unexpected(rep)),
                },
            )
            .collect()
    }

    /// The loggers this rank uses, primary first.
    pub fn replicas(&self) -> &[SocketAddr] {
        &self.shared.addrs
    }

    fn unexpected(&self, rep: usize) -> ClientError {
        ClientError::Protocol {
            addr: self.shared.addrs[rep],
            why: "reply of the wrong kind".into(),
        }
    }

    /// Sends a request to replica `rep` (retrying across reconnects) and
    /// waits for its reply.
    fn request(
        &self,
        rep: usize,
        what: &'static str,
        msg: impl Fn(u64) -> Message,
    ) -> Result<Reply, ClientError> {
        let sh = &*self.shared;
        let started = Instant::now();
        let timeout = sh.cfg.timeout;
        let mut st = lock(&sh.st);
        loop {
            usable(&st)?;
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(ClientError::RequestTimeout {
                    what,
                    waited,
                    status: status(sh, &st),
                });
            }
            if !st.reps[rep].up {
                st = wait(sh, st, timeout - waited);
                continue;
            }
            let generation = st.reps[rep].generation;
            let req = st.next_req;
            st.next_req += 1;
            st.requests.insert(
                req,
                Pending {
                    rep,
                    partial: EventBatch::new(),
                    outcome: None,
                },
            );
            drop(st);
            let mut frame = Vec::new();
            encode_frame(&msg(req), &mut frame);
            let sent = write_frame(sh, rep, generation, &frame);
            st = lock(&sh.st);
            if let Err(e) = sent {
                st.requests.remove(&req);
                mark_down(sh, &mut st, rep, generation, format!("write failed: {e}"));
                continue;
            }
            loop {
                let outcome = st.requests.get_mut(&req).and_then(|p| p.outcome.take());
                match outcome {
                    Some(Ok(reply)) => {
                        st.requests.remove(&req);
                        return Ok(reply);
                    }
                    // The connection was lost: ask again once it is back.
                    Some(Err(ClientError::Closed)) if !st.closing => {
                        st.requests.remove(&req);
                        break;
                    }
                    Some(Err(e)) => {
                        st.requests.remove(&req);
                        return Err(e);
                    }
                    None => {}
                }
                let waited = started.elapsed();
                if st.fatal.is_some() || st.closing || waited >= timeout {
                    st.requests.remove(&req);
                    break;
                }
                st = wait(sh, st, timeout - waited);
            }
        }
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

/// Appends one event to the queue, numbering it `id` (= last id + 1).
fn push_event(st: &mut State, max_batch: usize, id: EventId, e: &Event) {
    st.last_id = id;
    st.queued_events += 1;
    // Extend the last chunk while no replica has started sending it.
    let max_sent = st.reps.iter().map(|r| r.sent).max().unwrap_or(0);
    if let Some(c) = st.queue.back_mut()
        && c.first > max_sent
        && c.bytes.len() + e.encoded_len() <= max_batch
        && c.count < u32::MAX
    {
        e.encode(id, &mut c.bytes);
        c.count += 1;
        return;
    }
    let mut bytes = Vec::with_capacity(e.encoded_len());
    e.encode(id, &mut bytes);
    st.queue.push_back(Chunk {
        first: id,
        count: 1,
        bytes,
    });
}

/// One line on each replica, for errors.
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

/// Writes a frame on replica `rep`'s connection of `generation`.
fn write_frame(sh: &Shared, rep: usize, generation: u64, frame: &[u8]) -> std::io::Result<()> {
    let mut guard = lock(&sh.streams[rep]);
    match &mut *guard {
        Some((g, stream)) if *g == generation => stream.write_all(frame),
        _ => Err(std::io::Error::new(
            ErrorKind::NotConnected,
            "connection replaced",
        )),
    }
}

/// Marks a connection lost (if it is still the current one).
fn mark_down(sh: &Shared, st: &mut State, rep: usize, generation: u64, why: String) {
    let r = &mut st.reps[rep];
    if r.generation != generation || !r.up {
        return;
    }
    r.up = false;
    tracing::debug!(logger = %sh.addrs[rep], %why, "event-logger connection lost");
    r.last_error = Some(why);
    if let Some((_, s)) = &*lock(&sh.streams[rep]) {
        let _ = s.shutdown(Shutdown::Both);
    }
    for p in st.requests.values_mut() {
        if p.rep == rep {
            p.outcome.get_or_insert(Err(ClientError::Closed));
        }
    }
    // The survivors alone may now make events durable.
    advance(sh, st);
    sh.cv.notify_all();
}

/// Sends replica `rep` every queued event it has not been sent, unless
/// another thread is already doing so (that thread will send ours too).
fn pump(sh: &Shared, rep: usize) {
    let mut st = lock(&sh.st);
    if st.reps[rep].writing {
        return;
    }
    st.reps[rep].writing = true;
    let mut frame = Vec::new();
    loop {
        let r = &st.reps[rep];
        if !r.up || st.fatal.is_some() {
            break;
        }
        let (generation, sent) = (r.generation, r.sent);
        let start = st.queue.partition_point(|c| c.last() <= sent);
        let mut parts: Vec<&[u8]> = Vec::new();
        let (mut count, mut bytes, mut last) = (0u32, 0usize, sent);
        for c in st.queue.range(start..) {
            let part: &[u8] = if c.first <= sent {
                // Resending after a reconnect from the middle of a chunk.
                let b = EventBatch::parse(c.count, &c.bytes).unwrap_or_default();
                let (n, s) = b.suffix_from(sent + 1);
                let off = c.bytes.len() - s.len();
                count += n;
                &c.bytes[off..]
            } else {
                if count > 0 && bytes + c.bytes.len() > sh.cfg.max_batch_bytes {
                    break;
                }
                count += c.count;
                &c.bytes
            };
            bytes += part.len();
            last = c.last();
            parts.push(part);
        }
        if count == 0 {
            break;
        }
        frame.clear();
        encode_put_raw(sh.cfg.rank, count, &parts, &mut frame);
        st.reps[rep].sent = last;
        drop(st);
        let result = write_frame(sh, rep, generation, &frame);
        st = lock(&sh.st);
        if let Err(e) = result {
            mark_down(sh, &mut st, rep, generation, format!("write failed: {e}"));
        }
    }
    st.reps[rep].writing = false;
}

/// Recomputes the durable id and drops the events every replica holds.
///
/// With [`ClientConfig::survivors_acknowledge`], an event is durable once
/// every replica that is up acknowledged it: while a logger is down (and
/// restarted), the survivors acknowledge; with none up, nothing becomes
/// durable. The queue keeps what any replica lacks, to send it again when
/// that replica is back.
fn advance(sh: &Shared, st: &mut State) {
    let survivors = sh.cfg.survivors_acknowledge;
    let durable = st
        .reps
        .iter()
        .filter(|r| r.up || !survivors)
        .map(|r| r.acked)
        .min()
        .unwrap_or(0)
        .min(st.last_id);
    if durable > sh.durable.load(Ordering::Relaxed) {
        sh.durable.store(durable, Ordering::Release);
    }
    let held_by_all = st.reps.iter().map(|r| r.acked).min().unwrap_or(0);
    while let Some(c) = st.queue.front() {
        if c.last() > held_by_all {
            break;
        }
        st.queued_events -= c.count as usize;
        st.queue.pop_front();
    }
}

fn fatal(sh: &Shared, st: &mut State, e: ClientError) {
    tracing::error!(error = %e, "event-logger client failed");
    st.fatal.get_or_insert(e);
    sh.cv.notify_all();
}

/// Connects replica `rep`, says hello, and returns the stream with the
/// Welcome's (highest, first kept).
fn connect(sh: &Shared, rep: usize) -> Result<(TcpStream, EventId, EventId), ClientError> {
    let addr = sh.addrs[rep];
    let limit = sh.cfg.timeout.min(Duration::from_secs(5));
    let unreachable = |cause: String| ClientError::Unreachable {
        addr,
        waited: Duration::ZERO,
        cause,
    };
    let mut stream =
        TcpStream::connect_timeout(&addr, limit).map_err(|e| unreachable(e.to_string()))?;
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(limit))
        .map_err(|e| unreachable(e.to_string()))?;
    let mut frame = Vec::new();
    encode_frame(
        &Message::Hello(Hello {
            job: sh.cfg.job.clone(),
            rank: sh.cfg.rank,
            incarnation: sh.cfg.incarnation,
            token: sh.cfg.token.clone(),
        }),
        &mut frame,
    );
    stream
        .write_all(&frame)
        .map_err(|e| unreachable(e.to_string()))?;
    let mut buf = Vec::new();
    let msg = read_one(&mut stream, &mut buf).map_err(unreachable)?;
    stream
        .set_read_timeout(None)
        .map_err(|e| unreachable(e.to_string()))?;
    match msg {
        Message::Welcome {
            highest,
            first_kept,
        } => Ok((stream, highest, first_kept)),
        Message::Error { code, message, .. } => Err(ClientError::Refused {
            addr,
            code,
            message,
        }),
        other => Err(ClientError::Protocol {
            addr,
            why: format!("expected Welcome, got {other:?}"),
        }),
    }
}

/// Reads exactly one frame (used only for the Welcome).
fn read_one(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Message, String> {
    let mut chunk = [0u8; 4096];
    loop {
        match decode_frame(buf, MAX_FRAME).map_err(|e| e.to_string())? {
            Decoded::Frame(m, used) => {
                buf.drain(..used);
                return Ok(m);
            }
            Decoded::NeedMore(_) => {}
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err("connection closed by the logger".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Driver thread of replica `rep`: (re)connects and reads replies.
fn drive(sh: &Shared, rep: usize) {
    let addr = sh.addrs[rep];
    let mut backoff = Duration::from_millis(5);
    loop {
        {
            let st = lock(&sh.st);
            if st.closing || st.fatal.is_some() {
                return;
            }
        }
        match connect(sh, rep) {
            Ok((stream, highest, first_kept)) => {
                backoff = Duration::from_millis(5);
                let reader = match stream.try_clone() {
                    Ok(r) => r,
                    Err(e) => {
                        let mut st = lock(&sh.st);
                        st.reps[rep].last_error = Some(e.to_string());
                        continue;
                    }
                };
                let generation = {
                    let mut st = lock(&sh.st);
                    if st.closing {
                        return;
                    }
                    let r = &st.reps[rep];
                    if highest < r.acked {
                        let e = ClientError::Protocol {
                            addr,
                            why: format!(
                                "logger lost acknowledged events: it acknowledged up to {} but now holds only up to {highest}",
                                r.acked
                            ),
                        };
                        fatal(sh, &mut st, e);
                        return;
                    }
                    if st.numbering_ready && highest > st.last_id {
                        let e = ClientError::Protocol {
                            addr,
                            why: format!(
                                "logger holds event {highest} but this client only created up to {} (another writer for this rank?)",
                                st.last_id
                            ),
                        };
                        fatal(sh, &mut st, e);
                        return;
                    }
                    let r = &mut st.reps[rep];
                    r.generation += 1;
                    r.up = true;
                    r.goodbye = false;
                    r.sent = highest;
                    r.acked = highest;
                    r.welcomed.get_or_insert((highest, first_kept));
                    let generation = r.generation;
                    *lock(&sh.streams[rep]) = Some((generation, stream));
                    advance(sh, &mut st);
                    sh.cv.notify_all();
                    generation
                };
                tracing::debug!(logger = %addr, highest, "event-logger session open");
                pump(sh, rep);
                let why = read_loop(sh, rep, reader);
                let mut st = lock(&sh.st);
                mark_down(sh, &mut st, rep, generation, why);
                *lock(&sh.streams[rep]) = None;
            }
            Err(e @ (ClientError::Refused { .. } | ClientError::Protocol { .. }))
                if !matches!(
                    e,
                    ClientError::Refused {
                        code: ErrorCode::Unavailable,
                        ..
                    }
                ) =>
            {
                let mut st = lock(&sh.st);
                if !st.closing {
                    fatal(sh, &mut st, e);
                }
                return;
            }
            Err(e) => {
                let mut st = lock(&sh.st);
                st.reps[rep].last_error = Some(match e {
                    ClientError::Unreachable { cause, .. } => cause,
                    other => other.to_string(),
                });
                sh.cv.notify_all();
            }
        }
        // Back off before the next attempt (woken early by close).
        let st = lock(&sh.st);
        if st.closing || st.fatal.is_some() {
            return;
        }
        drop(wait(sh, st, backoff));
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

/// Reads replies until the connection ends; returns why it ended.
fn read_loop(sh: &Shared, rep: usize, mut stream: TcpStream) -> String {
    let addr = sh.addrs[rep];
    let mut buf = vec![0u8; 64 << 10];
    let (mut start, mut end) = (0usize, 0usize);
    loop {
        loop {
            match decode_frame(&buf[start..end], MAX_FRAME) {
                Ok(Decoded::Frame(msg, used)) => {
                    start += used;
                    match on_message(sh, rep, msg) {
                        Ok(false) => {}
                        Ok(true) => pump(sh, rep),
                        Err(why) => return why,
                    }
                }
                Ok(Decoded::NeedMore(need)) => {
                    if start > 0 {
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                    }
                    if need > buf.len() {
                        buf.resize(need, 0);
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!(logger = %addr, error = %e, "undecodable frame from the event logger");
                    return format!("undecodable frame: {e}");
                }
            }
        }
        match stream.read(&mut buf[end..]) {
            Ok(0) => return "connection closed by the logger".into(),
            Ok(n) => end += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return format!("read failed: {e}"),
        }
    }
}

/// Handles one reply: `Ok(true)` asks for queued events to be sent,
/// `Err(why)` ends the connection.
fn on_message(sh: &Shared, rep: usize, msg: Message) -> Result<bool, String> {
    let addr = sh.addrs[rep];
    let mut st = lock(&sh.st);
    match msg {
        Message::Ack { highest } => {
            if highest > st.last_id && st.numbering_ready {
                let e = ClientError::Protocol {
                    addr,
                    why: format!(
                        "acknowledged event {highest}, beyond the last one created ({})",
                        st.last_id
                    ),
                };
                fatal(sh, &mut st, e);
                return Err("protocol violation".into());
            }
            let r = &mut st.reps[rep];
            if highest > r.acked {
                r.acked = highest;
                let before = sh.durable.load(Ordering::Relaxed);
                advance(sh, &mut st);
                if sh.durable.load(Ordering::Relaxed) > before {
                    sh.cv.notify_all();
                }
            }
            // Events queued while the acknowledged ones were in flight.
            let r = &st.reps[rep];
            if r.acked >= r.sent && r.sent < st.last_id && !r.writing {
                return Ok(true);
            }
        }
        Message::Events { req, last, batch } => {
            if let Some(p) = st.requests.get_mut(&req) {
                if let Err(e) = p.partial.extend(&batch) {
                    p.outcome = Some(Err(ClientError::Protocol {
                        addr,
                        why: e.to_string(),
                    }));
                } else if last {
                    p.outcome = Some(Ok(Reply::Events(std::mem::take(&mut p.partial))));
                }
                if last {
                    sh.cv.notify_all();
                }
            }
        }
        Message::Truncated {
            req,
            segments,
            bytes,
        } => complete(sh, &mut st, req, Ok(Reply::Truncated(segments, bytes))),
        Message::StatsReply { req, stats } => complete(sh, &mut st, req, Ok(Reply::Stats(stats))),
        Message::CopySaved { req } => complete(sh, &mut st, req, Ok(Reply::CopySaved)),
        Message::CopyData {
            req,
            index,
            total,
            offset,
            bytes,
        } => complete(
            sh,
            &mut st,
            req,
            Ok(Reply::CopyData(index, total, offset, bytes)),
        ),
        Message::Error { req, code, message } if req != 0 => {
            complete(
                sh,
                &mut st,
                req,
                Err(ClientError::Request {
                    addr,
                    code,
                    message,
                }),
            );
        }
        Message::Error { code, message, .. } => {
            if code == ErrorCode::Unavailable {
                return Err(format!("{code}: {message}"));
            }
            let why = format!("{code}: {message}");
            fatal(
                sh,
                &mut st,
                ClientError::Refused {
                    addr,
                    code,
                    message,
                },
            );
            return Err(why);
        }
        Message::Goodbye => {
            st.reps[rep].goodbye = true;
            sh.cv.notify_all();
            return Err("session ended".into());
        }
        other => {
            let e = ClientError::Protocol {
                addr,
                why: format!("unexpected message {other:?}"),
            };
            fatal(sh, &mut st, e);
            return Err("protocol violation".into());
        }
    }
    Ok(false)
}

fn complete(sh: &Shared, st: &mut State, req: u64, outcome: Result<Reply, ClientError>) {
    if let Some(p) = st.requests.get_mut(&req) {
        p.outcome = Some(outcome);
        sh.cv.notify_all();
    }
}
