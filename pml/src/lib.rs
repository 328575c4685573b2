//! # vpml-pml — the point-to-point engine of vpml
//!
//! This crate is the "PML" layer of vpml: a complete MPI-style
//! point-to-point engine that knows nothing of fault tolerance. Layers, top
//! to bottom:
//!
//! * **API** — [`World`]/[`Comm`] (send family, receive family, probes,
//!   persistent requests), [`Request`], and the wait/test family in
//!   [`request`].
//! * **Engine** — one per process: the request table, MPI matching
//!   ([`matching`]: posted and unexpected queues, non-overtaking per
//!   channel), sequence numbers (1, 2, 3, … per ordered pair of ranks and
//!   communicator context, reported by [`Status::sequence`]), call ids
//!   per context ([`lanes`], [`protocol::CallId`]), and progress, which happens
//!   only inside API calls. An idle rank spins briefly, then sleeps on a
//!   doorbell, so a rank blocked in `recv` costs ~0 CPU.
//! * **Transport** — [`shm`]: per-pair single-producer/single-consumer
//!   rings in shared memory, eager for small messages and single-copy
//!   rendezvous for large ones; TCP between hosts (or everywhere with
//!   `--transport tcp`).
//! * **Hooks** — [`protocol`]: what a fault-tolerance protocol sees of every
//!   call, and what it may answer while a restarted (or replayed) rank
//!   re-executes. [`recovery`] holds the engine's side of restarts: the
//!   job page, the engine's checkpoint state, and the handshake of a
//!   restarted process's connections (after which the pair goes back onto
//!   shared memory if both are on one host). A rank replayed alone
//!   (`vpml replay`) reads every peer's recorded messages instead of a link.
//!
//! Processes are started by `vpml run`, which hands each one a [`JobConfig`]
//! ([`config`]) and serves the key/value exchange of [`bootstrap`]. A program started any other way is a one-rank job, which
//! is what the examples in this documentation are.
//!
//! ```
//! # use vpml_pml as vpml;
//! let world = vpml::init()?;
//! let (rank, size) = (world.rank(), world.size());
//! // Pass a token around the ring of ranks.
//! let next = (rank + 1) % size;
//! let prev = (rank + size - 1) % size;
//! let mut token = [0u64];
//! if rank == 0 {
//!     world.send(next, 0, &[42u64])?;
//!     world.recv(prev, 0, &mut token)?;
//! } else {
//!     world.recv(prev, 0, &mut token)?;
//!     world.send(next, 0, &token)?;
//! }
//! assert_eq!(token, [42]);
//! # Ok::<(), vpml_pml::Error>(())
//! ```

pub mod bootstrap;
pub mod buffer;
mod collective;
mod comm;
pub mod config;
mod engine;
pub mod error;
mod idup;
mod intercomm;
pub mod lanes;
mod log;
pub mod matching;
pub mod op;
pub mod protocol;
pub mod raw;
pub mod recovery;
pub mod request;
pub mod shm;
pub mod sim;
mod status;
mod tcp;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use buffer::{Buffer, Pod};
pub use collective::InterRoot;
pub use comm::{Comm, split_entry};
pub use config::JobConfig;
pub use engine::EngineStats;
pub use error::{Error, Result};
pub use matching::{ANY_SOURCE, ANY_TAG, Source};
pub use op::{Max, Min, Op, Prod, Sum};
pub use request::{
    Completed, Persistent, Request, RequestSlot, start_all, test, test_all, test_any, test_some,
    wait, wait_all, wait_any, wait_some,
};
pub use status::Status;

static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// The world communicator of a running job, returned by [`init`].
///
/// Dereferences to [`Comm`]. Dropping it (or calling [`World::finalize`])
/// completes outstanding sends and tells the launcher this rank ended
/// cleanly; a rank that exits without doing so is reported as failed.
pub struct World {
    comm: Comm,
    done: bool,
}

/// Start this process's part of the job: join the ranks started by
/// `vpml run`, or become a one-rank job when started on its own.
/// Call it once per process.
pub fn init() -> Result<World> {
    init_with(|_| Ok(None))
}

/// [`init`] with a fault-tolerance protocol: `make` gets this process's
/// [`JobConfig`] and returns the protocol to install, or `None` for none.
pub fn init_with(
    make: impl FnOnce(&JobConfig) -> Result<Option<Box<dyn protocol::Protocol>>>,
) -> Result<World> {
    if INITIALIZED.swap(true, Ordering::SeqCst) {
        return Err(Error::RequestState("vpml::init called twice"));
    }
    let cfg = JobConfig::get()?;
    if let Some(env) = &cfg.job {
        log::to_stderr(env.rank, env.incarnation);
    }
    let mut engine = match (&cfg.job, &cfg.replay) {
        (Some(env), Some(_)) => engine::Engine::replaying_alone(env.rank, env.size, &env.job_id),
        (Some(env), None) => engine::Engine::join(env, &cfg.engine)?,
        (None, _) => engine::Engine::singleton(),
    };
    if let Some(p) = make(cfg)? {
        engine.set_protocol(p)?;
    }
    Ok(World {
        comm: Comm {
            engine: Rc::new(RefCell::new(engine)),
            context: 0,
            group: None,
            inter: None,
            reserve: Some(idup::Reserve::world()),
        },
        done: false,
    })
}

impl World {
    /// A world around `comm` (the simulator's ranks join this way).
    pub(crate) fn from_comm(comm: Comm) -> World {
        World { comm, done: false }
    }

    /// Finish cleanly, reporting any error (dropping the world does the
    /// same but can only log errors).
    pub fn finalize(mut self) -> Result<()> {
        self.done = true;
        self.comm.engine.borrow_mut().finalize()
    }

    /// A handle to the world communicator that can be cloned and stored.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }
}

impl std::ops::Deref for World {
    type Target = Comm;
    fn deref(&self) -> &Comm {
        &self.comm
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if self.done || std::thread::panicking() {
            return;
        }
        let result = match self.comm.engine.try_borrow_mut() {
            Ok(mut e) => e.finalize().map_err(|err| (err, e.stopped_job())),
            Err(_) => return,
        };
        if let Err((e, false)) = result {
            eprintln!("vpml: finalize failed on rank {}: {e}", self.comm.rank());
        }
    }
}
