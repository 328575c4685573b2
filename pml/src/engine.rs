//! The engine of one rank: request table, matching, progress and idling.
//!
//! Everything here runs on the thread that calls vpml; progress happens only
//! inside API calls. The engine knows nothing of message logging: it numbers
//! every channel's messages (`send_seq`, `recv_seq`) and reports the
//! sequence number of each completed receive in its [`Status`], which is
//! what a protocol layer needs to name messages.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::TcpListener;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering, fence};
use std::time::{Duration, Instant};

use crate::bootstrap::{JobEnv, KvClient};
use crate::error::{Error, Result};
use crate::matching::{Envelope, MatchQueues, Posted, RecvSpec};
use crate::protocol::{
    CallId, CompletionKind, LoggedMessage, OutgoingMessage, Protocol, RecvPlan, Replay,
    RequestInfo, SendPlan,
};
use crate::recovery::JobPage;
use crate::shm::futex;
use crate::shm::mailbox::{Mailbox, RING_CAPACITY};
use crate::shm::ring::{FrameHeader, RingReader, RingWriter, flags, kind};
use crate::sim::SimLink;
use crate::status::Status;
use crate::tcp::TcpConn;

mod restart;
mod sim_rendezvous;

/// Messages up to this size travel inside the ring.
pub(crate) const EAGER_LIMIT: usize = 16 * 1024;

/// Exit status of a job stopped because a restarted rank's re-execution
/// diverged from its logged execution (`EX_SOFTWARE`).
pub(crate) const DIVERGED_EXIT_CODE: i32 = 70;
/// Fragment size of the pipelined path used when single-copy reads are not allowed.
const FRAGMENT: usize = 32 * 1024;
/// Longest sleep on the doorbell before looking around again.
const SLEEP_SLICE: Duration = Duration::from_millis(200);

/// Identifies an entry of the request table; the generation makes stale
/// handles detectable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReqId {
    idx: u32,
    generation: u32,
}

impl ReqId {
    fn token(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.idx)
    }
    fn from_token(t: u64) -> ReqId {
        ReqId {
            idx: t as u32,
            generation: (t >> 32) as u32,
        }
    }
}

/// A byte range owned by a request (or by a blocked caller) while an
/// operation is in flight.
#[derive(Clone, Copy)]
struct RawBytes {
    ptr: *mut u8,
    len: usize,
}

impl RawBytes {
    /// # Safety
    /// The range must be valid for reads for as long as the engine uses it
    /// (see `Slot::buf`).
    unsafe fn as_slice<'a>(self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    /// # Safety
    /// As `as_slice`, and valid for writes with no other live reference.
    unsafe fn as_mut_slice<'a>(self) -> &'a mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SlotKind {
    Send,
    Recv,
}

/// One entry of the request table.
struct Slot {
    generation: u32,
    in_use: bool,
    done: bool,
    /// The user dropped its handle: free the slot when the operation ends.
    detached: bool,
    kind: SlotKind,
    /// The user's buffer. Invariant: while `in_use && !done` the memory
    /// stays valid and untouched by anyone but the engine, because the
    /// owning handle keeps the buffer private (or, once detached,
    /// `keepalive` owns it, or a blocking caller waits for completion).
    buf: RawBytes,
    keepalive: Option<Box<dyn std::any::Any>>,
    status: Option<Status>,
    /// Call id of the call that created the request.
    call: CallId,
    /// A receive posted with ANY_SOURCE while a protocol listens: its
    /// match is reported.
    any_source: bool,
    /// A standard send of at most [`EAGER_LIMIT`] bytes, complete when it
    /// started. Whether a send is one is the same in every execution of
    /// the call (a re-executed send its peer already has completes at once
    /// whatever its size), so a completion call over such sends alone
    /// needs no event.
    completed_at_start: bool,
    /// A restarted process re-executes a receive that a logged cancel
    /// withdrew: it is not posted, and the cancel completes it.
    held_for_cancel: bool,
}

/// An unexpected message waiting for its receive.
enum Unexpected {
    /// The bytes, already copied out of the ring; `sync` holds the sender's
    /// token when it waits for a match acknowledgement.
    Eager { data: Vec<u8>, sync: Option<u64> },
    /// A large message still in the sender's memory.
    Rendezvous { addr: u64, token: u64 },
    /// A synchronous send to self, waiting in the sender's own buffer.
    SelfSync { data: RawBytes, token: u64 },
}

/// Frames waiting for space in a peer's ring, in channel order.
enum Outgoing {
    /// One frame; `complete` names a send to finish once it is written.
    Frame {
        hdr: FrameHeader,
        data: RawBytes,
        complete: Option<ReqId>,
    },
    /// A large message sent as fragments (no single-copy path available).
    Fragments {
        hdr: FrameHeader,
        data: RawBytes,
        offset: usize,
        complete: Option<ReqId>,
    },
}

impl Outgoing {
    /// Is there room in `w` for this item's next frame?
    fn fits(&self, w: &mut Link) -> bool {
        match self {
            Outgoing::Frame { hdr, data, .. } => w.has_room(hdr.kind, data.len),
            Outgoing::Fragments { data, offset, .. } => {
                let frag = w.fragment_size();
                w.has_room(kind::FRAG, (data.len - offset).min(frag))
            }
        }
    }
}

/// A fragmented message being reassembled.
struct Partial {
    env: Envelope,
    /// Where the fragments go.
    dest: PartialDest,
    /// Bytes received so far.
    got: usize,
    sync: Option<u64>,
}

/// A fragmented message is copied straight into the receive it matched at
/// its first fragment, or, if none was posted, collected for the
/// unexpected queue.
enum PartialDest {
    Posted(Posted<ReqId>),
    Buffered(Vec<u8>),
}

impl Outgoing {
    /// A frame that is its header alone (control frames, RTS).
    fn header_only(hdr: FrameHeader) -> Outgoing {
        Outgoing::Frame {
            hdr,
            data: RawBytes {
                ptr: std::ptr::null_mut(),
                len: 0,
            },
            complete: None,
        }
    }
}

/// Channel state for one peer.
struct Peer {
    link: Link,
    pending: VecDeque<Outgoing>,
    partial: Option<Partial>,
    /// Large messages to this peer use single-copy reads (shared memory
    /// with cross-process reads allowed).
    single_copy: bool,
    /// The peer's process died (or its link was dropped for a newer
    /// incarnation): nothing is read or written until the new process
    /// connects.
    broken: bool,
    /// Synchronous sends to this peer waiting for their acknowledgement,
    /// by sequence number (with a protocol: a re-sent message carries
    /// the token again).
    sync_waiting: BTreeMap<u64, u64>,
    /// Standard sends to this peer read in place (single copy from the
    /// caller's buffer) and waiting for the receiver's FIN, by sequence
    /// number, when the peer can restart: its next incarnation gets them
    /// from the sender log, so they complete when its link is dropped.
    fin_waiting: BTreeMap<u64, u64>,
    /// Our synchronous messages the peer holds unmatched, as its newer
    /// process (or the survivor we reconnected to) told us after the link
    /// came up; `None` until it has. A re-executed synchronous send that
    /// the peer already has completes at once unless it is in this set,
    /// and otherwise when the peer acknowledges it (by sequence number).
    sync_unmatched: Option<BTreeSet<u64>>,
    /// The list being received (`SYNC_UNMATCHED` frames before `SYNC_STATE_END`).
    sync_unmatched_incoming: BTreeSet<u64>,
}

impl Peer {
    fn new(link: Link, single_copy: bool) -> Peer {
        Peer {
            link,
            pending: VecDeque::new(),
            partial: None,
            single_copy,
            broken: false,
            sync_waiting: BTreeMap::new(),
            fin_waiting: BTreeMap::new(),
            sync_unmatched: None,
            sync_unmatched_incoming: BTreeSet::new(),
        }
    }
}

/// How a peer is reached: a pair of shared-memory rings, or a TCP connection.
enum Link {
    Shm {
        writer: RingWriter,
        reader: RingReader,
    },
    Tcp(TcpConn),
    /// No link: the peer died and its next incarnation has not connected.
    Dead,
    /// A replayed rank (`vpml replay`): the peer's recorded messages, as
    /// eager frames; what is written is dropped (checked by the protocol).
    Feed(VecDeque<LoggedMessage>),
    /// A rank of the simulator (`vpml-sim`): in-memory pipes.
    Sim(SimLink),
}

/// The frame a recorded message is read as.
fn feed_header(m: &LoggedMessage) -> FrameHeader {
    message_header(kind::EAGER, m.tag, m.context, m.seq, m.len)
}

impl Link {
    fn is_shm(&self) -> bool {
        matches!(self, Link::Shm { .. })
    }
    fn has_room(&mut self, k: u8, len: usize) -> bool {
        match self {
            Link::Shm { writer, .. } => writer.has_room(k, len),
            Link::Tcp(c) => c.has_room(),
            Link::Dead => false,
            Link::Feed(_) => true,
            Link::Sim(l) => l.has_room(),
        }
    }
    fn try_write(&mut self, hdr: &FrameHeader, payload: &[u8]) -> bool {
        match self {
            Link::Shm { writer, .. } => writer.try_write(hdr, payload),
            Link::Tcp(c) => c.try_write(hdr, payload),
            Link::Dead => false,
            Link::Feed(_) => true,
            Link::Sim(l) => l.try_write(hdr, payload),
        }
    }
    fn announce_waiting(&mut self, k: u8, len: usize) -> bool {
        match self {
            Link::Shm { writer, .. } => writer.announce_waiting(k, len),
            Link::Tcp(c) => c.has_room(),
            Link::Dead => false,
            Link::Feed(_) => true,
            Link::Sim(l) => l.has_room(),
        }
    }
    fn has_frame(&self) -> bool {
        match self {
            Link::Shm { reader, .. } => reader.has_frame(),
            Link::Tcp(c) => c.has_frame(),
            Link::Dead => false,
            Link::Feed(q) => !q.is_empty(),
            Link::Sim(l) => l.has_frame(),
        }
    }
    fn peek(&mut self) -> std::result::Result<Option<FrameHeader>, String> {
        match self {
            Link::Shm { reader, .. } => reader.peek(),
            Link::Tcp(c) => c.peek(),
            Link::Dead => Ok(None),
            Link::Feed(q) => Ok(q.front().map(feed_header)),
            Link::Sim(l) => Ok(l.peek()),
        }
    }
    fn payload(&self, hdr: &FrameHeader, len: usize) -> std::result::Result<&[u8], String> {
        match self {
            Link::Shm { reader, .. } => reader.payload(hdr, len),
            Link::Tcp(c) => c.payload(hdr, len),
            Link::Dead => Err("no link".into()),
            Link::Feed(q) => match q.front() {
                Some(m) if m.len == len && m.seq == hdr.seq => {
                    if len == 0 {
                        return Ok(&[]);
                    }
                    // SAFETY: the protocol keeps the recorded log mapped
                    // (and unchanged) as long as the engine lives.
                    Ok(unsafe { std::slice::from_raw_parts(m.ptr, m.len) })
                }
                _ => Err("recorded message out of step".into()),
            },
            Link::Sim(l) => l.payload(len),
        }
    }
    fn consume(&mut self, hdr: &FrameHeader) {
        match self {
            Link::Shm { reader, .. } => reader.consume(hdr),
            Link::Tcp(c) => c.consume(hdr),
            Link::Dead => {}
            Link::Feed(q) => {
                q.pop_front();
            }
            Link::Sim(l) => l.consume(),
        }
    }
    /// Payload bytes per fragment of a large message.
    fn fragment_size(&self) -> usize {
        FRAGMENT
    }
    /// Bytes accepted but not yet handed to the operating system.
    fn unsent(&self) -> usize {
        match self {
            Link::Shm { .. } | Link::Dead | Link::Feed(_) | Link::Sim(_) => 0,
            Link::Tcp(c) => c.queued(),
        }
    }
    /// Hand consumed space back; true if the writer asked to be woken.
    fn publish(&mut self) -> bool {
        match self {
            Link::Shm { reader, .. } => reader.publish(),
            Link::Tcp(c) => {
                c.flush();
                false
            }
            Link::Dead | Link::Feed(_) | Link::Sim(_) => false,
        }
    }
}

/// Idle policy: spin `spin` polls, then poll and yield the CPU for up to
/// `yield_for`, then sleep on the doorbell. With more ranks than cores the
/// yield phase lets the rank we wait for run; otherwise spinning is best.
struct IdlePolicy {
    spin: u32,
    yield_for: Duration,
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
    /// Times this rank slept on its doorbell.
    pub sleeps: u64,
}

/// All per-rank state except the shared-memory channels (split so frames can
/// be read from a channel while the rest is updated).
struct Core {
    rank: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    matching: MatchQueues<ReqId, Unexpected>,
    recv_seq: Vec<u64>,
    /// Control frames to send after the current batch: (peer, header).
    control_out: Vec<(usize, FrameHeader)>,
    pids: Vec<i32>,
    stats: EngineStats,
    /// ANY_SOURCE receives matched since the protocol last heard: (call, source).
    matches: Vec<(CallId, usize)>,
    /// Crashed ranks can be restarted (a protocol logs every message): a
    /// failed read from a dead sender is not fatal, and large unexpected
    /// messages are read at once, so nothing queued here ever points into
    /// another process.
    restartable: bool,
    /// Set when a read from this sender failed because it died.
    gone: Option<usize>,
    /// Peers that checkpointed: (peer, free log records to it up to).
    gc_notices: Vec<(usize, u64)>,
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
    /// A connection from this peer's newer process is expected (change
    /// it with `Recovery::expect`, which keeps `expected` in step).
    expecting: Vec<bool>,
    /// How many peers are expected: progress accepts connections only
    /// while this is non-zero.
    expected: usize,
    /// Messages to each peer it already had when the link was set up: a
    /// re-executed send up to this number is logged but not transmitted.
    suppress: Vec<u64>,
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
    send_seq: Vec<u64>,
    own: Option<Mailbox>,
    /// Kept mapped for the peers' rings and doorbells.
    mailboxes: Vec<Option<Mailbox>>,
    single_copy: bool,
    idle: IdlePolicy,
    kv: Option<KvClient>,
    finalized: bool,
    job_id: String,
    /// Next communicator context id this process may hand out (0 and 1
    /// belong to the world).
    next_context: u32,
    /// Set by the first fatal error; from then on nothing is sent or received.
    failed: Option<String>,
    /// The fault-tolerance protocol, if any (`none` is no protocol at all).
    protocol: Option<Box<dyn Protocol>>,
    /// The protocol's [`Protocol::send_gate`]: sends of fewer payload
    /// bytes skip its `send` call (0 without a protocol or a gate).
    send_gate: Rc<Cell<usize>>,
    /// Last call id handed out.
    last_call: CallId,
    /// The protocol's [`Protocol::replay_end`]: calls up to it are
    /// answered from logged events (0: none).
    replay_end: CallId,
    /// Restart support, when the launcher restarts crashed ranks.
    recovery: Option<Recovery>,
    /// When `checkpoint_if_due` last saved (or the engine started).
    last_checkpoint: Instant,
    /// This rank is replayed alone from a recording (`vpml replay`).
    replay_alone: bool,
    /// `--chaos`: state of the generator that decides which peers a
    /// progress pass skips (0: off).
    chaos: u64,
    /// The simulator's hooks, for a simulated rank.
    sim: Option<Rc<dyn crate::sim::SimHooks>>,
}

impl Engine {
    /// A single-rank engine (the program was not started by `vpml run`).
    pub(crate) fn singleton() -> Engine {
        Engine {
            core: Core::new(0, 1),
            size: 1,
            peers: vec![None],
            send_seq: vec![0],
            own: None,
            mailboxes: vec![None],
            single_copy: false,
            idle: IdlePolicy {
                spin: 64,
                yield_for: Duration::ZERO,
            },
            kv: None,
            finalized: false,
            job_id: "singleton".into(),
            next_context: 2,
            failed: None,
            protocol: None,
            send_gate: Rc::default(),
            last_call: 0,
            replay_end: 0,
            recovery: None,
            last_checkpoint: Instant::now(),
            replay_alone: false,
            chaos: 0,
            sim: None,
        }
    }

    /// A rank replayed alone (`vpml replay`): every peer is a feed of its
    /// recorded messages, filled when the protocol is installed.
    pub(crate) fn replaying_alone(rank: usize, size: usize, job_id: &str) -> Engine {
        let mut e = Engine::singleton();
        e.core = Core::new(rank, size);
        e.size = size;
        e.peers = (0..size)
            .map(|p| (p != rank).then(|| Peer::new(Link::Feed(VecDeque::new()), false)))
            .collect();
        e.send_seq = vec![0; size];
        e.mailboxes = (0..size).map(|_| None).collect();
        e.job_id = job_id.to_string();
        e.replay_alone = true;
        e
    }

    /// A rank of a simulated job (see [`crate::sim`]): every peer is a
    /// pipe of `net`, and idling hands the processor to the simulator.
    /// With a job page (`page`), crashed ranks are restarted: a rank whose
    /// incarnation there is above 0 is a restarted process, which links to
    /// the others once its protocol is installed.
    pub(crate) fn simulated(
        rank: usize,
        net: &crate::sim::SimNet,
        hooks: Rc<dyn crate::sim::SimHooks>,
        page: Option<JobPage>,
    ) -> Engine {
        let size = net.size();
        let mut e = Engine::singleton();
        e.core = Core::new(rank, size);
        e.size = size;
        let restarted = page.as_ref().is_some_and(|p| p.incarnation(rank) > 0);
        e.peers = (0..size)
            .map(|p| {
                (p != rank).then(|| {
                    let mut peer = if restarted {
                        Peer::new(Link::Dead, false)
                    } else {
                        Peer::new(Link::Sim(net.link(rank, p, Rc::clone(&hooks))), false)
                    };
                    peer.broken = restarted;
                    peer
                })
            })
            .collect();
        e.send_seq = vec![0; size];
        e.mailboxes = (0..size).map(|_| None).collect();
        e.job_id = "sim".to_string();
        // Every pass that finds nothing to do lets another rank run.
        e.idle = IdlePolicy {
            spin: 1,
            yield_for: Duration::ZERO,
        };
        e.core.restartable = page.is_some();
        e.recovery = page.map(|page| Recovery {
            seen_epoch: page.epoch(),
            my_start: page.start_epoch(rank),
            incarnation: page.incarnation(rank),
            known_inc: (0..size).map(|q| page.incarnation(q)).collect(),
            rendezvous: Rendezvous::Sim(net.clone()),
            expecting: vec![false; size],
            expected: 0,
            suppress: vec![0; size],
            my_host: 0,
            transport_tcp: false,
            token: String::new(),
            catching_up: None,
            page,
        });
        e.sim = Some(hooks);
        e
    }

    /// Join the job described by `env`: map every mailbox, publish our pid,
    /// wait for every rank, then open the channels.
    pub(crate) fn join(env: &JobEnv) -> Result<Engine> {
        let join_started = Instant::now();
        vpml_fault_points::arm_from_env(&format!("rank {}", env.rank)).map_err(Error::Bootstrap)?;
        let mut kv = KvClient::connect(&env.kv_addr, &env.token, env.rank)?;
        let mut mailboxes = Vec::with_capacity(env.size);
        for &fd in &env.mailbox_fds {
            mailboxes.push(Some(Mailbox::map(fd, env.size)?));
        }
        for &fd in &env.mailbox_fds {
            // SAFETY: the descriptors were inherited for us alone; the
            // mappings stay valid after close.
            unsafe { libc::close(fd) };
        }
        let own = mailboxes[env.rank].take();
        let own = own.ok_or_else(|| Error::Bootstrap("own mailbox missing".into()))?;
        own.pid().store(std::process::id(), Ordering::Release);
        // Ranks are siblings: under Yama ptrace_scope=1 they may read each
        // other's memory only if they name an ancestor as their tracer.
        // SAFETY: plain prctl; failure (no Yama) is harmless.
        unsafe {
            libc::prctl(
                libc::PR_SET_PTRACER,
                libc::getppid() as libc::c_ulong,
                0,
                0,
                0,
            );
        }
        let recovery = match env.job_page_fd {
            Some(fd) => Some(Recovery::start(env, fd, &mut kv, join_started)?),
            None => None,
        };
        // A restarted process joins a running job: no fences (the others
        // are past them) and every link is set up later, over TCP, once
        // the protocol has restored the channel counters.
        let restarted = env.incarnation > 0 && recovery.is_some();
        let mut single_copy = false;
        let mut tcp: Vec<Option<TcpConn>> = (0..env.size).map(|_| None).collect();
        if !restarted {
            kv.put(
                &format!("probe.{}", env.rank),
                &format!("{:x}", &SINGLE_COPY_PROBE as *const u64 as usize),
            )?;
            kv.fence()?;
            vpml_fault_points::fault_point!("start.in_fences");
            single_copy = single_copy_agreed(&mut kv, env, &mailboxes)?;
            if (0..env.size).any(|p| env.over_tcp(env.rank, p)) {
                tcp = crate::tcp::connect_all(env, &mut kv)?;
            }
            kv.joined()?;
        }
        let mut peers = Vec::with_capacity(env.size);
        let mut pids = vec![0; env.size];
        for (p, mb) in mailboxes.iter().enumerate() {
            let Some(mb) = mb else {
                peers.push(None);
                continue;
            };
            pids[p] = mb.pid().load(Ordering::Acquire) as i32;
            // SAFETY: ring `env.rank` of peer p's mailbox is written only by
            // us and ring `p` of ours is read only by us; both mappings live
            // as long as the engine (fields `own` and `mailboxes`).
            let (writer, reader) = unsafe {
                (
                    RingWriter::new(mb.ring(env.rank), RING_CAPACITY),
                    RingReader::new(own.ring(p), RING_CAPACITY),
                )
            };
            let (link, single_copy) = match tcp[p].take() {
                _ if restarted => (Link::Dead, false),
                Some(conn) => (Link::Tcp(conn), false),
                None => (Link::Shm { writer, reader }, single_copy),
            };
            let mut peer = Peer::new(link, single_copy);
            peer.broken = restarted;
            peers.push(Some(peer));
        }
        let oversubscribed = env.local_size > env.host_cores.max(1);
        let idle = if oversubscribed {
            IdlePolicy {
                spin: 50,
                yield_for: Duration::from_millis(2),
            }
        } else {
            IdlePolicy {
                spin: 200_000,
                yield_for: Duration::ZERO,
            }
        };
        tracing::debug!(rank = env.rank, size = env.size, single_copy, "joined job");
        let mut core = Core::new(env.rank, env.size);
        core.pids = pids;
        core.restartable = recovery.is_some();
        let mut recovery = recovery;
        if let Some(c) = recovery.as_mut().and_then(|r| r.catching_up.as_mut()) {
            c.joined = Instant::now();
        }
        Ok(Engine {
            core,
            size: env.size,
            peers,
            send_seq: vec![0; env.size],
            own: Some(own),
            mailboxes,
            single_copy,
            idle,
            kv: Some(kv),
            finalized: false,
            job_id: env.job_id.clone(),
            next_context: 2,
            failed: None,
            protocol: None,
            send_gate: Rc::default(),
            last_call: 0,
            replay_end: 0,
            recovery,
            last_checkpoint: Instant::now(),
            replay_alone: false,
            chaos: std::env::var(crate::bootstrap::env::CHAOS)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(0, |seed| {
                    (seed ^ (env.rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1
                }),
            sim: None,
        })
    }

    pub(crate) fn rank(&self) -> usize {
        self.core.rank
    }
    pub(crate) fn size(&self) -> usize {
        self.size
    }
    pub(crate) fn job_id(&self) -> &str {
        &self.job_id
    }
    pub(crate) fn stats(&self) -> EngineStats {
        self.core.stats
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

    /// Install the fault-tolerance protocol (before any communication);
    /// a restarted process then restores its checkpoint and connects to
    /// the running job.
    pub(crate) fn set_protocol(&mut self, p: Box<dyn Protocol>) -> Result<()> {
        if let Some(gate) = p.send_gate() {
            self.send_gate = gate;
        }
        self.replay_end = p.replay_end();
        self.protocol = Some(p);
        self.after_protocol_installed()
    }

    /// Name of the active protocol.
    pub(crate) fn protocol_name(&self) -> &'static str {
        self.protocol.as_ref().map_or("none", |p| p.name())
    }

    /// Counters of the active protocol.
    pub(crate) fn protocol_stats(&self) -> Vec<(String, u64)> {
        self.protocol
            .as_ref()
            .map(|p| p.stats())
            .unwrap_or_default()
    }

    /// The last call id handed out (0 before any call, or without a protocol).
    pub(crate) fn last_call(&self) -> CallId {
        self.last_call
    }

    /// The call id that created request `id`.
    pub(crate) fn call_of(&self, id: ReqId) -> Option<CallId> {
        self.core.slot(id).map(|s| s.call)
    }

    fn next_call(&mut self) -> CallId {
        self.last_call += 1;
        self.last_call
    }

    /// Run a protocol hook, if a protocol is installed; a hook failure is
    /// fatal (the protocol's guarantee would be gone).
    fn hook<T>(&mut self, f: impl FnOnce(&mut dyn Protocol) -> Result<T>) -> Result<Option<T>> {
        let Some(p) = self.protocol.as_mut() else {
            return Ok(None);
        };
        match f(p.as_mut()) {
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                self.fail(&e);
                Err(e)
            }
        }
    }

    /// Show a message about to leave to the protocol (if any), which may
    /// wait (commit rule); sets `msg.call` (0 without a protocol).
    fn protocol_send(&mut self, msg: &mut OutgoingMessage<'_>) -> Result<()> {
        if self.protocol.is_none() {
            return Ok(());
        }
        // Matches made since the last report are events this send follows.
        self.report_matches()?;
        msg.call = self.next_call();
        // The protocol's word that it has nothing to do for this send:
        // one load instead of a call, before the message leaves.
        if msg.payload.len() < self.send_gate.get() {
            return Ok(());
        }
        self.hook(|p| p.send(msg))?;
        Ok(())
    }

    /// Let the protocol (if any) keep the payload of a message it saw in
    /// [`Engine::protocol_send`]; returns what to transmit.
    fn protocol_keep(&mut self, msg: &OutgoingMessage<'_>) -> Result<SendPlan> {
        Ok(self.hook(|p| p.keep(msg))?.unwrap_or(SendPlan::Transmit))
    }

    /// Tell the protocol about ANY_SOURCE receives matched since last time.
    fn report_matches(&mut self) -> Result<()> {
        if self.core.matches.is_empty() {
            return Ok(());
        }
        let matches = std::mem::take(&mut self.core.matches);
        self.hook(|p| {
            matches
                .iter()
                .try_for_each(|&(call, src)| p.matched(call, src))
        })?;
        Ok(())
    }

    /// A completion call of `kind` over `ids`: decides which requests it
    /// completes (indices into `ids`) — from the logged answer while a
    /// restarted process replays, as usual otherwise — and reports that
    /// to the protocol.
    pub(crate) fn completion_call(
        &mut self,
        kind: CompletionKind,
        ids: &[Option<ReqId>],
    ) -> Result<Vec<usize>> {
        let call = if self.protocol.is_some() {
            self.next_call()
        } else {
            0
        };
        let blocking = matches!(kind, CompletionKind::WaitAny | CompletionKind::WaitSome);
        // Without a protocol, or past the last logged event, there is
        // nothing to replay (and nothing to check).
        let replay = if self.protocol.is_none() || call > self.replay_end {
            Replay::Free
        } else {
            let passed: Vec<CallId> = ids
                .iter()
                .flatten()
                .filter_map(|&id| self.core.slot(id).map(|s| s.call))
                .collect();
            // Only sends that completed when they started: the answer is
            // the same every time, and was never logged.
            let determined = ids.iter().flatten().all(|&id| {
                self.core
                    .slot(id)
                    .is_some_and(|s| s.kind == SlotKind::Send && s.completed_at_start)
            });
            match self.hook(|p| p.replay_completion(call, &passed))? {
                // Never logged: the answer is the same every time.
                Some(Replay::NotYet) if determined => Replay::Free,
                r => r.unwrap_or(Replay::Free),
            }
        };
        match replay {
            Replay::Logged(calls) => {
                let want: Vec<usize> = (0..ids.len())
                    .filter(|&i| {
                        ids[i]
                            .and_then(|id| self.core.slot(id))
                            .is_some_and(|s| calls.contains(&s.call))
                    })
                    .collect();
                if want.len() != calls.len() {
                    // The protocol checked that every logged request was
                    // passed: only a request passed twice gets here.
                    let e = self.diverged(format!(
                        "completion call {call} completed the requests of calls {calls:?} the first time; now {} of them are active",
                        want.len()
                    ));
                    self.fail(&e);
                    return Err(e);
                }
                self.wait_until(|e| want.iter().all(|&i| ids[i].is_some_and(|id| e.is_done(id))))?;
                return Ok(want);
            }
            Replay::NotYet if !blocking => {
                self.progress()?;
                return Ok(Vec::new());
            }
            Replay::NotYet | Replay::Free => {}
        }
        let first_done = |e: &Engine| ids.iter().position(|id| id.is_some_and(|id| e.is_done(id)));
        let all_done = |e: &Engine| -> Vec<usize> {
            (0..ids.len())
                .filter(|&i| ids[i].is_some_and(|id| e.is_done(id)))
                .collect()
        };
        let done = match kind {
            CompletionKind::WaitAny => {
                let mut first = None;
                self.wait_until(|e| {
                    first = first_done(e);
                    first.is_some()
                })?;
                first.into_iter().collect()
            }
            CompletionKind::WaitSome => {
                self.wait_until(|e| first_done(e).is_some())?;
                all_done(self)
            }
            CompletionKind::Test | CompletionKind::TestAny => {
                self.progress()?;
                first_done(self).into_iter().collect()
            }
            CompletionKind::TestSome => {
                self.progress()?;
                all_done(self)
            }
            CompletionKind::TestAll => {
                self.progress()?;
                if ids.iter().flatten().all(|&id| self.is_done(id)) {
                    (0..ids.len()).filter(|&i| ids[i].is_some()).collect()
                } else {
                    Vec::new()
                }
            }
        };
        self.report_completion(call, kind, ids, &done)?;
        Ok(done)
    }

    /// Completion call `call` reports `done` (indices into `ids`) as complete.
    fn report_completion(
        &mut self,
        call: CallId,
        kind: CompletionKind,
        ids: &[Option<ReqId>],
        done: &[usize],
    ) -> Result<()> {
        if self.protocol.is_none() {
            return Ok(());
        }
        let infos: Vec<Option<RequestInfo>> = ids
            .iter()
            .map(|id| {
                let s = self.core.slot((*id)?)?;
                Some(RequestInfo {
                    call: s.call,
                    is_send: s.kind == SlotKind::Send,
                    completed_at_start: s.completed_at_start,
                })
            })
            .collect();
        self.hook(|p| p.completion(call, kind, &infos, done))?;
        Ok(())
    }

    // ----------------------------------------------------------------- sends

    /// Blocking-send fast path: write a small message straight into the
    /// ring. Returns false (nothing done) if the caller must take the
    /// general path.
    pub(crate) fn try_send_now(
        &mut self,
        dest: usize,
        tag: i32,
        ctx: u32,
        data: &[u8],
    ) -> Result<bool> {
        let seq = self.send_seq[dest] + 1;
        if !self.can_write_now(dest, seq, data.len()) {
            return Ok(false);
        }
        self.send_now(&mut outgoing(dest, ctx, tag, seq, data, false))?;
        Ok(true)
    }

    /// Send `msg`, which [`Engine::can_write_now`] accepted, from the
    /// caller's buffer; the protocol copies it after, while the receiver
    /// takes it.
    fn send_now(&mut self, msg: &mut OutgoingMessage<'_>) -> Result<()> {
        self.protocol_send(msg)?;
        self.write_now(msg)?;
        self.protocol_keep(msg)?;
        Ok(())
    }

    /// Can a standard send of `len` bytes, sequence `seq`, to `dest` be
    /// written whole into the ring right now?
    fn can_write_now(&mut self, dest: usize, seq: u64, len: usize) -> bool {
        if len > EAGER_LIMIT
            || dest == self.core.rank
            || self.failed.is_some()
            || self.suppressed(dest, seq)
        {
            return false;
        }
        let Some(peer) = self.peers[dest].as_mut() else {
            return false;
        };
        !peer.broken && peer.pending.is_empty() && peer.link.has_room(kind::EAGER, len)
    }

    /// Write `msg` into the ring to its destination, which
    /// [`Engine::can_write_now`] said has room (the protocol hook between
    /// them runs no engine code, and room only grows meanwhile).
    fn write_now(&mut self, msg: &OutgoingMessage<'_>) -> Result<()> {
        let hdr = message_header(
            kind::EAGER,
            msg.tag,
            msg.context,
            msg.seq,
            msg.payload.len(),
        );
        let Some(peer) = self.peers[msg.dest].as_mut() else {
            return Err(Error::RequestState("peer vanished"));
        };
        vpml_fault_points::fault_point!("send.before_frame");
        if !peer.link.try_write(&hdr, msg.payload) {
            return Err(Error::RequestState("ring space vanished"));
        }
        vpml_fault_points::fault_point!("send.after_frame");
        self.send_seq[msg.dest] = msg.seq;
        self.core.stats.messages_sent += 1;
        self.core.stats.bytes_sent += msg.payload.len() as u64;
        self.ring_doorbell(msg.dest);
        Ok(())
    }

    /// Start a send of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` stays valid and unmodified until the returned request
    /// completes (the caller owns it through a request handle or blocks).
    pub(crate) unsafe fn start_send(
        &mut self,
        dest: usize,
        tag: i32,
        ctx: u32,
        ptr: *const u8,
        len: usize,
        sync: bool,
    ) -> Result<ReqId> {
        self.check_alive()?;
        let mut data = RawBytes {
            ptr: ptr as *mut u8,
            len,
        };
        let seq = self.send_seq[dest] + 1;
        let mut logged = false;
        // SAFETY: caller contract.
        let payload = unsafe { data.as_slice() };
        let mut msg = outgoing(dest, ctx, tag, seq, payload, sync);
        if !sync && self.can_write_now(dest, seq, len) {
            // As `try_send_now`, with a request that is complete at once.
            self.send_now(&mut msg)?;
            let id = self.core.alloc(SlotKind::Send, data);
            if let Some(s) = self.core.slot_mut(id) {
                s.call = msg.call;
                // A standard send within the eager limit (`can_write_now`).
                s.completed_at_start = true;
            }
            self.core.set_status(id, Status::new(dest, tag, len, seq));
            self.core.complete(id);
            return Ok(id);
        }
        self.protocol_send(&mut msg)?;
        let call = msg.call;
        // A large message to a single-copy peer leaves first: the receiver
        // reads it out of the caller's buffer while the protocol copies it
        // into its log (after the announcement below), so the two copies
        // overlap; the send completes on the receiver's FIN, as without a
        // protocol. Anything else is kept first and sent from the copy.
        let read_in_place = len > EAGER_LIMIT
            && dest != self.core.rank
            && !self.suppressed(dest, seq)
            && self.peers[dest].as_ref().is_some_and(|p| p.single_copy);
        let plan = if read_in_place {
            SendPlan::Transmit
        } else {
            self.protocol_keep(&msg)?
        };
        if let SendPlan::Logged { ptr, len: l } = plan
            && l == len
        {
            data = RawBytes {
                ptr: ptr as *mut u8,
                len,
            };
            logged = true;
        }
        let ptr = data.ptr as *const u8;
        let id = self.core.alloc(SlotKind::Send, data);
        if let Some(s) = self.core.slot_mut(id) {
            s.call = call;
        }
        self.send_seq[dest] = seq;
        self.core.stats.messages_sent += 1;
        self.core.stats.bytes_sent += len as u64;
        let me = self.core.rank;
        if dest == me {
            let env = Envelope {
                source: me,
                tag,
                context: ctx,
                seq,
                len,
            };
            self.core.set_status(id, Status::new(dest, tag, len, seq));
            if sync {
                self.core.deliver_self_sync(env, data, id.token())?;
            } else {
                // SAFETY: caller contract; the bytes are copied right away.
                let bytes = unsafe { data.as_slice() };
                self.core.deliver_eager(env, bytes, None)?;
                self.core.complete(id);
            }
            self.core.mark_completed_at_start(id, sync);
            self.flush_control();
            self.report_matches()?;
            return Ok(id);
        }
        self.core.set_status(id, Status::new(dest, tag, len, seq));
        if self.suppressed(dest, seq) {
            // Re-executed after a restart, and the receiver already has it:
            // logged (above), not transmitted. A synchronous send completes
            // only once the receiver has matched it, as the first time.
            // (Replayed alone, there is no receiver to wait for.)
            let alone = self.replay_alone;
            let peer = self.peer_mut(dest)?;
            let matched = alone
                || peer
                    .sync_unmatched
                    .as_ref()
                    .is_some_and(|unmatched| !unmatched.contains(&seq));
            if sync && !matched {
                peer.sync_waiting.insert(seq, id.token());
            } else {
                self.core.complete(id);
                self.core.mark_completed_at_start(id, sync);
            }
            return Ok(id);
        }
        // A logged standard send is complete: its bytes live in the log,
        // and the transport sends from there (no completion token needed).
        let token = if logged && !sync {
            self.core.complete(id);
            self.core.mark_completed_at_start(id, sync);
            0
        } else {
            id.token()
        };
        let pending_id = (token != 0).then_some(id);
        let item = if len <= EAGER_LIMIT {
            let mut hdr = message_header(kind::EAGER, tag, ctx, seq, len);
            if sync {
                hdr.flags |= flags::SYNC;
                hdr.aux0 = id.token();
            }
            Outgoing::Frame {
                hdr,
                data,
                complete: pending_id.filter(|_| !sync),
            }
        } else if read_in_place {
            let mut hdr = message_header(kind::RTS, tag, ctx, seq, len);
            hdr.aux0 = ptr as u64;
            hdr.aux1 = token;
            Outgoing::header_only(hdr)
        } else {
            let mut hdr = message_header(kind::FRAG, tag, ctx, seq, len);
            if sync {
                hdr.flags |= flags::SYNC;
                hdr.aux1 = id.token();
            }
            Outgoing::Fragments {
                hdr,
                data,
                offset: 0,
                complete: pending_id.filter(|_| !sync),
            }
        };
        let restartable = self.core.restartable;
        let peer = self.peer_mut(dest)?;
        if sync && restartable {
            peer.sync_waiting.insert(seq, id.token());
        } else if read_in_place && restartable {
            peer.fin_waiting.insert(seq, id.token());
        }
        vpml_fault_points::fault_point!("send.before_frame");
        peer.pending.push_back(item);
        self.push_pending(dest);
        vpml_fault_points::fault_point!("send.after_frame");
        if read_in_place {
            // The send completes only after this (its FIN cannot be
            // handled before the call returns).
            self.protocol_keep(&msg)?;
        }
        Ok(id)
    }

    fn peer_mut(&mut self, p: usize) -> Result<&mut Peer> {
        self.peers
            .get_mut(p)
            .and_then(Option::as_mut)
            .ok_or(Error::InvalidRank {
                rank: p as i64,
                size: self.size,
            })
    }

    /// Write as many queued frames to `dest` as fit. Returns true if any was written.
    fn push_pending(&mut self, dest: usize) -> bool {
        let Some(peer) = self.peers[dest].as_mut() else {
            return false;
        };
        let mut wrote = false;
        while let Some(item) = peer.pending.front_mut() {
            match item {
                Outgoing::Frame {
                    hdr,
                    data,
                    complete,
                } => {
                    // SAFETY: `data` belongs to an active send (start_send contract).
                    let bytes = unsafe { data.as_slice() };
                    if !write_or_announce(&mut peer.link, hdr, bytes) {
                        break;
                    }
                    wrote = true;
                    if let Some(id) = complete.take() {
                        self.core.complete(id);
                    }
                    peer.pending.pop_front();
                }
                Outgoing::Fragments {
                    hdr,
                    data,
                    offset,
                    complete,
                } => {
                    let mut finished = false;
                    loop {
                        let chunk = (data.len - *offset).min(peer.link.fragment_size());
                        let mut h = *hdr;
                        h.aux0 = chunk as u64;
                        if *offset == 0 {
                            h.flags |= flags::FIRST;
                        }
                        // SAFETY: as above; offset + chunk <= len.
                        let bytes = unsafe {
                            RawBytes {
                                ptr: data.ptr.add(*offset),
                                len: chunk,
                            }
                            .as_slice()
                        };
                        if !write_or_announce(&mut peer.link, &h, bytes) {
                            break;
                        }
                        wrote = true;
                        *offset += chunk;
                        if *offset == data.len {
                            finished = true;
                            break;
                        }
                    }
                    if !finished {
                        break;
                    }
                    if let Some(id) = complete.take() {
                        self.core.complete(id);
                    }
                    peer.pending.pop_front();
                }
            }
        }
        if wrote {
            self.ring_doorbell(dest);
        }
        wrote
    }

    /// Wake `dest` if it sleeps on its doorbell.
    fn ring_doorbell(&self, dest: usize) {
        let shm = self.peers[dest].as_ref().is_some_and(|p| p.link.is_shm());
        if shm && let Some(mb) = self.mailboxes[dest].as_ref() {
            ring(mb.doorbell());
        }
    }

    /// Queue the control frames produced while handling arrivals.
    fn flush_control(&mut self) {
        let out = std::mem::take(&mut self.core.control_out);
        for (p, hdr) in out {
            if p == self.core.rank {
                // Acknowledgements to ourselves complete the send directly.
                self.core.complete(ReqId::from_token(hdr.aux1));
                continue;
            }
            if let Some(peer) = self.peers[p].as_mut() {
                peer.pending.push_back(Outgoing::header_only(hdr));
            }
            self.push_pending(p);
        }
    }

    // -------------------------------------------------------------- receives

    /// Post a receive into `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` stays valid, writable and otherwise untouched until the
    /// returned request completes.
    pub(crate) unsafe fn start_recv(
        &mut self,
        spec: RecvSpec,
        ptr: *mut u8,
        len: usize,
    ) -> Result<ReqId> {
        self.check_alive()?;
        let mut spec = spec;
        let mut call = 0;
        let mut plan = RecvPlan::Post;
        if self.protocol.is_some() {
            call = self.next_call();
            plan = self
                .hook(|p| p.post_recv(call, &mut spec))?
                .unwrap_or(RecvPlan::Post);
        }
        let id = self.core.alloc(SlotKind::Recv, RawBytes { ptr, len });
        let report = self.protocol.is_some();
        if let Some(s) = self.core.slot_mut(id) {
            s.call = call;
            // Only a protocol wants to hear about matches (none is free).
            s.any_source = report && spec.source.is_none();
            s.held_for_cancel = plan == RecvPlan::HoldForCancel;
        }
        if plan == RecvPlan::HoldForCancel {
            return Ok(id);
        }
        if let Some((env, u)) = self.core.matching.take_unexpected(&spec) {
            if let Err(e) = self.core.finish_unexpected(id, env, u) {
                // Like a failure inside progress: nothing may keep pointing
                // at user buffers afterwards.
                self.fail(&e);
                return Err(e);
            }
            self.flush_control();
        } else {
            self.core.matching.post(spec, id);
        }
        self.report_matches()?;
        Ok(id)
    }

    /// The application's `cancel`: withdraw a receive that has not matched
    /// (sends are never cancelled). Reported to the protocol.
    pub(crate) fn cancel(&mut self, id: ReqId) -> Result<bool> {
        let Some(slot) = self.core.slot(id) else {
            return Ok(false);
        };
        let (request, is_recv) = (slot.call, slot.kind == SlotKind::Recv);
        if !is_recv || self.protocol.is_none() {
            return Ok(self.withdraw(id));
        }
        let call = self.next_call();
        match self.hook(|p| p.replay_cancel(call, request))? {
            Some(Replay::Logged(false)) => Ok(false),
            Some(Replay::Logged(true)) => {
                // The receive was held back from matching since it was
                // posted (`RecvPlan::HoldForCancel`).
                if !self.withdraw(id) {
                    let e = self.diverged(format!(
                        "call {call} cancelled the receive of call {request} the first time; now that receive has matched"
                    ));
                    self.fail(&e);
                    return Err(e);
                }
                Ok(true)
            }
            _ => {
                let cancelled = self.withdraw(id);
                self.hook(|p| p.cancel(call, request, cancelled))?;
                Ok(cancelled)
            }
        }
    }

    /// Withdraw a posted receive. True if it was withdrawn (it had not matched).
    pub(crate) fn withdraw(&mut self, id: ReqId) -> bool {
        let Some(slot) = self.core.slot(id) else {
            return false;
        };
        if slot.kind != SlotKind::Recv || slot.done {
            return false;
        }
        if !slot.held_for_cancel && !self.core.matching.remove_posted(&id) {
            return false;
        }
        let mut st = Status::new(0, 0, 0, 0);
        st.cancelled = true;
        self.core.set_status(id, st);
        self.core.complete(id);
        true
    }

    /// Look for a matching message without receiving it.
    pub(crate) fn iprobe(&mut self, spec: &RecvSpec) -> Result<Option<Status>> {
        if let Some(answer) = self.replay_probe(spec, false)? {
            return Ok(answer);
        }
        let mut found = self.peek(spec);
        if found.is_none() {
            self.progress()?;
            found = self.peek(spec);
        }
        if self.protocol.is_some() {
            let call = self.last_call;
            self.hook(|p| p.probe(call, spec.source.is_none(), false, found.as_ref()))?;
        }
        Ok(found)
    }

    /// A probe while a protocol is active takes the next call id; while a
    /// restarted process replays, the logged answer is returned (waiting
    /// for the logged message if need be). `None`: probe as usual (the
    /// call id is `last_call`).
    fn replay_probe(&mut self, spec: &RecvSpec, blocking: bool) -> Result<Option<Option<Status>>> {
        if self.protocol.is_none() {
            return Ok(None);
        }
        let call = self.next_call();
        match self.hook(|p| p.replay_probe(call, spec, blocking))? {
            Some(Replay::Logged(Some((source, tag)))) => {
                let exact = RecvSpec {
                    source: Some(source),
                    tag: Some(tag),
                    context: spec.context,
                };
                let mut found = None;
                self.wait_until(|e| {
                    found = e.peek(&exact);
                    found.is_some()
                })?;
                Ok(Some(found))
            }
            Some(Replay::Logged(None)) | Some(Replay::NotYet) => {
                self.progress()?;
                Ok(Some(None))
            }
            _ => Ok(None),
        }
    }

    fn peek(&self, spec: &RecvSpec) -> Option<Status> {
        self.core
            .matching
            .peek_unexpected(spec)
            .map(|(env, _)| Status::new(env.source, env.tag, env.len, env.seq))
    }

    /// Block until a matching message is available; return its status.
    pub(crate) fn probe(&mut self, spec: &RecvSpec) -> Result<Status> {
        // A blocking probe always finds something; "nothing" cannot have
        // been logged for it.
        if let Some(Some(st)) = self.replay_probe(spec, true)? {
            return Ok(st);
        }
        let mut found = None;
        self.wait_until(|e| {
            found = e.peek(spec);
            found.is_some()
        })?;
        let found = found.ok_or(Error::RequestState("probe ended without a message"))?;
        if self.protocol.is_some() {
            let call = self.last_call;
            self.hook(|p| p.probe(call, spec.source.is_none(), true, Some(&found)))?;
        }
        Ok(found)
    }

    // ----------------------------------------------------------- completions

    pub(crate) fn is_done(&self, id: ReqId) -> bool {
        self.core.slot(id).is_some_and(|s| s.done)
    }

    /// Take the status of a completed request and free its slot.
    pub(crate) fn take_status(&mut self, id: ReqId) -> Result<Status> {
        let slot = self
            .core
            .slot_mut(id)
            .ok_or(Error::RequestState("stale request handle"))?;
        if !slot.done {
            return Err(Error::RequestState("request is not complete"));
        }
        let st = slot.status.take();
        self.core.free_slot(id);
        if let Some(why) = &self.failed {
            return Err(Error::EngineFailed(why.clone()));
        }
        st.ok_or(Error::RequestState("status already taken"))
    }

    /// The user dropped an active request: keep `keepalive` (the buffer)
    /// until the operation completes, then free everything.
    pub(crate) fn detach(&mut self, id: ReqId, keepalive: Option<Box<dyn std::any::Any>>) {
        let Some(slot) = self.core.slot_mut(id) else {
            return;
        };
        if slot.done {
            self.core.free_slot(id);
        } else {
            slot.detached = true;
            slot.keepalive = keepalive;
        }
    }

    /// Wait for one request.
    pub(crate) fn wait(&mut self, id: ReqId) -> Result<()> {
        self.check_not_held(id)?;
        self.wait_until(|e| e.is_done(id))
    }

    /// Wait for every request of `ids`.
    pub(crate) fn wait_all(&mut self, ids: &[Option<ReqId>]) -> Result<()> {
        for &id in ids.iter().flatten() {
            self.check_not_held(id)?;
        }
        self.wait_until(|e| ids.iter().flatten().all(|&id| e.is_done(id)))
    }

    /// A re-executed receive held back for a logged cancel completes only
    /// at that cancel: waiting for it first would never end, and means the
    /// re-execution left the logged one.
    fn check_not_held(&mut self, id: ReqId) -> Result<()> {
        if self.replay_end == 0 {
            return Ok(());
        }
        let Some(call) = self
            .core
            .slot(id)
            .filter(|s| s.held_for_cancel && !s.done)
            .map(|s| s.call)
        else {
            return Ok(());
        };
        let e = self.diverged(format!(
            "waits for the receive of call {call}, which the logged execution cancelled before it matched"
        ));
        self.fail(&e);
        Err(e)
    }

    /// [`Error::Diverged`] for this rank.
    fn diverged(&self, what: impl std::fmt::Display) -> Error {
        Error::diverged(self.core.rank, self.incarnation(), what)
    }

    /// Progress until `done` holds, idling politely.
    pub(crate) fn wait_until(&mut self, mut done: impl FnMut(&Engine) -> bool) -> Result<()> {
        let mut idle: u32 = 0;
        let mut yield_until: Option<std::time::Instant> = None;
        loop {
            if done(self) {
                return Ok(());
            }
            if self.progress()? {
                idle = 0;
                yield_until = None;
                continue;
            }
            idle += 1;
            if idle == 1 {
                // Nothing arrived: the protocol may prepare for what comes.
                self.hook(|p| {
                    p.idle();
                    Ok(())
                })?;
            }
            if idle < self.idle.spin {
                std::hint::spin_loop();
                continue;
            }
            let now = std::time::Instant::now();
            let until = *yield_until.get_or_insert(now + self.idle.yield_for);
            if now < until {
                std::thread::yield_now();
            } else {
                self.sleep();
                // After a wake-up, poll briefly before sleeping again.
                idle = self.idle.spin.saturating_sub(1000).max(self.idle.spin / 2);
                yield_until = Some(std::time::Instant::now());
            }
        }
    }

    /// Sleep on the doorbell unless something is already waiting.
    fn sleep(&mut self) {
        self.core.stats.sleeps += 1;
        if self.replay_alone
            && self
                .peers
                .iter()
                .flatten()
                .all(|p| matches!(&p.link, Link::Feed(q) if q.is_empty()))
        {
            // Nothing else can ever arrive.
            let e = Error::EngineFailed(
                "replay: the rank waits for a message the recording does not have (its execution diverged)".into(),
            );
            self.fail(&e);
            return;
        }
        if let Some(sim) = &self.sim {
            // Simulated: another rank runs meanwhile.
            sim.idle();
            return;
        }
        let Some(own) = self.own.as_ref() else {
            // A single rank waiting for itself can never be woken.
            std::thread::sleep(SLEEP_SLICE);
            return;
        };
        let bell = own.doorbell();
        bell.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // Something to read, or room for a frame we are waiting to write
        // (the reader may have freed space before our doorbell was armed).
        let ready =
            self.peers.iter_mut().flatten().any(|p| {
                p.link.has_frame() || p.pending.front().is_some_and(|o| o.fits(&mut p.link))
            });
        if !ready {
            // TCP peers wake us through the socket, shared-memory ones
            // through the doorbell; with both, poll the sockets briefly.
            let mut fds: Vec<libc::pollfd> = self
                .peers
                .iter()
                .flatten()
                .filter_map(|p| match &p.link {
                    Link::Tcp(c) => Some(libc::pollfd {
                        fd: c.fd(),
                        events: libc::POLLIN | if c.queued() > 0 { libc::POLLOUT } else { 0 },
                        revents: 0,
                    }),
                    Link::Shm { .. } | Link::Dead | Link::Feed(_) | Link::Sim(_) => None,
                })
                .collect();
            fds.extend(self.idle_fds());
            if fds.is_empty() {
                futex::wait(bell, 1, SLEEP_SLICE);
            } else {
                let any_shm = self.peers.iter().flatten().any(|p| p.link.is_shm());
                let ms = if any_shm {
                    1
                } else {
                    SLEEP_SLICE.as_millis() as i32
                };
                // SAFETY: `fds` is a valid array of pollfd for the call.
                unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            }
        }
        bell.store(0, Ordering::Relaxed);
    }

    /// One pass over every channel. Returns true if anything happened.
    ///
    /// A fatal error (corrupt frame, failed remote read) puts the engine in
    /// the failed state: every queued send and posted receive is dropped, so
    /// no user buffer is referenced any more, and every later call fails.
    pub(crate) fn progress(&mut self) -> Result<bool> {
        if let Some(why) = &self.failed {
            return Err(Error::EngineFailed(why.clone()));
        }
        match self.progress_channels() {
            Ok(any) => {
                self.report_matches()?;
                Ok(any)
            }
            Err(e) => {
                self.fail(&e);
                Err(e)
            }
        }
    }

    fn check_alive(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(Error::EngineFailed(why.clone())),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: &Error) {
        tracing::error!(rank = self.core.rank, "fatal: {e}");
        if let Error::Diverged(why) = e {
            // Exact or loud: whatever the application does with the
            // error, the job stops here, with this line.
            self.abort(DIVERGED_EXIT_CODE, why);
        }
        self.failed = Some(e.to_string());
        for peer in self.peers.iter_mut().flatten() {
            peer.pending.clear();
            peer.partial = None;
        }
        for id in self.core.matching.drain_posted() {
            self.core.complete(id);
        }
        let active: Vec<ReqId> = self
            .core
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.in_use && !s.done)
            .map(|(i, s)| ReqId {
                idx: i as u32,
                generation: s.generation,
            })
            .collect();
        for id in active {
            self.core.complete(id);
        }
    }

    fn progress_channels(&mut self) -> Result<bool> {
        let mut any = false;
        // Every pass, under a protocol: a peer restarted (the job page's
        // epoch moved), a restarted peer's connection is due, or this
        // process is catching up. One look in the common case.
        if let Some(rc) = &self.recovery
            && (rc.page.epoch() != rc.seen_epoch || rc.expected > 0 || rc.catching_up.is_some())
        {
            self.notice_restarts();
            self.accept_restarted()?;
            self.check_caught_up();
        }
        for p in 0..self.peers.len() {
            if self.chaos != 0 {
                // xorshift64: skip this peer on about a quarter of passes.
                self.chaos ^= self.chaos << 13;
                self.chaos ^= self.chaos >> 7;
                self.chaos ^= self.chaos << 17;
                if self.chaos.is_multiple_of(4) {
                    continue;
                }
            }
            let Some(peer) = self.peers[p].as_mut() else {
                continue;
            };
            let mut frames = 0;
            let mut died = false;
            loop {
                let hdr = match peer.link.peek() {
                    Ok(Some(h)) => h,
                    Ok(None) => break,
                    Err(reason) => return Err(Error::CorruptFrame { peer: p, reason }),
                };
                self.core.handle_frame(p, peer, &hdr)?;
                if self.core.gone.take().is_some() {
                    died = true;
                    break;
                }
                peer.link.consume(&hdr);
                frames += 1;
                if frames >= 64 {
                    break;
                }
            }
            if died {
                // The sender died before we could read its message: its
                // next process sends it again.
                tracing::info!(rank = self.core.rank, peer = p, "peer died");
                self.drop_link(p);
                any = true;
                continue;
            }
            let Some(peer) = self.peers[p].as_mut() else {
                continue;
            };
            if frames > 0 {
                any = true;
                if peer.link.publish()
                    && let Some(mb) = self.mailboxes[p].as_ref()
                {
                    ring(mb.doorbell());
                }
            }
            if !self.peers[p].as_ref().is_none_or(|q| q.pending.is_empty()) {
                any |= self.push_pending(p);
            }
        }
        if !self.core.control_out.is_empty() {
            self.flush_control();
            any = true;
        }
        self.apply_gc_notices()?;
        Ok(any)
    }

    // -------------------------------------------------------------- shutdown

    /// Complete every outgoing operation, then tell the launcher we are done.
    pub(crate) fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        self.wait_until(|e| {
            e.peers
                .iter()
                .flatten()
                .all(|p| p.pending.is_empty() && p.link.unsent() == 0)
                && e.core
                    .slots
                    .iter()
                    .all(|s| !s.in_use || s.done || s.kind == SlotKind::Recv)
        })?;
        self.hook(|p| p.finalize())?;
        let stats = std::env::var(crate::bootstrap::env::STATS).is_ok_and(|v| !v.is_empty());
        if stats && let Some(kv) = self.kv.as_mut() {
            let s = self.core.stats;
            let mut pairs = vec![
                format!(
                    "protocol={}",
                    self.protocol.as_ref().map_or("none", |p| p.name())
                ),
                format!("messages_sent={}", s.messages_sent),
                format!("bytes_sent={}", s.bytes_sent),
                format!("messages_received={}", s.messages_received),
                format!("sleeps={}", s.sleeps),
            ];
            for (k, v) in self
                .protocol
                .as_ref()
                .map(|p| p.stats())
                .unwrap_or_default()
            {
                pairs.push(format!("{k}={v}"));
            }
            kv.put(&format!("stats.{}", self.core.rank), &pairs.join(","))?;
        }
        if let Some(kv) = self.kv.as_mut() {
            kv.finalize()?;
        }
        if let Some(sim) = &self.sim {
            sim.finalized(self.core.rank);
        }
        self.wait_for_everyone()?;
        self.finalized = true;
        Ok(())
    }

    /// Ask the launcher to stop the job.
    pub(crate) fn abort(&mut self, code: i32, message: &str) {
        if let Some(kv) = self.kv.as_mut()
            && let Err(e) = kv.abort(code, message)
        {
            tracing::warn!("abort could not reach the launcher: {e}");
        }
    }
}

/// Write a frame, or, if the ring is full, ask the reader to ring our
/// doorbell when it frees space (and try once more in case it just did).
fn write_or_announce(w: &mut Link, hdr: &FrameHeader, bytes: &[u8]) -> bool {
    w.try_write(hdr, bytes)
        || (w.announce_waiting(hdr.kind, bytes.len()) && w.try_write(hdr, bytes))
}

fn ring(bell: &AtomicU32) {
    fence(Ordering::SeqCst);
    if bell.load(Ordering::Relaxed) != 0 {
        bell.store(0, Ordering::Relaxed);
        futex::wake(bell);
    }
}

/// A message about to leave, before the protocol gave it a call id.
fn outgoing<'a>(
    dest: usize,
    context: u32,
    tag: i32,
    seq: u64,
    payload: &'a [u8],
    synchronous: bool,
) -> OutgoingMessage<'a> {
    OutgoingMessage {
        call: 0,
        dest,
        context,
        tag,
        seq,
        payload,
        synchronous,
    }
}

/// The header of an application message of frame kind `k`.
fn message_header(k: u8, tag: i32, ctx: u32, seq: u64, len: usize) -> FrameHeader {
    let mut hdr = FrameHeader::new(k);
    hdr.tag = tag;
    hdr.context = ctx;
    hdr.seq = seq;
    hdr.msg_len = len as u64;
    hdr
}

/// A value every rank can read out of its neighbour to test single-copy reads.
static SINGLE_COPY_PROBE: u64 = 0x5650_4d4c_5052_4f42;

/// Can ranks read each other's memory with `process_vm_readv`? (Seccomp
/// profiles of containers and Yama restrictions often forbid it.) Each rank
/// reads the probe of its right neighbour, publishes the outcome, and all
/// use single copy only if every read worked — otherwise every large
/// message travels as fragments.
fn single_copy_agreed(
    kv: &mut KvClient,
    env: &JobEnv,
    mailboxes: &[Option<Mailbox>],
) -> Result<bool> {
    let disabled = std::env::var_os("VPML_SHM_NO_SINGLE_COPY").is_some();
    if env.size == 1 {
        return Ok(!disabled);
    }
    let right = (env.rank + 1) % env.size;
    let mut ok = !disabled;
    if ok {
        let addr = kv
            .get(&format!("probe.{right}"))?
            .and_then(|a| u64::from_str_radix(&a, 16).ok());
        let pid = mailboxes[right]
            .as_ref()
            .map(|m| m.pid().load(Ordering::Acquire) as i32);
        let mut got = [0u8; 8];
        ok = match (addr, pid) {
            (Some(addr), Some(pid)) => {
                read_remote(pid, addr, &mut got).is_ok()
                    && u64::from_ne_bytes(got) == SINGLE_COPY_PROBE
            }
            _ => false,
        };
        if !ok {
            tracing::info!(
                rank = env.rank,
                "single-copy reads are not allowed here; using fragments"
            );
        }
    }
    kv.put(
        &format!("single-copy.{}", env.rank),
        if ok { "1" } else { "0" },
    )?;
    kv.fence()?;
    for r in 0..env.size {
        if kv.get(&format!("single-copy.{r}"))?.as_deref() != Some("1") {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Did a remote read fail because the sender's process is gone?
fn sender_died(e: &Error) -> bool {
    matches!(e, Error::RemoteRead { source, .. } if source.raw_os_error() == Some(libc::ESRCH))
}

/// Copy `dst.len()` bytes from address `addr` of process `pid`.
fn read_remote(pid: i32, addr: u64, dst: &mut [u8]) -> std::io::Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let local = libc::iovec {
            // SAFETY: in bounds of `dst`.
            iov_base: unsafe { dst.as_mut_ptr().add(done) } as *mut libc::c_void,
            iov_len: dst.len() - done,
        };
        let remote = libc::iovec {
            iov_base: (addr as usize + done) as *mut libc::c_void,
            iov_len: dst.len() - done,
        };
        // SAFETY: `local` describes writable memory we own; the kernel
        // validates the remote range and fails with EFAULT if it is bad.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "remote read returned no data",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

impl Core {
    fn new(rank: usize, size: usize) -> Core {
        Core {
            rank,
            slots: Vec::new(),
            free: Vec::new(),
            matching: MatchQueues::new(),
            recv_seq: vec![0; size],
            control_out: Vec::new(),
            pids: vec![0; size],
            stats: EngineStats::default(),
            matches: Vec::new(),
            restartable: false,
            gone: None,
            gc_notices: Vec::new(),
        }
    }

    fn alloc(&mut self, kind: SlotKind, buf: RawBytes) -> ReqId {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    in_use: false,
                    done: false,
                    detached: false,
                    kind,
                    buf,
                    keepalive: None,
                    status: None,
                    call: 0,
                    any_source: false,
                    completed_at_start: false,
                    held_for_cancel: false,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[idx as usize];
        // Generation 0 would make token 0, which means "no token".
        s.generation = s.generation.wrapping_add(1).max(1);
        s.in_use = true;
        s.done = false;
        s.detached = false;
        s.kind = kind;
        s.buf = buf;
        s.keepalive = None;
        s.status = None;
        s.call = 0;
        s.any_source = false;
        s.completed_at_start = false;
        s.held_for_cancel = false;
        ReqId {
            idx,
            generation: s.generation,
        }
    }

    /// Send `id` just completed as it started: mark it if it is a standard
    /// send small enough to do so in every execution (see
    /// [`Slot::completed_at_start`]).
    fn mark_completed_at_start(&mut self, id: ReqId, sync: bool) {
        if let Some(s) = self.slot_mut(id) {
            s.completed_at_start = !sync && s.done && s.buf.len <= EAGER_LIMIT;
        }
    }

    fn slot(&self, id: ReqId) -> Option<&Slot> {
        self.slots
            .get(id.idx as usize)
            .filter(|s| s.in_use && s.generation == id.generation)
    }

    fn slot_mut(&mut self, id: ReqId) -> Option<&mut Slot> {
        self.slots
            .get_mut(id.idx as usize)
            .filter(|s| s.in_use && s.generation == id.generation)
    }

    fn free_slot(&mut self, id: ReqId) {
        if let Some(s) = self.slot_mut(id) {
            s.in_use = false;
            s.keepalive = None;
            s.status = None;
            self.free.push(id.idx);
        }
    }

    fn set_status(&mut self, id: ReqId, st: Status) {
        if let Some(s) = self.slot_mut(id) {
            s.status = Some(st);
        }
    }

    fn complete(&mut self, id: ReqId) {
        let Some(s) = self.slot_mut(id) else {
            return;
        };
        s.done = true;
        if s.detached {
            self.free_slot(id);
        }
    }

    /// Copy `data` into receive `id` and complete it (truncating if needed).
    fn fill(&mut self, id: ReqId, env: &Envelope, data: &[u8]) {
        let Some(slot) = self.slot_mut(id) else {
            return;
        };
        let n = data.len().min(slot.buf.len);
        // SAFETY: `slot.buf` belongs to an active receive (Slot invariant).
        unsafe { slot.buf.as_mut_slice()[..n].copy_from_slice(&data[..n]) };
        let buf_len = slot.buf.len;
        self.note_match(id, env.source);
        let st = self.recv_status(env, buf_len);
        self.set_status(id, st);
        self.complete(id);
    }

    /// Copy `bytes` into receive `id` at `offset`, dropping what does not
    /// fit (the receive then reports truncation).
    fn write_at(&mut self, id: ReqId, offset: usize, bytes: &[u8]) {
        let Some(slot) = self.slot_mut(id) else {
            return;
        };
        let room = slot.buf.len.saturating_sub(offset);
        let n = bytes.len().min(room);
        if n > 0 {
            // SAFETY: `slot.buf` belongs to an active receive (Slot
            // invariant) and offset + n <= its length.
            unsafe { slot.buf.as_mut_slice()[offset..offset + n].copy_from_slice(&bytes[..n]) };
        }
    }

    /// Remember that an ANY_SOURCE receive matched (for the protocol).
    fn note_match(&mut self, id: ReqId, source: usize) {
        if let Some(slot) = self.slot(id)
            && slot.any_source
        {
            let call = slot.call;
            self.matches.push((call, source));
        }
    }

    fn recv_status(&mut self, env: &Envelope, buf_len: usize) -> Status {
        self.stats.messages_received += 1;
        let mut st = Status::new(env.source, env.tag, env.len.min(buf_len), env.seq);
        if env.len > buf_len {
            st.error = Some(Error::Truncated {
                source_rank: env.source,
                tag: env.tag,
                message_len: env.len,
                buffer_len: buf_len,
            });
        }
        st
    }

    /// Check and advance the channel sequence number of `source`.
    fn accept_seq(&mut self, source: usize, seq: u64) -> Result<()> {
        self.check_seq(source, seq)?;
        self.recv_seq[source] = seq;
        Ok(())
    }

    /// Is `seq` the next message of `source`?
    fn check_seq(&self, source: usize, seq: u64) -> Result<()> {
        let expected = self.recv_seq[source] + 1;
        if seq != expected {
            return Err(Error::CorruptFrame {
                peer: source,
                reason: format!("sequence number {seq}, expected {expected}"),
            });
        }
        Ok(())
    }

    /// A complete small message arrived (or was sent to self).
    fn deliver_eager(&mut self, env: Envelope, data: &[u8], sync: Option<u64>) -> Result<()> {
        if let Some(id) = self.matching.match_arrival(&env) {
            self.fill(id, &env, data);
            if let Some(token) = sync {
                self.ack(env.source, kind::SYNC_ACK, token, env.seq);
            }
        } else {
            self.matching.push_unexpected(
                env,
                Unexpected::Eager {
                    data: data.to_vec(),
                    sync,
                },
            );
        }
        Ok(())
    }

    /// A reassembled message: like `deliver_eager` but the bytes are owned.
    fn deliver_owned(&mut self, env: Envelope, data: Vec<u8>, sync: Option<u64>) {
        if let Some(id) = self.matching.match_arrival(&env) {
            self.fill(id, &env, &data);
            if let Some(token) = sync {
                self.ack(env.source, kind::SYNC_ACK, token, env.seq);
            }
        } else {
            self.matching
                .push_unexpected(env, Unexpected::Eager { data, sync });
        }
    }

    fn deliver_self_sync(&mut self, env: Envelope, data: RawBytes, token: u64) -> Result<()> {
        if let Some(id) = self.matching.match_arrival(&env) {
            // SAFETY: the sender's buffer is live until its send completes,
            // which happens right here.
            let bytes = unsafe { data.as_slice() };
            self.fill(id, &env, bytes);
            self.ack(self.rank, kind::SYNC_ACK, token, env.seq);
        } else {
            self.matching
                .push_unexpected(env, Unexpected::SelfSync { data, token });
        }
        Ok(())
    }

    /// Acknowledge message `seq` from `to` (token: the sender's request).
    fn ack(&mut self, to: usize, k: u8, token: u64, seq: u64) {
        let mut hdr = FrameHeader::new(k);
        hdr.aux1 = token;
        hdr.seq = seq;
        self.control_out.push((to, hdr));
    }

    /// Read a rendezvous message out of the sender's memory into receive `id`.
    fn pull(&mut self, id: ReqId, env: &Envelope, addr: u64, token: u64) -> Result<()> {
        let Some(slot) = self.slot_mut(id) else {
            return Ok(());
        };
        let n = env.len.min(slot.buf.len);
        // SAFETY: `slot.buf` belongs to an active receive (Slot invariant).
        let dst = unsafe { &mut slot.buf.as_mut_slice()[..n] };
        let buf_len = slot.buf.len;
        read_remote(self.pids[env.source], addr, dst).map_err(|source| Error::RemoteRead {
            peer: env.source,
            len: n,
            source,
        })?;
        self.note_match(id, env.source);
        let st = self.recv_status(env, buf_len);
        self.set_status(id, st);
        self.complete(id);
        self.ack(env.source, kind::FIN, token, env.seq);
        Ok(())
    }

    /// A receive matched an unexpected message.
    fn finish_unexpected(&mut self, id: ReqId, env: Envelope, u: Unexpected) -> Result<()> {
        match u {
            Unexpected::Eager { data, sync } => {
                self.fill(id, &env, &data);
                if let Some(token) = sync {
                    self.ack(env.source, kind::SYNC_ACK, token, env.seq);
                }
            }
            Unexpected::Rendezvous { addr, token } => self.pull(id, &env, addr, token)?,
            Unexpected::SelfSync { data, token } => {
                // SAFETY: the blocked or request-owned sender buffer is live
                // until the acknowledgement below completes its send.
                let bytes = unsafe { data.as_slice() };
                self.fill(id, &env, bytes);
                self.ack(self.rank, kind::SYNC_ACK, token, env.seq);
            }
        }
        Ok(())
    }

    /// Handle one frame from peer `p`.
    fn handle_frame(&mut self, p: usize, peer: &mut Peer, hdr: &FrameHeader) -> Result<()> {
        let corrupt = |reason: String| Error::CorruptFrame { peer: p, reason };
        let env = Envelope {
            source: p,
            tag: hdr.tag,
            context: hdr.context,
            seq: hdr.seq,
            len: usize::try_from(hdr.msg_len).map_err(|_| corrupt("length overflow".into()))?,
        };
        match hdr.kind {
            kind::EAGER => {
                self.accept_seq(p, hdr.seq)?;
                let data = peer.link.payload(hdr, env.len).map_err(corrupt)?;
                let sync = (hdr.flags & flags::SYNC != 0).then_some(hdr.aux0);
                self.deliver_eager(env, data, sync)?;
            }
            kind::RTS => {
                self.check_seq(p, hdr.seq)?;
                let (addr, token) = (hdr.aux0, hdr.aux1);
                if let Some(posted) = self.matching.match_arrival_entry(&env) {
                    match self.pull(posted.item, &env, addr, token) {
                        Ok(()) => self.recv_seq[p] = hdr.seq,
                        Err(e) if self.restartable && sender_died(&e) => {
                            self.matching.repost(posted);
                            self.gone = Some(p);
                        }
                        Err(e) => return Err(e),
                    }
                } else if self.restartable {
                    // Read it now: nothing queued may point into a process
                    // that can die (and a checkpoint saves the bytes).
                    let mut data = Vec::new();
                    data.try_reserve_exact(env.len).map_err(|_| {
                        corrupt(format!("cannot allocate {} bytes for a message", env.len))
                    })?;
                    data.resize(env.len, 0);
                    match read_remote(self.pids[p], addr, &mut data) {
                        Ok(()) => {
                            self.recv_seq[p] = hdr.seq;
                            let sync = (token != 0).then_some(token);
                            if token == 0 {
                                self.ack(p, kind::FIN, 0, hdr.seq);
                            }
                            self.deliver_owned(env, data, sync);
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => self.gone = Some(p),
                        Err(source) => {
                            return Err(Error::RemoteRead {
                                peer: p,
                                len: env.len,
                                source,
                            });
                        }
                    }
                } else {
                    self.recv_seq[p] = hdr.seq;
                    self.matching
                        .push_unexpected(env, Unexpected::Rendezvous { addr, token });
                }
            }
            kind::FIN | kind::SYNC_ACK => {
                let waiting = peer.sync_waiting.remove(&hdr.seq);
                let waiting = peer.fin_waiting.remove(&hdr.seq).or(waiting);
                let id = match waiting {
                    // Restartable: by sequence number, which stays; the
                    // token in the frame may name a request of a dead
                    // process of ours.
                    Some(token) if self.restartable => ReqId::from_token(token),
                    None if self.restartable => {
                        // A send of an earlier process of ours, or one not
                        // re-executed yet: remember that it has matched.
                        if let Some(unmatched) = peer.sync_unmatched.as_mut() {
                            unmatched.remove(&hdr.seq);
                        }
                        return Ok(());
                    }
                    _ => ReqId::from_token(hdr.aux1),
                };
                match self.slot(id) {
                    Some(s) if s.kind == SlotKind::Send && !s.done => self.complete(id),
                    // A restarted receiver may acknowledge a message again.
                    _ if self.restartable => {}
                    _ => return Err(corrupt(format!("acknowledgement for unknown send {id:?}"))),
                }
            }
            kind::GC => self.gc_notices.push((p, hdr.seq)),
            kind::SYNC_UNMATCHED => {
                peer.sync_unmatched_incoming.insert(hdr.seq);
            }
            kind::SYNC_STATE_END => {
                let unmatched = std::mem::take(&mut peer.sync_unmatched_incoming);
                // Re-executed synchronous sends waiting for this answer:
                // those the peer matched already are complete.
                let matched: Vec<u64> = peer
                    .sync_waiting
                    .iter()
                    .filter(|(seq, _)| **seq <= hdr.seq && !unmatched.contains(seq))
                    .map(|(_, token)| *token)
                    .collect();
                peer.sync_waiting
                    .retain(|seq, _| *seq > hdr.seq || unmatched.contains(seq));
                peer.sync_unmatched = Some(unmatched);
                for token in matched {
                    self.complete(ReqId::from_token(token));
                }
            }
            kind::FRAG => {
                let chunk = usize::try_from(hdr.aux0).map_err(|_| corrupt("bad chunk".into()))?;
                let bytes = peer.link.payload(hdr, chunk).map_err(corrupt)?;
                if hdr.flags & flags::FIRST != 0 {
                    if peer.partial.is_some() {
                        return Err(corrupt(
                            "new fragmented message before the last ended".into(),
                        ));
                    }
                    // Channel order makes matching at the first fragment
                    // safe: nothing from this peer can come in between.
                    let dest = match self.matching.match_arrival_entry(&env) {
                        Some(posted) => PartialDest::Posted(posted),
                        None => {
                            let mut data = Vec::new();
                            data.try_reserve_exact(env.len).map_err(|_| {
                                corrupt(format!("cannot allocate {} bytes for a message", env.len))
                            })?;
                            PartialDest::Buffered(data)
                        }
                    };
                    let sync = (hdr.flags & flags::SYNC != 0).then_some(hdr.aux1);
                    peer.partial = Some(Partial {
                        env,
                        dest,
                        got: 0,
                        sync,
                    });
                }
                let Some(part) = peer.partial.as_mut() else {
                    return Err(corrupt("fragment without a first fragment".into()));
                };
                if part.got + bytes.len() > part.env.len {
                    return Err(corrupt("fragments exceed the message length".into()));
                }
                match &mut part.dest {
                    PartialDest::Posted(posted) => self.write_at(posted.item, part.got, bytes),
                    PartialDest::Buffered(data) => data.extend_from_slice(bytes),
                }
                part.got += bytes.len();
                if part.got == part.env.len
                    && let Some(part) = peer.partial.take()
                {
                    self.accept_seq(p, part.env.seq)?;
                    match part.dest {
                        PartialDest::Buffered(data) => {
                            self.deliver_owned(part.env, data, part.sync)
                        }
                        PartialDest::Posted(Posted { item: id, .. }) => {
                            let buf_len = self.slot(id).map_or(0, |s| s.buf.len);
                            self.note_match(id, part.env.source);
                            let st = self.recv_status(&part.env, buf_len);
                            self.set_status(id, st);
                            self.complete(id);
                            if let Some(token) = part.sync {
                                self.ack(part.env.source, kind::SYNC_ACK, token, part.env.seq);
                            }
                        }
                    }
                }
            }
            other => return Err(corrupt(format!("unknown frame kind {other}"))),
        }
        Ok(())
    }
}

const _: () = assert!(EAGER_LIMIT <= RING_CAPACITY / 4 - 64 && FRAGMENT <= RING_CAPACITY / 4 - 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_tokens_are_never_zero_even_when_generations_wrap() {
        let empty = RawBytes {
            ptr: std::ptr::null_mut(),
            len: 0,
        };
        let mut core = Core::new(0, 1);
        let id = core.alloc(SlotKind::Send, empty);
        core.free_slot(id);
        core.slots[0].generation = u32::MAX;
        let id = core.alloc(SlotKind::Send, empty);
        assert_eq!(id.generation, 1);
        assert_ne!(
            id.token(),
            0,
            "token 0 means a logged send with nothing to complete"
        );
    }
}
