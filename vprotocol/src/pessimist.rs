//! The pessimist protocol (seed 002, made complete): failure-free path.
//!
//! * **Events.** Only non-deterministic outcomes become events, each named
//!   by the call id of the call it belongs to (never by a request slot):
//!   `Match` when a receive posted with ANY_SOURCE matches; `Delivery` with
//!   the completed request ids for `test`, `test_any`, `test_some`,
//!   `test_all`, `wait_any`, `wait_some` (unless every completed request is
//!   a send that completed when it started — that answer is determined);
//!   `Probe` for every `iprobe` and for `probe` with ANY_SOURCE; `Cancel`
//!   for `cancel` of a receive. Consecutive unsuccessful tests and iprobes
//!   are one lazy `NoneRun`: dropped if a later call of the run succeeds
//!   before anything was flushed, otherwise logged before the next send.
//! * **Commit rule.** Events are batched and pipelined to the loggers by
//!   the client; before an application message leaves, every event created
//!   before it must be durable. A send with no event pending pays nothing:
//!   while none is pending and the log has room ready, the protocol's
//!   [`Protocol::send_gate`] tells the engine that small sends need no
//!   [`Protocol::send`] call at all (an event closes it at once).
//! * **Sender-based log.** Every payload is copied into the rank's
//!   memory-mapped sender log, and a send completes only once it is there.
//!   [`Protocol::send`] reserves the room (so the copy cannot fail later);
//!   [`Protocol::keep`] copies. The engine overlaps the copy with the
//!   transfer where it can: a small message is copied right after it is
//!   written to the receiver's ring, and a large one on shared memory while
//!   the receiver reads it out of the caller's buffer (single copy), so
//!   logging adds one copy that runs beside the transfer's. Otherwise
//!   (fragments, TCP) the transport sends from the log.
//! * **Checkpoints and garbage collection.** [`Protocol::checkpoint`]
//!   stores the engine's state, the id of the last event and the
//!   application's bytes in the rank's [`CheckpointStore`] (last two
//!   kept). Then everything older than the *older* kept checkpoint is
//!   freed: the loggers truncate this rank's events up to that
//!   checkpoint's last event, and every sender frees its log records to
//!   this rank up to the number it had received then.
//! * **Restart.** A restarted process (incarnation > 0) loads its newest
//!   intact checkpoint, reopens its sender log keeping the records sent
//!   before that checkpoint (peers may still need them — the log files
//!   outlive the process), and fetches its events logged after it. While
//!   re-executing up to the last logged event it answers from them:
//!   ANY_SOURCE receives are forced to the logged source, completion calls
//!   return the logged sets, probes the logged answers, and calls without
//!   an event "nothing" (they failed the first time). Nothing is logged
//!   again during that replay.
//! * **Divergence is never silent.** While it re-executes, a restarted
//!   process checks every logged outcome as its call consumes it
//!   ([`crate::replay_log`]) and every send against the record its previous
//!   process logged for the same destination and sequence number
//!   ([`crate::previous_sends`]); the first difference stops the job with
//!   [`Error::Diverged`]. None of this runs on a first start.

use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use vpml_event_logger::{Client, ClientConfig, Event};

use crate::event_log::EventLog;
use vpml_fault_points::fault_point;
use vpml_pml::bootstrap::JobEnv;
use vpml_pml::matching::RecvSpec;
use vpml_pml::protocol::{
    CallId, CompletionKind, LoggedMessage, OutgoingMessage, Protocol, RecvPlan, Replay,
    RequestInfo, SendPlan,
};
use vpml_pml::recovery::EngineSnapshot;
use vpml_pml::{Error, Result, Status};
use vpml_sender_log::{DEFAULT_SEGMENT_SIZE, RecordHeader, SenderLog};

use crate::checkpoint::CheckpointStore;
use crate::env;
use crate::histogram::Histogram;
use crate::previous_sends::PreviousSends;
use crate::replay_log::ReplayLog;

/// A sender-log record as the engine re-sends it (the payload stays in
/// the log's mapping).
pub(crate) fn logged(r: vpml_sender_log::Record<'_>) -> LoggedMessage {
    LoggedMessage {
        context: r.header.context,
        tag: r.header.tag,
        seq: r.header.seq,
        ptr: r.payload.as_ptr(),
        len: r.payload.len(),
    }
}

/// Everything the pessimist protocol needs to start.
#[derive(Clone, Debug)]
pub struct Config {
    /// Job id (the loggers' job name).
    pub job: String,
    /// This rank.
    pub rank: usize,
    /// Incarnation of this process.
    pub incarnation: u32,
    /// The job token.
    pub token: String,
    /// Event loggers.
    pub loggers: Vec<std::net::SocketAddr>,
    /// Loggers that must hold an event before it is durable.
    pub replicas: usize,
    /// This rank's sender-log directory.
    pub log_dir: PathBuf,
    /// Sender-log segment size.
    pub segment_size: usize,
    /// Keep the sender log in memory (spilled to a file at each
    /// checkpoint) rather than in files. `VPML_SENDER_LOG=memory|file`.
    pub log_in_memory: bool,
    /// Never free events or log records (`vpml run --record`:
    /// `VPML_KEEP_LOGS=1`).
    pub keep_logs: bool,
    /// Send each event to the loggers as soon as it exists (`true`), or
    /// batch them until the next send needs them (the default; each socket
    /// write that wakes a logger costs ~10 µs on virtual machines).
    /// `VPML_EVENTS_EAGER=1` selects eager sending.
    pub send_eagerly: bool,
    /// The loggers are restarted from their files when they die (`vpml
    /// run` started them: `VPML_LOGGERS_RESTARTED=1`), so the survivors
    /// may acknowledge meanwhile.
    pub loggers_restarted: bool,
    /// Copy every checkpoint to the event loggers, for a restart on
    /// another host (`VPML_CHECKPOINT_COPIES=loggers`).
    pub copies: bool,
    /// Print the one-line notices of a restart on stderr (a lost host, a
    /// damaged checkpoint). The simulator, which restarts ranks by the
    /// thousand, turns them off.
    pub notices: bool,
}

impl Config {
    /// Read the configuration `vpml run --protocol pessimist` sets up.
    pub fn from_env(job: &JobEnv) -> Result<Config> {
        let loggers = crate::parse_addrs(&crate::var(env::EVENT_LOGGERS)?)?;
        if loggers.is_empty() {
            return Err(Error::Bootstrap(format!(
                "{} lists no logger",
                env::EVENT_LOGGERS
            )));
        }
        let num = |name: &str, default: usize| -> Result<usize> {
            match std::env::var(name) {
                Ok(v) => v
                    .parse()
                    .map_err(|_| Error::Bootstrap(format!("{name}={v:?} is not a number"))),
                Err(_) => Ok(default),
            }
        };
        Ok(Config {
            job: job.job_id.clone(),
            rank: job.rank,
            incarnation: num(env::INCARNATION, 0)? as u32,
            token: job.token.clone(),
            replicas: num(env::REPLICAS, 1)?.clamp(1, loggers.len()),
            loggers,
            log_dir: crate::log_dir(job.rank)?,
            segment_size: num("VPML_LOG_SEGMENT_SIZE", DEFAULT_SEGMENT_SIZE)?,
            send_eagerly: num("VPML_EVENTS_EAGER", 0)? != 0,
            loggers_restarted: num("VPML_LOGGERS_RESTARTED", 0)? != 0,
            keep_logs: num("VPML_KEEP_LOGS", 0)? != 0,
            copies: crate::offhost::enabled()?,
            notices: true,
            log_in_memory: match std::env::var("VPML_SENDER_LOG").as_deref() {
                Ok("memory") => true,
                Ok("file") | Ok("") | Err(_) => false,
                Ok(other) => {
                    return Err(Error::Bootstrap(format!(
                        "VPML_SENDER_LOG={other:?}: expected memory or file"
                    )));
                }
            },
        })
    }
}

/// Counters for `--stats`.
#[derive(Default, Debug, Clone)]
struct Counters {
    matches: u64,
    probes: u64,
    deliveries: u64,
    none_runs: u64,
    none_runs_dropped: u64,
    cancels: u64,
    sends: u64,
    sends_waited: u64,
    /// Time each waiting send spent waiting for durability.
    waits: Histogram,
    /// Time spent handing events to the logger client, in ns.
    put_ns: u64,
    checkpoints: u64,
    checkpoint_ns: u64,
    events_replayed: u64,
    records_freed: u64,
}

/// What a checkpoint of this protocol holds besides the engine's state.
struct SavedCheckpoint {
    /// Id of the last event logged before it (all durable).
    event_id: u64,
    /// Messages received from each rank then.
    recv_seq: Vec<u64>,
}

/// Where checkpoint `index` keeps the sender-log records of a memory log.
fn spill_path(dir: &std::path::Path, index: u64) -> PathBuf {
    dir.join(format!("log-{index:010}.vlog"))
}

/// Encode a checkpoint: last event id, engine snapshot, application bytes.
fn encode_checkpoint(event_id: u64, engine: &EngineSnapshot, app: &[u8]) -> Vec<u8> {
    let e = engine.encode();
    let mut b = Vec::with_capacity(16 + e.len() + app.len());
    b.extend_from_slice(&event_id.to_le_bytes());
    b.extend_from_slice(&(e.len() as u64).to_le_bytes());
    b.extend_from_slice(&e);
    b.extend_from_slice(app);
    b
}

fn decode_checkpoint(b: &[u8]) -> std::result::Result<(u64, EngineSnapshot, Vec<u8>), String> {
    if b.len() < 16 {
        return Err("checkpoint payload too short".into());
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let event_id = word(0);
    let len = usize::try_from(word(8)).map_err(|_| "engine state length overflows")?;
    let end = 16usize
        .checked_add(len)
        .filter(|&e| e <= b.len())
        .ok_or("engine state cut short")?;
    let (snap, rest) = EngineSnapshot::decode(&b[16..end])?;
    if !rest.is_empty() {
        return Err("trailing bytes after the engine state".into());
    }
    Ok((event_id, snap, b[end..].to_vec()))
}

/// The pessimist protocol of one rank.
pub struct Pessimist {
    client: Box<dyn EventLog>,
    log: SenderLog,
    /// A run of unsuccessful tests/iprobes not yet logged: (first, last) call.
    none_run: Option<(CallId, CallId)>,
    /// Highest event id known durable.
    durable: u64,
    /// Id of the last event handed to the client.
    last_put: u64,
    /// The engine's shortcut past [`Protocol::send`]: sends of fewer
    /// payload bytes need nothing from it (see [`Pessimist::update_gate`]).
    gate: Rc<Cell<usize>>,
    counters: Counters,
    store: CheckpointStore,
    /// Index the next checkpoint gets.
    next_checkpoint: u64,
    /// The newest checkpoint (the older kept one once the next is saved).
    newest: Option<SavedCheckpoint>,
    /// The engine state to restore, until the engine takes it.
    restored: Option<EngineSnapshot>,
    /// The application's state of the checkpoint restarted from.
    app_state: Option<Vec<u8>>,
    /// Logged events to replay (restarted process).
    replay: ReplayLog,
    /// Re-executing up to the last logged event (until a send past it).
    replaying: bool,
    /// What the previous process sent after the checkpoint: re-executed
    /// sends are checked against it.
    previous: PreviousSends,
    rank: usize,
    incarnation: u32,
    log_in_memory: bool,
    keep_logs: bool,
    /// Copy checkpoints to the loggers ([`Config::copies`]).
    copies: bool,
}

fn fail(what: &str, e: impl std::fmt::Display) -> Error {
    Error::EngineFailed(format!("pessimist protocol: {what}: {e}"))
}

impl Pessimist {
    /// Connect to the loggers and create the sender log.
    pub fn start(cfg: Config) -> Result<Pessimist> {
        let mut cc = ClientConfig::new(
            cfg.loggers.clone(),
            &cfg.job,
            cfg.rank as u32,
            cfg.incarnation,
            &cfg.token,
        );
        cc.replicas = cfg.replicas;
        cc.send_eagerly = cfg.send_eagerly;
        cc.survivors_acknowledge = cfg.loggers_restarted;
        let client = Client::connect(cc).map_err(|e| fail("connecting to the event loggers", e))?;
        Pessimist::start_with(cfg, Box::new(client))
    }

    /// Start over `client` (the simulator passes its in-memory loggers;
    /// `cfg.loggers` and the token are then unused).
    pub fn start_with(cfg: Config, client: Box<dyn EventLog>) -> Result<Pessimist> {
        let ckpt_dir = cfg.log_dir.join("checkpoints");
        if cfg.incarnation > 0 && cfg.copies && !cfg.log_dir.exists() {
            // Restarted, and this rank's files are gone with the host that
            // held them: start from the copy on the loggers.
            let copied = crate::offhost::restore(
                client.as_ref(),
                cfg.rank as u32,
                &cfg.log_dir,
                spill_path,
            )?;
            if cfg.notices {
                eprintln!(
                    "vpml: rank {}: {} is gone (its host was lost): restarting from {}",
                    cfg.rank,
                    cfg.log_dir.display(),
                    match copied {
                        Some(i) => format!("the copy of checkpoint {i} on the event loggers"),
                        None => "the beginning (no checkpoint was copied)".to_string(),
                    }
                );
            }
        }
        if cfg.incarnation == 0 && ckpt_dir.exists() {
            // A first start never resumes anything an earlier job left.
            std::fs::remove_dir_all(&ckpt_dir)
                .map_err(|e| fail(&format!("clearing {}", ckpt_dir.display()), e))?;
        }
        let store = CheckpointStore::open(&ckpt_dir)
            .map_err(|e| fail("opening the checkpoint directory", e))?;
        let mut loaded = None;
        if cfg.incarnation > 0
            && let Some(l) = store
                .load_latest()
                .map_err(|e| fail("reading the checkpoints", e))?
        {
            let (event_id, snap, app) = decode_checkpoint(&l.payload)
                .map_err(|e| fail(&format!("checkpoint {}", l.index), e))?;
            tracing::info!(
                rank = cfg.rank,
                checkpoint = l.index,
                fell_back = l.fell_back,
                "restarting from a checkpoint"
            );
            if l.fell_back && cfg.notices {
                eprintln!(
                    "vpml: rank {}: falling back to checkpoint {}: a newer one is damaged",
                    cfg.rank, l.index
                );
            }
            loaded = Some((l.index, event_id, snap, app));
            fault_point!("recovery.loaded_checkpoint");
        }
        let rank = cfg.rank as u32;
        // The log of the checkpoint comes from its spill file: always for
        // a memory log; for a file log, when the checkpoint was copied back
        // from the loggers after its host was lost (until the records are
        // in the new log, the spill stays: a restart meanwhile reads it
        // again).
        let from_spill = loaded
            .as_ref()
            .is_some_and(|(index, ..)| cfg.log_in_memory || spill_path(&ckpt_dir, *index).exists());
        // Before the log forgets them: what the previous process sent
        // after its checkpoint, to check the re-execution against.
        // (Gone with a lost host: re-executed sends go unchecked then.)
        let previous = if cfg.incarnation > 0 && !from_spill && !cfg.log_in_memory {
            let after = |d: u32| {
                loaded.as_ref().map_or(0, |(_, _, snap, _)| {
                    snap.send_seq.get(d as usize).copied().unwrap_or(0)
                })
            };
            PreviousSends::read(&cfg.log_dir, after)
                .map_err(|e| fail("reading the previous process's sender log", e))?
        } else {
            PreviousSends::default()
        };
        let log = match &loaded {
            Some((index, _, snap, _)) => {
                let keep = |d: u32| snap.send_seq.get(d as usize).copied().unwrap_or(0);
                let spill = spill_path(&ckpt_dir, *index);
                if from_spill && cfg.log_in_memory {
                    SenderLog::restore(&spill, None, rank, cfg.segment_size, keep)
                        .map_err(|e| fail("restoring the sender log of the checkpoint", e))?
                } else if from_spill {
                    // Copied back after a lost host: the spill becomes the
                    // file log's first segment, kept like any other (peers
                    // may need its records after later checkpoints too).
                    SenderLog::adopt_spill(&spill, &cfg.log_dir)
                        .map_err(|e| fail("restoring the sender log of the checkpoint", e))?;
                    let log = SenderLog::reopen(&cfg.log_dir, rank, cfg.segment_size, keep)
                        .map_err(|e| fail("reopening the sender log", e))?;
                    std::fs::remove_file(&spill)
                        .map_err(|e| fail(&format!("removing {}", spill.display()), e))?;
                    log
                } else {
                    SenderLog::reopen(&cfg.log_dir, rank, cfg.segment_size, keep)
                        .map_err(|e| fail("reopening the sender log", e))?
                }
            }
            None if cfg.log_in_memory => SenderLog::create_in_memory(rank, cfg.segment_size),
            None => SenderLog::create(&cfg.log_dir, rank, cfg.segment_size)
                .map_err(|e| fail("creating the sender log", e))?,
        };
        let mut replay = ReplayLog::default();
        if cfg.incarnation > 0 {
            let (from, after_call) = loaded
                .as_ref()
                .map_or((1, 0), |(_, id, snap, _)| (id + 1, snap.last_call));
            let events = client
                .get_events(from)
                .map_err(|e| fail("fetching the logged events", e))?;
            // The loggers numbered events up to `last_id`: from `from` on,
            // every one of them must still be there.
            let first = events.first().map_or(client.last_id() + 1, |&(id, _)| id);
            if first != from && client.last_id() >= from {
                // Freed after a checkpoint this process cannot restart from.
                return Err(fail(
                    "fetching the logged events",
                    format!(
                        "the loggers no longer hold events {from}..{}: replay from {} is impossible",
                        first - 1,
                        if from == 1 {
                            "the beginning".to_string()
                        } else {
                            format!("event {from}")
                        }
                    ),
                ));
            }
            replay = ReplayLog::new(events, after_call);
            fault_point!("recovery.fetched_events");
            tracing::info!(
                rank = cfg.rank,
                events = replay.len(),
                until_call = replay.end(),
                "replaying logged events"
            );
        }
        let durable = client.durable();
        let next_checkpoint = match &loaded {
            Some((index, ..)) => index + 1,
            None => store
                .indices()
                .map_err(|e| fail("listing the checkpoints", e))?
                .last()
                .map_or(1, |i| i + 1),
        };
        let restart_from = loaded.as_ref().map_or(0, |(index, ..)| *index);
        let (newest, restored, app_state) = match loaded {
            Some((_, event_id, snap, app)) => (
                Some(SavedCheckpoint {
                    event_id,
                    recv_seq: snap.recv_seq.clone(),
                }),
                Some(snap),
                Some(app),
            ),
            None => (None, None, None),
        };
        let counters = Counters {
            events_replayed: replay.len() as u64,
            ..Counters::default()
        };
        if cfg.incarnation > 0 {
            vpml_pml::bootstrap::write_output_mark(vpml_pml::bootstrap::RESTART_MARK, restart_from);
        }
        Ok(Pessimist {
            replaying: replay.end() > 0,
            previous,
            rank: cfg.rank,
            incarnation: cfg.incarnation,
            client,
            log,
            none_run: None,
            durable,
            last_put: durable,
            gate: Rc::default(),
            counters,
            store,
            next_checkpoint,
            newest,
            restored,
            app_state,
            replay,
            log_in_memory: cfg.log_in_memory,
            keep_logs: cfg.keep_logs,
            copies: cfg.copies,
        })
    }

    /// Delete the log spill files of checkpoints that are gone.
    fn remove_stale_spills(&self) -> Result<()> {
        let kept = self
            .store
            .indices()
            .map_err(|e| fail("listing the checkpoints", e))?;
        let oldest = kept.first().copied().unwrap_or(0);
        let dir = self.store.dir();
        let entries =
            std::fs::read_dir(dir).map_err(|e| fail(&format!("listing {}", dir.display()), e))?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let index = name
                .strip_prefix("log-")
                .and_then(|n| n.strip_suffix(".vlog"))
                .and_then(|n| n.parse::<u64>().ok());
            if index.is_some_and(|i| i < oldest) {
                std::fs::remove_file(e.path())
                    .map_err(|err| fail(&format!("removing {}", e.path().display()), err))?;
            }
        }
        Ok(())
    }

    /// Open the engine's shortcut past `send` for the room the log has
    /// ready, if no event waits to become durable (the commit rule has
    /// nothing to wait for); closed otherwise.
    fn update_gate(&self) {
        let nothing_pending = self.none_run.is_none()
            && self.last_put <= self.durable
            && !self.replaying
            && self.previous.is_done();
        self.gate.set(if nothing_pending {
            self.log.ready_below()
        } else {
            0
        });
    }

    /// Calls up to the last logged event are replayed, not logged again.
    fn replayed(&self, call: CallId) -> bool {
        self.replay.covers(call)
    }

    /// The one-line error of a re-execution that left the logged one.
    fn diverged(&self, what: impl std::fmt::Display) -> Error {
        Error::diverged(self.rank, self.incarnation, what)
    }

    /// A re-executed send: no event may be logged at its call, and it must
    /// equal the previous process's record of it.
    fn check_send(&mut self, msg: &OutgoingMessage<'_>) -> Result<()> {
        if self.replaying {
            let now = crate::replay_log::describe_send(msg);
            if let Err(d) = self.replay.plain(msg.call, &now) {
                return Err(self.diverged(d));
            }
            self.replaying = self.replay.covers(msg.call);
        }
        if let Err(what) = self.previous.check(msg) {
            return Err(self.diverged(what));
        }
        Ok(())
    }

    fn put(&mut self, event: Event) -> Result<()> {
        // The next send must wait for this event.
        self.gate.set(0);
        match &event {
            Event::Match { .. } => self.counters.matches += 1,
            Event::Probe { .. } => self.counters.probes += 1,
            Event::Delivery { .. } => self.counters.deliveries += 1,
            Event::NoneRun { .. } => self.counters.none_runs += 1,
            Event::Cancel { .. } => self.counters.cancels += 1,
        }
        let t = Instant::now();
        self.last_put = self
            .client
            .put(&event)
            .map_err(|e| fail("logging an event", e))?;
        fault_point!("event.after_put");
        self.counters.put_ns += t.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// A successful non-deterministic call: an unflushed run of failures
    /// before it needs no event any more (replay answers "none" to calls
    /// without an event while a later event exists).
    fn drop_none_run(&mut self) {
        if self.none_run.take().is_some() {
            self.counters.none_runs_dropped += 1;
        }
    }

    fn failed_call(&mut self, call: CallId) {
        // The next send must log the run first.
        self.gate.set(0);
        self.none_run = Some(match self.none_run {
            Some((first, _)) => (first, call),
            None => (call, call),
        });
    }

    /// The commit rule: everything created so far is durable before a
    /// message leaves.
    fn commit(&mut self) -> Result<()> {
        if let Some((first, last)) = self.none_run.take() {
            self.put(Event::NoneRun { first, last })?;
        }
        // The id of the last event we put, known without asking the client
        // (whose state sits behind a lock): a send with nothing pending
        // costs one comparison.
        let last = self.last_put;
        if last <= self.durable {
            return Ok(());
        }
        let t0 = Instant::now();
        fault_point!("send.before_events_durable");
        self.client
            .wait_all_durable()
            .map_err(|e| fail("waiting for the event loggers", e))?;
        fault_point!("send.after_events_durable");
        self.durable = last;
        self.counters.sends_waited += 1;
        self.counters.waits.record(t0.elapsed().as_nanos() as u64);
        Ok(())
    }
}

/// How much of the sender log ahead of the last record [`Protocol::idle`]
/// brings into the cache while the log is still taking memory: a few
/// small records' worth.
const WARM_AHEAD: usize = 4096;

impl Protocol for Pessimist {
    fn name(&self) -> &'static str {
        "pessimist"
    }

    fn send(&mut self, msg: &OutgoingMessage<'_>) -> Result<()> {
        if self.replaying || !self.previous.is_done() {
            self.check_send(msg)?;
        }
        self.commit()?;
        self.log
            .reserve(msg.payload.len())
            .map_err(|e| fail("making room in the sender log", e))?;
        Ok(())
    }

    fn send_gate(&self) -> Option<Rc<Cell<usize>>> {
        Some(Rc::clone(&self.gate))
    }

    fn keep(&mut self, msg: &OutgoingMessage<'_>) -> Result<SendPlan> {
        let header = RecordHeader {
            dest: msg.dest as u32,
            context: msg.context,
            tag: msg.tag,
            seq: msg.seq,
        };
        self.counters.sends += 1;
        fault_point!("send.before_log_append");
        let (_, stored) = self
            .log
            .append_stored(header, msg.payload)
            .map_err(|e| fail("appending to the sender log", e))?;
        fault_point!("send.after_log_append");
        let plan = SendPlan::Logged {
            ptr: stored.as_ptr(),
            len: stored.len(),
        };
        // The record used room: what is left decides the next shortcut.
        self.update_gate();
        Ok(plan)
    }

    fn idle(&mut self) {
        // Memory for the next records, taken (and cached) now rather than
        // by the next send; nothing to do once the log reuses its segments.
        self.log.warm_up(WARM_AHEAD);
        self.update_gate();
    }

    fn post_recv(&mut self, call: CallId, spec: &mut RecvSpec) -> Result<RecvPlan> {
        if !self.replaying {
            return Ok(RecvPlan::Post);
        }
        fault_point!("recovery.replaying");
        let answer = match self.replay.post_recv(call, spec.source) {
            Ok(a) => a,
            Err(d) => return Err(self.diverged(d)),
        };
        if let Some(source) = answer.source {
            // Channel order then picks the same message as the first time.
            spec.source = Some(source);
        }
        Ok(if answer.cancelled_later {
            RecvPlan::HoldForCancel
        } else {
            RecvPlan::Post
        })
    }

    fn matched(&mut self, recv: CallId, source: usize) -> Result<()> {
        fault_point!("recv.after_match");
        // (A receive forced to its logged source is not ANY_SOURCE any
        // more: the engine does not report its match.)
        self.put(Event::Match {
            recv,
            source: source as u32,
        })
    }

    fn completion(
        &mut self,
        call: CallId,
        _kind: CompletionKind,
        requests: &[Option<RequestInfo>],
        done: &[usize],
    ) -> Result<()> {
        if self.replayed(call) {
            return Ok(());
        }
        if done.is_empty() {
            self.failed_call(call);
            return Ok(());
        }
        let infos: Vec<RequestInfo> = done
            .iter()
            .filter_map(|&i| requests.get(i).copied().flatten())
            .collect();
        if requests
            .iter()
            .flatten()
            .all(|r| r.is_send && r.completed_at_start)
        {
            // Determined: every request passed is a send that completed
            // when it started, so any replay gives the same answer.
            return Ok(());
        }
        self.drop_none_run();
        self.put(Event::Delivery {
            call,
            completed: infos.iter().map(|r| r.call).collect(),
        })
    }

    fn probe(
        &mut self,
        call: CallId,
        any_source: bool,
        blocking: bool,
        found: Option<&Status>,
    ) -> Result<()> {
        if self.replayed(call) {
            return Ok(());
        }
        match found {
            None => {
                self.failed_call(call);
                Ok(())
            }
            Some(_) if blocking && !any_source => Ok(()),
            Some(st) => {
                self.drop_none_run();
                self.put(Event::Probe {
                    call,
                    found: true,
                    source: st.source() as u32,
                    tag: st.tag(),
                    length: st.len() as u64,
                })
            }
        }
    }

    fn cancel(&mut self, call: CallId, request: CallId, cancelled: bool) -> Result<()> {
        if self.replayed(call) {
            return Ok(());
        }
        self.put(Event::Cancel {
            call,
            request,
            cancelled,
        })
    }

    fn finalize(&mut self) -> Result<()> {
        if self.replaying
            && let Err(d) = self.replay.finish()
        {
            return Err(self.diverged(d));
        }
        if let Some(unmet) = self.previous.first_unmet() {
            // By the commit rule a correct re-execution makes every send
            // the previous process logged.
            return Err(self.diverged(format!(
                "the previous process sent {unmet}, which re-execution never sent"
            )));
        }
        // A trailing run of failed tests precedes no send: nobody depends on it.
        self.none_run = None;
        self.client
            .wait_all_durable()
            .map_err(|e| fail("making the last events durable", e))?;
        Ok(())
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let c = &self.counters;
        vec![
            ("events_match".into(), c.matches),
            ("events_probe".into(), c.probes),
            ("events_delivery".into(), c.deliveries),
            ("events_none_run".into(), c.none_runs),
            ("none_runs_dropped".into(), c.none_runs_dropped),
            ("events_cancel".into(), c.cancels),
            (
                "events_total".into(),
                c.matches + c.probes + c.deliveries + c.none_runs + c.cancels,
            ),
            ("logged_sends".into(), c.sends),
            ("sends_waiting_for_loggers".into(), c.sends_waited),
            ("logger_wait_p50_ns".into(), c.waits.quantile(0.5)),
            ("logger_wait_p99_ns".into(), c.waits.quantile(0.99)),
            ("logger_wait_mean_ns".into(), c.waits.mean()),
            ("sender_log_bytes".into(), self.log.bytes_logged()),
            (
                "sender_log_segments".into(),
                self.log.segment_count() as u64,
            ),
            (
                "sender_log_segments_new".into(),
                self.log.segments_started().0.into(),
            ),
            (
                "sender_log_segments_reused".into(),
                self.log.segments_started().1.into(),
            ),
            ("event_put_ns_total".into(), c.put_ns),
            ("checkpoints".into(), c.checkpoints),
            ("checkpoint_ns_total".into(), c.checkpoint_ns),
            ("events_replayed".into(), c.events_replayed),
            ("log_records_freed".into(), c.records_freed),
        ]
    }

    fn take_restored(&mut self) -> Option<EngineSnapshot> {
        self.restored.take()
    }

    fn restart_state(&self) -> Option<Vec<u8>> {
        self.app_state.clone()
    }

    fn replay_end(&self) -> CallId {
        self.replay.end()
    }

    fn replay_completion(
        &mut self,
        call: CallId,
        passed: &[CallId],
    ) -> Result<Replay<Vec<CallId>>> {
        if !self.replaying {
            return Ok(Replay::Free);
        }
        fault_point!("recovery.replaying");
        self.replay
            .completion(call, passed)
            .map_err(|d| self.diverged(d))
    }

    fn replay_probe(
        &mut self,
        call: CallId,
        spec: &RecvSpec,
        blocking: bool,
    ) -> Result<Replay<Option<(usize, i32)>>> {
        if !self.replaying {
            return Ok(Replay::Free);
        }
        fault_point!("recovery.replaying");
        self.replay
            .probe(call, spec.source, spec.tag, blocking)
            .map_err(|d| self.diverged(d))
    }

    fn replay_cancel(&mut self, call: CallId, request: CallId) -> Result<Replay<bool>> {
        if !self.replaying {
            return Ok(Replay::Free);
        }
        fault_point!("recovery.replaying");
        self.replay
            .cancel(call, request)
            .map_err(|d| self.diverged(d))
    }

    fn logged_messages(&mut self, dest: usize, after: u64) -> Vec<LoggedMessage> {
        self.log
            .iter_from(dest as u32, after + 1)
            .map(logged)
            .collect()
    }

    fn checkpoint(&mut self, engine: &EngineSnapshot, app: &[u8]) -> Result<Vec<(usize, u64)>> {
        let t0 = Instant::now();
        // The checkpoint names its last event; it must be durable so the
        // loggers may later truncate up to it.
        self.client
            .wait_all_durable()
            .map_err(|e| fail("waiting for the event loggers", e))?;
        self.durable = self.last_put;
        // Everything logged so far precedes it — unless this process still
        // re-executes: then the events of its later calls are still to be
        // replayed by any process that restarts from this checkpoint.
        let event_id = match self.replay.first_event_after(engine.last_call) {
            Some(first) if self.replaying => first - 1,
            _ => self.last_put,
        };
        let payload = encode_checkpoint(event_id, engine, app);
        if self.log_in_memory {
            // The records peers may still need outlive this process only
            // in a file: written before the checkpoint that relies on it.
            self.log
                .spill(&spill_path(self.store.dir(), self.next_checkpoint))
                .map_err(|e| fail("writing the sender log out", e))?;
        }
        // What was printed before the checkpoint leaves before it exists.
        vpml_pml::bootstrap::flush_output();
        self.store
            .save(self.next_checkpoint, &payload)
            .map_err(|e| fail("saving a checkpoint", e))?;
        fault_point!("checkpoint.after_write");
        if self.log_in_memory {
            self.remove_stale_spills()?;
        }
        if self.copies {
            crate::offhost::save(
                self.client.as_ref(),
                &self.store,
                &self.log,
                self.next_checkpoint,
            )?;
        }
        vpml_pml::bootstrap::write_output_mark(
            vpml_pml::bootstrap::CHECKPOINT_MARK,
            self.next_checkpoint,
        );
        fault_point!("checkpoint.before_gc");
        self.next_checkpoint += 1;
        // Free what precedes the older of the two kept checkpoints.
        let older = self.newest.replace(SavedCheckpoint {
            event_id,
            recv_seq: engine.recv_seq.clone(),
        });
        let mut frees = Vec::new();
        if let Some(older) = older.filter(|_| !self.keep_logs) {
            if older.event_id > 0 {
                self.client
                    .truncate(older.event_id)
                    .map_err(|e| fail("truncating the logged events", e))?;
            }
            frees = older.recv_seq.into_iter().enumerate().collect();
        }
        self.counters.checkpoints += 1;
        self.counters.checkpoint_ns += t0.elapsed().as_nanos() as u64;
        Ok(frees)
    }

    fn recorded_incoming(&mut self, _from: usize) -> Vec<LoggedMessage> {
        Vec::new()
    }

    fn free_log(&mut self, dest: usize, up_to: u64) -> Result<()> {
        let before = self.log.records_to(dest as u32) as u64;
        self.log
            .free_up_to(dest as u32, up_to)
            .map_err(|e| fail("freeing sender-log records", e))?;
        let after = self.log.records_to(dest as u32) as u64;
        self.counters.records_freed += before - after;
        // The gate stays as it is: freeing never touches the current
        // segment, where the ready room is.
        Ok(())
    }
}
