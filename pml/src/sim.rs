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

use crate::comm::Comm;
use crate::error::Result;
use crate::protocol::Protocol;
use crate::shm::ring::{FrameHeader, kind};

/// What a simulated rank's engine asks of the simulator.
pub trait SimHooks {
    /// The engine has nothing to do until a peer acts: let another rank
    /// (or the simulated loggers) run. Returns when this rank is scheduled
    /// again.
    fn idle(&self);

    /// A frame left rank `from` for rank `to`. `message` is `Some(seq)`
    /// for the first frame of an application message with channel
    /// sequence number `seq` (the frame the commit rule is about), `None`
    /// for control frames and later fragments.
    fn frame_written(&self, from: usize, to: usize, message: Option<u64>);
}

/// Frames in flight from one rank to another, oldest first.
#[derive(Default)]
pub struct Pipe {
    frames: Mutex<VecDeque<(FrameHeader, Vec<u8>)>>,
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, VecDeque<(FrameHeader, Vec<u8>)>> {
        // A rank thread that panicked while holding the lock leaves whole
        // frames behind (push and pop are single calls): keep going.
        self.frames.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Frames waiting to be read.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No frame waits to be read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop every frame in flight (the process at either end died).
    pub fn clear(&self) {
        self.lock().clear();
    }
}

/// The pipes between every ordered pair of ranks of a simulated job.
pub struct SimNet {
    size: usize,
    /// Frames a pipe holds before a writer must wait (as a full ring).
    capacity: usize,
    pipes: Vec<Arc<Pipe>>,
}

impl SimNet {
    /// Pipes for `size` ranks, each holding up to `capacity` frames.
    pub fn new(size: usize, capacity: usize) -> SimNet {
        SimNet {
            size,
            capacity: capacity.max(1),
            pipes: (0..size * size).map(|_| Arc::default()).collect(),
        }
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The pipe from `from` to `to`.
    pub fn pipe(&self, from: usize, to: usize) -> &Arc<Pipe> {
        &self.pipes[from * self.size + to]
    }

    /// Any frame in flight anywhere?
    pub fn in_flight(&self) -> usize {
        self.pipes.iter().map(|p| p.len()).sum()
    }

    /// One end of the link between `me` and `peer`.
    pub(crate) fn link(&self, me: usize, peer: usize, hooks: Rc<dyn SimHooks>) -> SimLink {
        SimLink {
            me,
            peer,
            capacity: self.capacity,
            out: Arc::clone(self.pipe(me, peer)),
            inbound: Arc::clone(self.pipe(peer, me)),
            current: None,
            hooks,
        }
    }
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
        self.hooks
            .frame_written(self.me, self.peer, first_of_message.then_some(hdr.seq));
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

    pub(crate) fn idle(&self) {
        self.hooks.idle();
    }
}

/// Join a simulated job as `rank` of `net`, with `protocol` wrapped around
/// the engine (`None`: no protocol). Called on the rank's own thread; the
/// returned world is used like the one [`crate::init`] returns.
pub fn join(
    rank: usize,
    net: &SimNet,
    hooks: Rc<dyn SimHooks>,
    protocol: Option<Box<dyn Protocol>>,
) -> Result<crate::World> {
    let mut engine = crate::engine::Engine::simulated(rank, net, hooks);
    if let Some(p) = protocol {
        engine.set_protocol(p)?;
    }
    Ok(crate::World::from_comm(Comm {
        engine: Rc::new(std::cell::RefCell::new(engine)),
        context: 0,
        group: None,
    }))
}
