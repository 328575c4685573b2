//! The engine of one rank: request table, matching, progress and idling.
//!
//! Everything here runs on the thread that calls vpml; progress happens only
//! inside API calls. The engine knows nothing of message logging: it numbers
//! the messages of every channel and communicator context on their own
//! (`send_seq`, `recv_seq`: per peer and context) and reports the sequence
//! number of each completed receive in its [`Status`], which is what a
//! protocol layer needs to name messages.

use std::net::TcpListener;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::bootstrap::KvClient;
use crate::error::Result;
use crate::lanes::LaneMap;
use crate::protocol::{CallId, Protocol, SendGate};
use crate::recovery::JobPage;
use crate::shm::mailbox::{Mailbox, RING_CAPACITY};
use crate::sim::SimLink;
#[cfg(doc)]
use crate::status::Status;
use lane_threads::LaneThreads;

mod checkpoint;
mod completion;
mod coordinated;
mod frames;
mod join;
mod lane_threads;
mod link;
mod outside;
mod progress;
mod recv;
mod requests;
mod restart;
mod send;
mod sim_rendezvous;
mod tcp_rendezvous;

use link::{Link, Outgoing, PartialDest, Peer, message_header};
pub use outside::{OutsideSleep, Waker};
pub use recv::RecvNow;
pub use requests::ReqId;
use requests::{Core, RawBytes, Unexpected};

/// Messages up to this size travel inside the ring.
pub(crate) const EAGER_LIMIT: usize = 16 * 1024;

/// Exit status of a job stopped because a restarted rank's re-execution
/// diverged from its logged execution, or could not be given the messages
/// it needs (`EX_SOFTWARE`): [`Error::Diverged`], [`Error::Unrecoverable`].
pub(crate) const DIVERGED_EXIT_CODE: i32 = 70;
/// Fragment size of the pipelined path used when single-copy reads are not allowed.
const FRAGMENT: usize = 32 * 1024;
/// Longest sleep on the doorbell before looking around again.
const SLEEP_SLICE: Duration = Duration::from_millis(200);

/// Idle policy: spin `spin` polls, then poll and yield the CPU for up to
/// `yield_for`, then sleep on the doorbell. With more ranks than cores the
/// yield phase lets the rank we wait for run; otherwise spinning is best.
struct IdlePolicy {
    spin: u32,
    yield_for: Duration,
}

/// The protocol's answers, asked once when it is installed, that spare
/// the hot path its calls.
struct ProtocolCaps {
    /// [`Protocol::send_gate`]: sends of fewer payload bytes skip its
    /// `send` call (0 without a gate).
    send_gate: SendGate,
    /// [`Protocol::hears_waits`].
    hears_waits: bool,
    /// [`Protocol::keeps_payloads`].
    keeps_payloads: bool,
    /// [`Protocol::hears_posted_receives`].
    hears_posted_receives: bool,
}

impl ProtocolCaps {
    fn of(p: &dyn Protocol) -> ProtocolCaps {
        ProtocolCaps {
            send_gate: p.send_gate().unwrap_or_default(),
            hears_waits: p.hears_waits(),
            keeps_payloads: p.keeps_payloads(),
            hears_posted_receives: p.hears_posted_receives(),
        }
    }
}

/// Counters printed with `--stats` later and handy in tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineStats {
    /// Application messages sent.
    pub messages_sent: u64,
    /// Application payload bytes sent.
    pub bytes_sent: u64,
    /// Application messages received.
    pub messages_received: u64,
    /// Receives started as requests (`MPI_Irecv`, and `MPI_Recv` where it
    /// waits in the library) whose message already waited in its source's
    /// ring: taken at once, complete when they started.
    pub received_at_start: u64,
    /// Times this rank slept on its doorbell.
    pub sleeps: u64,
}

/// Restart support (a protocol is active and the launcher restarts crashed
/// ranks; see [`crate::recovery`]).
struct Recovery {
    page: JobPage,
    /// Epoch of the job page last acted on.
    seen_epoch: u32,
    /// Start epoch of this process.
    my_start: u32,
    incarnation: u32,
    /// Incarnation of each peer that our link belongs to.
    known_inc: Vec<u32>,
    /// Where restarted processes connect.
    rendezvous: Rendezvous,
    /// Connections to the listener whose handshake is still coming.
    handshakes: Vec<tcp_rendezvous::Handshake>,
    /// A connection from this peer's newer process is expected (change
    /// it with `Recovery::expect`, which keeps `expected` in step).
    expecting: Vec<bool>,
    /// How many peers are expected: progress accepts connections only
    /// while this is non-zero.
    expected: usize,
    /// Messages to each peer, per context, it already had when the link
    /// was set up: a re-executed send up to this number is logged but not
    /// transmitted.
    suppress: Vec<LaneMap<u64>>,
    /// The host this process runs on (a restarted rank may run elsewhere
    /// than its first process: peers learn it in the handshake).
    my_host: usize,
    /// Every pair talks over TCP (`--transport tcp`).
    transport_tcp: bool,
    token: String,
    /// A restarted process until it has caught up (see `check_caught_up`).
    catching_up: Option<CatchUp>,
}

/// How restarted processes reach the running ones.
enum Rendezvous {
    /// A TCP listener whose address is published in the launcher's
    /// key/value store.
    Tcp(TcpListener),
    /// The simulator's queues of hellos (see [`crate::sim`]).
    Sim(crate::sim::SimNet),
}

/// A new link's connection, before it becomes a [`Link`].
enum Connection {
    Tcp(std::net::TcpStream),
    Sim(SimLink),
}

/// When a restarted process reached each stage of its recovery.
struct CatchUp {
    /// How long after the launcher spawned it the process entered vpml.
    exec: Option<Duration>,
    join_started: Instant,
    joined: Instant,
    protocol_ready: Option<Instant>,
    connected: Option<Instant>,
}

/// The engine of one rank.
pub(crate) struct Engine {
    core: Core,
    size: usize,
    peers: Vec<Option<Peer>>,
    /// Messages sent to each peer, per context.
    send_seq: Vec<LaneMap<u64>>,
    /// Shared with [`OutsideSleep`]s and [`Waker`]s, which wait on and
    /// ring its doorbell without the engine.
    own: Option<std::sync::Arc<Mailbox>>,
    /// Kept mapped for the peers' rings and doorbells.
    mailboxes: Vec<Option<Mailbox>>,
    single_copy: bool,
    idle: IdlePolicy,
    kv: Option<KvClient>,
    finalized: bool,
    /// This rank asked the launcher to stop the job (which then says why).
    stopped_job: bool,
    job_id: String,
    /// Next communicator context id this process may hand out (0 and 1
    /// belong to the world).
    next_context: u32,
    /// Duplicates of the world made without agreement (`Comm::idup`).
    world_idups: u32,
    /// Set by the first fatal error; from then on nothing is sent or received.
    failed: Option<String>,
    /// The fault-tolerance protocol ([`crate::protocol::NoProtocol`] for
    /// `none`): every entry point goes through it.
    protocol: Box<dyn Protocol>,
    /// What the protocol said, when installed, it needs to hear.
    caps: ProtocolCaps,
    /// Number of the last call of each lane.
    last_calls: LaneMap<u64>,
    /// Calls of the process so far, every lane together: the numbers of
    /// the process lane ([`CallId::PROCESS_LANE`]).
    all_calls: u64,
    /// Calls of [`Engine::progress`] so far (see
    /// [`crate::Comm::progresses_raw`]).
    progresses: u64,
    /// Contexts whose calls are numbered in the process lane
    /// ([`Engine::use_process_lane`]).
    process_lane_contexts: Vec<u32>,
    /// While this process re-executes: the thread that calls on each
    /// lane (a call of the lane by another stops the job: see
    /// [`Engine::check_lane_thread`]).
    lane_threads: LaneThreads,
    /// The protocol's [`Protocol::replay_ends`]: a lane's calls up to its
    /// end are answered from logged events (empty: none).
    replay_ends: LaneMap<u64>,
    /// Restart support, when the launcher restarts crashed ranks.
    recovery: Option<Recovery>,
    /// When `checkpoint_if_due` last saved (or the engine started).
    last_checkpoint: Instant,
    /// Where this rank stands in agreeing on global checkpoints, with a
    /// protocol that coordinates them ([`Protocol::coordinated`]).
    coordination: Option<coordinated::Coordination>,
    /// This rank is replayed alone from a recording (`vpml replay`).
    replay_alone: bool,
    /// `--chaos`: state of the generator that decides which peers a
    /// progress pass skips (0: off).
    chaos: u64,
    /// Publish the counters at finalize (`vpml run --stats`).
    publish_stats: bool,
    /// The simulator's hooks, for a simulated rank.
    sim: Option<Rc<dyn crate::sim::SimHooks>>,
}

impl Engine {
    pub(crate) fn rank(&self) -> usize {
        self.core.rank
    }
    pub(crate) fn size(&self) -> usize {
        self.size
    }
    /// Was the process started by a launcher (which hears its aborts)?
    pub(crate) fn has_launcher(&self) -> bool {
        self.kv.is_some()
    }
    pub(crate) fn job_id(&self) -> &str {
        &self.job_id
    }
    pub(crate) fn stats(&self) -> EngineStats {
        self.core.stats
    }
    /// Empty polls a blocking wait spins through before it yields or
    /// sleeps (many when the ranks of this host have a core each).
    pub(crate) fn idle_spin(&self) -> u32 {
        self.idle.spin
    }

    /// Whether large messages use the single-copy path.
    pub(crate) fn single_copy(&self) -> bool {
        self.single_copy
    }

    pub(crate) fn next_context(&self) -> u32 {
        self.next_context
    }

    pub(crate) fn set_next_context(&mut self, next: u32) {
        self.next_context = self.next_context.max(next);
    }

    /// Count a duplicate of the world made without agreement; its index.
    pub(crate) fn next_world_idup(&mut self) -> u32 {
        let i = self.world_idups;
        self.world_idups += 1;
        i
    }

    /// Install the fault-tolerance protocol (before any communication);
    /// a restarted process then restores its checkpoint and connects to
    /// the running job.
    pub(crate) fn set_protocol(&mut self, p: Box<dyn Protocol>) -> Result<()> {
        self.caps = ProtocolCaps::of(p.as_ref());
        let restarted = self.recovery.as_ref().is_some_and(|r| r.incarnation > 0);
        self.coordination = p
            .coordinated()
            .then(|| coordinated::Coordination::new(self.size, !restarted));
        self.replay_ends = LaneMap::from_pairs(p.replay_ends());
        self.protocol = p;
        self.after_protocol_installed()
    }

    /// Name of the active protocol.
    pub(crate) fn protocol_name(&self) -> &'static str {
        self.protocol.name()
    }

    /// Counters of the active protocol.
    pub(crate) fn protocol_stats(&self) -> Vec<(String, u64)> {
        self.protocol.stats()
    }

    /// The last call on `context` (number 0 before any).
    pub(crate) fn last_call(&self, context: u32) -> CallId {
        let lane = if self.process_lane_contexts.contains(&context) {
            CallId::PROCESS_LANE
        } else {
            context
        };
        CallId::new(lane, self.last_in(lane))
    }

    /// The number of the last call of `lane`.
    fn last_in(&self, lane: u32) -> u64 {
        if lane == CallId::PROCESS_LANE {
            self.all_calls
        } else {
            self.last_calls.get(lane)
        }
    }

    /// The number the next call of `lane` would take.
    fn next_in(&self, lane: u32) -> CallId {
        CallId::new(lane, self.last_in(lane) + 1)
    }

    /// Is call `call` inside the logged range of its lane (answered from
    /// logged events while this process re-executes)?
    #[inline]
    pub(crate) fn replay_covers(&self, call: CallId) -> bool {
        !self.replay_ends.is_empty() && call.n <= self.replay_ends.get(call.lane)
    }

    /// The call id that created request `id`.
    pub(crate) fn call_of(&self, id: ReqId) -> Option<CallId> {
        id.at_start()
            .map(|(call, _)| call)
            .or_else(|| self.core.slot(id).map(|s| s.call))
    }

    /// While this process re-executes: is the next call's logged outcome a
    /// completion that includes request `id`? (`false` past the last
    /// logged event.) `None` once it has caught up, where the caller
    /// decides freely.
    pub(crate) fn logged_next_completes(&self, id: ReqId) -> Option<bool> {
        let Some(created) = self.call_of(id) else {
            return self.reexecuting().then_some(false);
        };
        // The completion call that takes it is on its lane.
        let call = self.next_in(created.lane);
        if !self.replay_covers(call) {
            // Past the last logged event but still re-making sends the
            // peers have: the logged execution completed no such request
            // there (it would have been logged before the sends that
            // followed), so neither may this one.
            return self.reexecuting().then_some(false);
        }
        Some(
            self.protocol
                .replay_logged_completion(call)
                .is_some_and(|set| set.contains(&created)),
        )
    }

    /// The next call on `context` (or on a lane of [`CallId`]); an error
    /// (the job stops) if this process re-executes and another thread
    /// calls on that lane. On the path of every message: what is rare —
    /// windows' process lane, re-execution — is kept out of line.
    #[inline(always)]
    fn next_call(&mut self, context: u32) -> Result<CallId> {
        self.all_calls += 1;
        // (The lanes of `CallId`, at the top of the range, are numbered
        // out of line too.)
        if context >= CallId::GENERALIZED_LANE
            || !self.process_lane_contexts.is_empty()
            || self.reexecuting()
        {
            return self.next_call_special(context);
        }
        let n = self.last_calls.entry(context);
        *n += 1;
        Ok(CallId::new(context, *n))
    }

    /// [`Engine::next_call`] with a window alive or while re-executing.
    #[cold]
    #[inline(never)]
    fn next_call_special(&mut self, context: u32) -> Result<CallId> {
        let call =
            if context == CallId::PROCESS_LANE || self.process_lane_contexts.contains(&context) {
                CallId::new(CallId::PROCESS_LANE, self.all_calls)
            } else {
                let n = self.last_calls.entry(context);
                *n += 1;
                CallId::new(context, *n)
            };
        if self.reexecuting() {
            self.check_lane_thread(call.lane)?;
        }
        Ok(call)
    }

    /// While this process re-executes, each lane's calls must come from
    /// one thread at a time ([`LaneThreads`]): a call by another stops the
    /// job with one line (the logged execution may have interleaved the
    /// two differently).
    #[cold]
    fn check_lane_thread(&mut self, lane: u32) -> Result<()> {
        if self.lane_threads.claim(lane) {
            return Ok(());
        }
        let what = match lane {
            CallId::PROCESS_LANE => "one-sided windows".to_string(),
            CallId::GENERALIZED_LANE => "generalized requests".to_string(),
            _ => format!("context {lane}"),
        };
        let e = self.diverged(format!(
            "two threads call MPI on {what} while the rank re-executes: vpml replays each communicator's calls in their order, not how threads that share a communicator interleaved"
        ));
        self.fail(&e);
        Err(e)
    }

    /// From now on, number the calls on `context` in the process lane:
    /// among every call of the process, in the order they come. For
    /// traffic whose effects must be replayed at the same point among all
    /// the process's calls (one-sided windows: requests applied to memory
    /// the program also reads and writes between its calls). Such a
    /// process cannot be re-executed exactly while several of its threads
    /// call.
    pub(crate) fn use_process_lane(&mut self, context: u32) {
        if !self.process_lane_contexts.contains(&context) {
            self.process_lane_contexts.push(context);
        }
    }
}

const _: () = assert!(EAGER_LIMIT <= RING_CAPACITY / 4 - 64 && FRAGMENT <= RING_CAPACITY / 4 - 64);
