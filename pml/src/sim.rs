//! The simulator's transport: ranks of one process joined by in-memory pipes.
//!
//! `vpml-sim` runs every rank of a job on its own thread of one process and
//! lets exactly one of them run at a time, choosing which from a seed. The
//! engine does not know it is simulated except in two places, both here:
//! its links to peers are [`Pipe`]s of frames (the same frames shared
//! memory and TCP carry), and when it has nothing to do it calls
//! [`SimHooks::idle`] instead of sleeping on a doorbell, which is where the
//! simulator switches to another rank. Everything else — matching, the
//! request table, the protocol hooks, fragments, synchronous sends — is the
//! engine every job runs.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::comm::Comm;
use crate::error::Result;
use crate::protocol::Protocol;
use crate::recovery::JobPage;
use crate::shm::ring::{FrameHeader, kind};

/// What a simulated rank's engine asks of the simulator.
///
/// The hooks run inside engine operations, while the rank's engine is
/// borrowed: they must not call back into the engine. They may unwind (the
/// simulator crashes a rank, or stops a run, by unwinding its thread).
pub trait SimHooks {
    /// The engine has nothing to do until a peer acts: let another rank
    /// (or the simulated loggers) run. Returns when this rank is scheduled
    /// again.
    fn idle(&self);

    /// A frame left rank `from` for rank `to`. `message` is
    /// `Some((context, seq))` for the first frame of an application
    /// message with sequence number `seq` on `context` (the frame the
    /// commit rule is about), `None` for control frames and later
    /// fragments.
    fn frame_written(&self, from: usize, to: usize, message: Option<(u32, u64)>);

    /// Rank `rank` finalized (what `vpml run`'s ranks tell the launcher):
    /// once every rank has, the simulator marks the job page finalized.
    fn finalized(&self, rank: usize);
}

/// Frames in flight from one rank to another, oldest first.
#[derive(Default)]
pub struct Pipe {
    frames: Mutex<VecDeque<(FrameHeader, Vec<u8>)>>,
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, VecDeque<(FrameHeader, Vec<u8>)>> {
        lock(&self.frames)
    }

    /// Frames waiting to be read.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No frame waits to be read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A restarted rank's request for a link, waiting in the peer's queue
/// (the simulated form of the TCP connection and hello line a restarted
/// process sends; see [`crate::recovery`]).
pub(crate) struct Hello {
    pub(crate) from: usize,
    pub(crate) incarnation: u32,
    /// Messages from the peer the restarted rank has.
    pub(crate) received: crate::lanes::LaneMap<u64>,
    /// Frames from the restarted rank to the peer.
    pub(crate) to_acceptor: Arc<Pipe>,
    /// Frames from the peer to the restarted rank.
    pub(crate) from_acceptor: Arc<Pipe>,
    /// The peer's answer.
    pub(crate) reply: Arc<Mutex<Option<Reply>>>,
}

/// The peer's answer to a [`Hello`].
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    /// Link up: the peer's incarnation, how many of the restarted
    /// rank's messages it has, and whether it is past any re-execution of
    /// its own ([`crate::engine`]'s `Linked::settled`).
    Accepted {
        incarnation: u32,
        received: crate::lanes::LaneMap<u64>,
        settled: bool,
    },
    /// Not a newer process of that rank.
    Refused(String),
}

struct NetInner {
    size: usize,
    /// Frames a pipe holds before a writer must wait (as a full ring).
    capacity: usize,
    pipes: Vec<Arc<Pipe>>,
    /// Each rank's queue of hellos from restarted peers.
    hellos: Vec<Mutex<VecDeque<Hello>>>,
}

/// The pipes between every ordered pair of ranks of a simulated job (a
/// cheap handle: clones share them).
#[derive(Clone)]
pub struct SimNet(Arc<NetInner>);

impl SimNet {
    /// Pipes for `size` ranks, each holding up to `capacity` frames.
    pub fn new(size: usize, capacity: usize) -> SimNet {
        SimNet(Arc::new(NetInner {
            size,
            capacity: capacity.max(1),
            pipes: (0..size * size).map(|_| Arc::default()).collect(),
            hellos: (0..size).map(|_| Mutex::default()).collect(),
        }))
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.0.size
    }

    /// The first pipe from `from` to `to` (links set up after a restart
    /// get pipes of their own).
    pub fn pipe(&self, from: usize, to: usize) -> &Arc<Pipe> {
        &self.0.pipes[from * self.0.size + to]
    }

    /// One end of the first link between `me` and `peer`.
    pub(crate) fn link(&self, me: usize, peer: usize, hooks: Rc<dyn SimHooks>) -> SimLink {
        self.link_over(
            me,
            peer,
            Arc::clone(self.pipe(me, peer)),
            Arc::clone(self.pipe(peer, me)),
            hooks,
        )
    }

    /// One end of a link between `me` and `peer` over the given pipes.
    pub(crate) fn link_over(
        &self,
        me: usize,
        peer: usize,
        out: Arc<Pipe>,
        inbound: Arc<Pipe>,
        hooks: Rc<dyn SimHooks>,
    ) -> SimLink {
        SimLink {
            me,
            peer,
            capacity: self.0.capacity,
            out,
            inbound,
            current: None,
            hooks,
        }
    }

    /// A restarted rank asks `to` for a link.
    pub(crate) fn post_hello(&self, to: usize, hello: Hello) {
        lock(&self.0.hellos[to]).push_back(hello);
    }

    /// The oldest hello waiting for `me`, if any.
    pub(crate) fn take_hello(&self, me: usize) -> Option<Hello> {
        lock(&self.0.hellos[me]).pop_front()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Rank threads unwind (a simulated crash) between whole operations on
    // these queues: what a poisoned lock guards is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One rank's end of a simulated link (see [`SimNet`]).
pub(crate) struct SimLink {
    me: usize,
    peer: usize,
    capacity: usize,
    out: Arc<Pipe>,
    inbound: Arc<Pipe>,
    /// The frame `peek` took off the pipe, until `consume`.
    current: Option<(FrameHeader, Vec<u8>)>,
    hooks: Rc<dyn SimHooks>,
}

impl SimLink {
    pub(crate) fn has_room(&self) -> bool {
        self.out.len() < self.capacity
    }

    pub(crate) fn try_write(&mut self, hdr: &FrameHeader, payload: &[u8]) -> bool {
        if !self.has_room() {
            return false;
        }
        let first_of_message = matches!(hdr.kind, kind::EAGER | kind::RTS)
            || (hdr.kind == kind::FRAG && hdr.flags & crate::shm::ring::flags::FIRST != 0);
        self.out.lock().push_back((*hdr, payload.to_vec()));
        self.hooks.frame_written(
            self.me,
            self.peer,
            first_of_message.then_some((hdr.context, hdr.seq)),
        );
        true
    }

    pub(crate) fn has_frame(&self) -> bool {
        self.current.is_some() || !self.inbound.is_empty()
    }

    pub(crate) fn peek(&mut self) -> Option<FrameHeader> {
        if self.current.is_none() {
            self.current = self.inbound.lock().pop_front();
        }
        self.current.as_ref().map(|(h, _)| *h)
    }

    pub(crate) fn payload(&self, len: usize) -> std::result::Result<&[u8], String> {
        match &self.current {
            Some((_, p)) if p.len() >= len => Ok(&p[..len]),
            Some((_, p)) => Err(format!(
                "simulated frame has {} payload bytes, {len} wanted",
                p.len()
            )),
            None => Err("no simulated frame".into()),
        }
    }

    pub(crate) fn consume(&mut self) {
        self.current = None;
    }
}

/// Join a simulated job as `rank` of `net`, with `protocol` wrapped around
/// the engine (`None`: no protocol). Called on the rank's own thread; the
/// returned world is used like the one [`crate::init`] returns.
///
/// With `page` (a job page the simulator made with
/// [`crate::recovery::JobPage::create`]), crashed ranks can be restarted:
/// the rank's incarnation comes from the page, and a restarted process
/// (incarnation above 0) links to the running ranks through `net` once
/// its protocol has restored its checkpoint. A non-zero `chaos` seeds the
/// choice of peers each progress pass skips (as `vpml run --chaos`), so
/// that the order in which messages from several senders are taken varies.
pub fn join(
    rank: usize,
    net: &SimNet,
    hooks: Rc<dyn SimHooks>,
    page: Option<BorrowedFd<'_>>,
    protocol: Option<Box<dyn Protocol>>,
    chaos: u64,
) -> Result<crate::World> {
    let page = match page {
        Some(fd) => Some(JobPage::map(fd.as_raw_fd(), net.size())?),
        None => None,
    };
    let mut engine = crate::engine::Engine::simulated(rank, net, hooks, page, chaos);
    if let Some(p) = protocol {
        engine.set_protocol(p)?;
    }
    Ok(crate::World::from_comm(Comm {
        engine: Rc::new(std::cell::RefCell::new(engine)),
        context: 0,
        group: None,
        inter: None,
        reserve: Some(crate::idup::Reserve::world()),
    }))
}
