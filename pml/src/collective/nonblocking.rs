//! Nonblocking collectives, for language bindings (the MPI C library's
//! `MPI_Ibarrier` … `MPI_Ialltoallw`). A binding lays a collective out as
//! the transfers each rank makes — every one from or to a named rank —
//! and starts them all at once; one request completes when all have, and
//! what remains (folding received contributions in rank order,
//! unpacking) is the binding's, after it took the request's status.
//!
//! Starting everything at once means a collective needs no further step
//! from this rank once started, so it completes while the rank waits for
//! anything at all, and no schedule has to be advanced at points that
//! differ from one execution to the next: under message logging every
//! receive names its source, the request is one call whose completion is
//! logged like any other, and a re-execution sends the same messages in
//! the same order. Transfers use the communicator's collective context
//! with a tag of their own, so they never match a blocking collective's;
//! two nonblocking collectives in flight between the same pair of ranks
//! are told apart by order, as MPI has every member start its collectives
//! in the same order. A binding whose collectives may start in different
//! orders at different ranks (MPI's persistent collectives, matched by
//! the order they were made in) gives each a lane of its own: a tag of
//! its own.

use super::tag;
use crate::comm::Comm;
use crate::engine::ReqId;
use crate::error::{Error, Result};
use crate::matching::RecvSpec;

/// Lanes (tags from [`tag::NONBLOCKING`] on) a communicator's
/// collectives use; a lane's number wraps past them.
const LANES: u32 = 1 << 30;

/// One transfer of a nonblocking collective: `len` bytes at `ptr`, to or
/// from rank `peer` (of the remote group on an intercommunicator).
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// The rank sent to or received from.
    pub peer: usize,
    /// The bytes sent, or where received bytes go.
    pub ptr: *mut u8,
    /// How many bytes: a receive expects exactly this many.
    pub len: usize,
}

impl Comm {
    /// Start a nonblocking collective made of `sends` and `recvs` on
    /// `lane` (0 for collectives started in the same order everywhere;
    /// see the module documentation); the request completes when every
    /// transfer has. A receive that gets more or fewer bytes than it
    /// expects makes the request's status an error.
    ///
    /// # Safety
    /// Every transfer's bytes stay valid (and a receive's otherwise
    /// untouched) until the request completes.
    pub unsafe fn start_collective_raw(
        &self,
        sends: &[Transfer],
        recvs: &[Transfer],
        lane: u32,
    ) -> Result<ReqId> {
        let tag = tag::NONBLOCKING + (lane % LANES) as i32;
        // SAFETY: the caller's contract.
        unsafe { self.start_transfers(sends, recvs, tag) }
    }

    /// Start round `k` (1, 2, 4, … below the size) of [`Comm::barrier`]'s
    /// dissemination — the same messages, so it meets members that run
    /// the blocking barrier — as one request, for a binding that waits
    /// outside vpml to keep serving other work meanwhile (the MPI C
    /// library's one-sided operations). Round `k` may start once round
    /// `k / 2` completed.
    pub fn start_barrier_round_raw(&self, k: usize) -> Result<ReqId> {
        let (r, n) = (self.rank(), self.size());
        if self.is_inter() || k == 0 || k >= n {
            return Err(Error::Collective(format!(
                "no barrier round {k} on this communicator"
            )));
        }
        let none = std::ptr::NonNull::<u8>::dangling().as_ptr();
        let send = Transfer {
            peer: (r + k) % n,
            ptr: none,
            len: 0,
        };
        let recv = Transfer {
            peer: (r + n - k) % n,
            ptr: none,
            len: 0,
        };
        // SAFETY: no bytes are read or written.
        unsafe { self.start_transfers(&[send], &[recv], tag::BARRIER) }
    }

    /// Start `sends` and `recvs` with `tag` on the collective context, as
    /// one request.
    ///
    /// # Safety
    /// As [`Comm::start_collective_raw`].
    unsafe fn start_transfers(
        &self,
        sends: &[Transfer],
        recvs: &[Transfer],
        tag: i32,
    ) -> Result<ReqId> {
        let n = self.peer_count();
        if let Some(t) = sends.iter().chain(recvs).find(|t| t.peer >= n) {
            return Err(Error::InvalidRank {
                rank: i64::try_from(t.peer).unwrap_or(-1),
                size: n,
            });
        }
        let context = self.collective_context();
        let mut eng = self.engine.borrow_mut();
        let mut parts: smallvec::SmallVec<[ReqId; 8]> = smallvec::SmallVec::new();
        let mut started = || -> Result<()> {
            for t in recvs {
                let spec = RecvSpec {
                    source: Some(self.peer_world_rank(t.peer)),
                    tag: Some(tag),
                    context,
                };
                // SAFETY: the caller's contract.
                parts.push(unsafe { eng.start_recv(spec, t.ptr, t.len)? });
            }
            for t in sends {
                let to = self.peer_world_rank(t.peer);
                // SAFETY: the caller's contract.
                let id = unsafe { eng.start_send_lean(to, tag, context, t.ptr, t.len, false)? };
                parts.push(id);
            }
            Ok(())
        };
        if let Err(e) = started() {
            // Nothing may keep pointing at the caller's memory: receives
            // are withdrawn; a send that started and has not finished
            // cannot be, so the engine stops (it reads memory the caller
            // gets back with this error).
            let mut stuck = false;
            for id in parts {
                if eng.withdraw(id) {
                    let _ = eng.take_status(id);
                } else {
                    stuck |= !eng.is_done(id);
                    eng.detach(id, None);
                }
            }
            if stuck {
                eng.fail(&e);
            }
            return Err(e);
        }
        eng.start_group(context, &parts, None)
    }
}
