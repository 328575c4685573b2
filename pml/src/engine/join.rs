//! Making an engine: a single rank, a rank replayed alone, a simulated
//! rank, or a rank joining a job started by `vpml run` (mailboxes, fences,
//! links, and the single-copy agreement).

use std::collections::VecDeque;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustix::process::{PTracer, getppid, set_ptracer};

use super::lane_threads::LaneThreads;
use super::link::{Link, Peer};
use super::requests::{Core, read_remote};
use super::{Engine, IdlePolicy, Recovery, Rendezvous};
use crate::bootstrap::{JobEnv, KvClient};
use crate::config::EngineSettings;
use crate::error::{Error, Result};
use crate::lanes::LaneMap;
use crate::protocol::NoProtocol;
use crate::recovery::JobPage;
use crate::shm::mailbox::{Mailbox, RING_CAPACITY};
use crate::shm::ring::{RingReader, RingWriter};
use crate::tcp::TcpConn;

impl Engine {
    /// A single-rank engine (the program was not started by `vpml run`).
    pub(crate) fn singleton() -> Engine {
        let none = NoProtocol::new();
        Engine {
            core: Core::new(0, 1),
            size: 1,
            peers: vec![None],
            send_seq: vec![LaneMap::new()],
            own: None,
            mailboxes: vec![None],
            single_copy: false,
            idle: IdlePolicy {
                spin: 64,
                yield_for: Duration::ZERO,
            },
            kv: None,
            finalized: false,
            stopped_job: false,
            job_id: "singleton".into(),
            next_context: crate::idup::FIRST_AGREED_CONTEXT,
            world_idups: 0,
            failed: None,
            caps: super::ProtocolCaps::of(&none),
            protocol: Box::new(none),
            last_calls: LaneMap::new(),
            all_calls: 0,
            progresses: 0,
            process_lane_contexts: Vec::new(),
            lane_threads: LaneThreads::default(),
            replay_ends: LaneMap::new(),
            recovery: None,
            last_checkpoint: Instant::now(),
            coordination: None,
            replay_alone: false,
            chaos: 0,
            publish_stats: false,
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
        e.send_seq = vec![LaneMap::new(); size];
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
        chaos: u64,
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
        e.send_seq = vec![LaneMap::new(); size];
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
            handshakes: Vec::new(),
            expecting: vec![false; size],
            expected: 0,
            suppress: vec![LaneMap::new(); size],
            my_host: 0,
            transport_tcp: false,
            token: String::new(),
            catching_up: None,
            page,
        });
        e.sim = Some(hooks);
        // The order a progress pass visits peers in, as `--chaos` varies it.
        e.chaos = if chaos == 0 { 0 } else { chaos | 1 };
        e
    }

    /// Join the job described by `env`: map every mailbox, publish our pid,
    /// wait for every rank, then open the channels.
    pub(crate) fn join(env: &JobEnv, settings: &EngineSettings) -> Result<Engine> {
        let join_started = Instant::now();
        vpml_fault_points::arm_from_env(&format!("rank {}", env.rank)).map_err(Error::Bootstrap)?;
        let mut kv = KvClient::connect(&env.kv_addr, &env.token, env.rank, env.incarnation)?;
        let mut mailboxes = Vec::with_capacity(env.size);
        for &fd in &env.mailbox_fds {
            mailboxes.push(Some(Mailbox::map(fd, env.size)?));
        }
        for &fd in &env.mailbox_fds {
            close_inherited(fd);
        }
        let own = mailboxes[env.rank].take();
        let own = own.ok_or_else(|| Error::Bootstrap("own mailbox missing".into()))?;
        own.pid().store(std::process::id(), Ordering::Release);
        // Ranks are siblings: under Yama ptrace_scope=1 they may read each
        // other's memory only if they name an ancestor as their tracer.
        // Failure (no Yama) is harmless. A parent outside our pid namespace
        // has no pid here (getppid gives 0): that names no tracer, as before.
        let _ = set_ptracer(getppid().map_or(PTracer::None, PTracer::ProcessID));
        let recovery = match env.job_page_fd {
            Some(fd) => Some(Recovery::start(
                env,
                fd,
                &mut kv,
                join_started,
                settings.spawned_at_ns,
            )?),
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
            single_copy = single_copy_agreed(&mut kv, env, &mailboxes, settings.no_single_copy)?;
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
        // A rank with a core to itself sleeps only after long idling, and
        // then after 1,000 empty polls per wake-up: it may pay membarrier
        // per sleep, and its peers ring it lightly (see `doorbell_fence`).
        // Not with a TCP peer: the rank then sleeps in 1 ms slices. A
        // previous incarnation's word is harmless: nobody rings this rank
        // before its links come up, after this store.
        let all_shm = env.local_size == env.size
            && peers
                .iter()
                .flatten()
                .all(|p| !matches!(p.link, Link::Tcp(_)));
        let light_ring = all_shm && !oversubscribed && crate::shm::doorbell_fence::enable();
        own.sleeps_with_membarrier()
            .store(u32::from(light_ring), Ordering::SeqCst);
        let idle = if oversubscribed {
            // Yield after a few empty polls: a rank that spins keeps the
            // core from the rank it waits for (8 ranks on 2 cores: barrier
            // 26-33 -> 16-18 us, scatter 7-13 -> 5-6 us against 50 polls).
            // With four ranks or more per core, after one: the rank waited
            // for is seldom running (8 ranks on 2 cores, 6 alternated
            // rounds: allgather, allreduce, gather, scatter 4-64 B 3-12%
            // faster). With two per core it often is, and answers within
            // the polls (4 ranks on 2 cores: ping-pong 0.12 -> 0.35 us with
            // one poll). Sleeping instead of yielding made 8 ranks' small
            // collectives 3-4x slower: a wake-up costs more than the turns
            // it saves.
            IdlePolicy {
                spin: if env.local_size >= 4 * env.host_cores.max(1) {
                    1
                } else {
                    8
                },
                yield_for: Duration::from_millis(2),
            }
        } else {
            IdlePolicy {
                spin: 200_000,
                yield_for: Duration::ZERO,
            }
        };
        tracing::debug!(
            rank = env.rank,
            size = env.size,
            single_copy,
            light_ring,
            "joined job"
        );
        let mut core = Core::new(env.rank, env.size);
        core.pids = pids;
        core.restartable = recovery.is_some();
        let mut recovery = recovery;
        if let Some(c) = recovery.as_mut().and_then(|r| r.catching_up.as_mut()) {
            c.joined = Instant::now();
        }
        let none = NoProtocol::new();
        Ok(Engine {
            core,
            size: env.size,
            peers,
            send_seq: vec![LaneMap::new(); env.size],
            own: Some(std::sync::Arc::new(own)),
            mailboxes,
            single_copy,
            idle,
            kv: Some(kv),
            finalized: false,
            stopped_job: false,
            job_id: env.job_id.clone(),
            next_context: crate::idup::FIRST_AGREED_CONTEXT,
            world_idups: 0,
            failed: None,
            caps: super::ProtocolCaps::of(&none),
            protocol: Box::new(none),
            last_calls: LaneMap::new(),
            all_calls: 0,
            progresses: 0,
            process_lane_contexts: Vec::new(),
            lane_threads: LaneThreads::default(),
            replay_ends: LaneMap::new(),
            recovery,
            last_checkpoint: Instant::now(),
            coordination: None,
            replay_alone: false,
            chaos: settings.chaos.map_or(0, |seed| {
                (seed ^ (env.rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1
            }),
            publish_stats: settings.stats,
            sim: None,
        })
    }
}

/// Close descriptor `fd`, inherited from the launcher and mapped by now (a
/// mapping stays valid after its descriptor is closed). A negative number
/// names no descriptor (mapping it already failed with EBADF): left alone.
pub(super) fn close_inherited(fd: RawFd) {
    if fd < 0 {
        return;
    }
    // SAFETY: not negative, so not the -1 an OwnedFd never holds; the
    // descriptor was inherited for this process alone and nothing else
    // owns it (its mapping was made through a borrow that has ended), so
    // this is its one and only close.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
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
    disabled: bool,
) -> Result<bool> {
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
