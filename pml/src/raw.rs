//! Requests on memory the caller manages, for language bindings.
//!
//! [`Request<B>`](crate::Request) owns its buffer, which is what makes
//! nonblocking calls safe in Rust. A binding such as the MPI C library
//! already has MPI's rule instead — the program leaves the buffer alone
//! until the request completes — and keeps its own request table; these
//! calls give it the engine's request ids directly, without the owning
//! wrapper, so that a C `MPI_Isend` … `MPI_Waitall` costs no allocation
//! per request. They run the same engine calls as the safe API, so a
//! logging protocol sees exactly the same sends, receives and completion
//! calls.

use crate::comm::Comm;
use crate::error::Result;
use crate::matching::Source;
use crate::protocol::CompletionKind;
use crate::status::Status;

/// An operation in flight on memory the caller keeps valid until it
/// completes (a copyable id; completing it twice is an error, not
/// undefined behaviour).
pub type RawRequest = crate::engine::ReqId;

pub use crate::collective::Transfer;
pub use crate::engine::RecvNow;
pub use crate::engine::{OutsideSleep, Waker};

/// Private message spaces of a communicator, for bindings' own protocols:
/// they travel on its collective context under tags below zero, which no
/// collective uses, half the negative tags each. A program's tag (0 or
/// more) is taken modulo 2^30 there: two tags 2^30 apart share a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagSpace {
    /// MPI 4.0's partitioned communication: partitioned sends match
    /// partitioned receives only.
    Partitioned,
    /// Members of a group agreeing on a new communicator among themselves
    /// (`MPI_Comm_create_group`), apart from the communicator's other
    /// traffic.
    Group,
}

impl TagSpace {
    /// The tag a message of this space with the program's `tag` carries.
    pub fn tag(self, tag: i32) -> i32 {
        let t = tag & ((1 << 30) - 1);
        match self {
            TagSpace::Partitioned => -1 - t,
            TagSpace::Group => -(1 << 30) - 1 - t,
        }
    }
}

/// What one [`Comm::poll_raw`] saw.
#[derive(Debug, Clone, Copy)]
pub struct Polled {
    /// Something arrived or left (it may concern another thread).
    pub progressed: bool,
    /// The requests are done.
    pub done: bool,
}

impl Comm {
    /// Start sending `len` bytes at `ptr` to `dest` (synchronous mode when
    /// `sync`). A standard send written whole at once leaves nothing in the
    /// engine: its id `is_complete_send`,
    /// every completion call finds it done, and [`Comm::finish_raw`] has
    /// no status for it — make it with [`Status::of_send`].
    ///
    /// # Safety
    /// The bytes stay valid and unmodified until the request completes, or,
    /// once [`Comm::detach_raw`] let it go, until the engine has finished
    /// with it (the end of the job at the latest).
    #[inline(always)]
    pub unsafe fn isend_raw(
        &self,
        dest: usize,
        tag: i32,
        ptr: *const u8,
        len: usize,
        sync: bool,
    ) -> Result<RawRequest> {
        let dest = self.check_dest(dest, tag)?;
        // SAFETY: the caller's contract.
        unsafe {
            self.engine
                .borrow_mut()
                .start_send_lean(dest, tag, self.context, ptr, len, sync)
        }
    }

    /// Start receiving up to `len` bytes into `ptr`.
    ///
    /// # Safety
    /// The bytes stay valid, writable and unused by anyone else until the
    /// request completes (or, once detached, until the engine has finished
    /// with it).
    #[inline(always)]
    pub unsafe fn irecv_raw(
        &self,
        source: impl Into<Source>,
        tag: i32,
        ptr: *mut u8,
        len: usize,
    ) -> Result<RawRequest> {
        let spec = self.spec(source.into(), tag)?;
        // SAFETY: the caller's contract.
        unsafe { self.engine.borrow_mut().start_recv(spec, ptr, len) }
    }

    /// [`Comm::irecv_raw`], except that a small message already waiting
    /// in the source's shared-memory ring, while nothing else is going on
    /// (no protocol that hears receives, nothing unexpected), is copied
    /// into `ptr` at once — after the frames ahead of it that the oldest
    /// posted receives take were delivered to them, which may complete
    /// those. The request then leaves nothing in the engine
    /// (its id `is_complete_at_start`,
    /// every completion call finds it done, [`Comm::finish_raw`] has no
    /// status for it) and its status (ranks as this communicator numbers
    /// them) is returned with it.
    ///
    /// # Safety
    /// As [`Comm::irecv_raw`].
    #[inline]
    pub unsafe fn irecv_now_raw(
        &self,
        source: impl Into<Source>,
        tag: i32,
        ptr: *mut u8,
        len: usize,
    ) -> Result<(RawRequest, Option<Status>)> {
        let spec = self.spec(source.into(), tag)?;
        let mut eng = self.engine.borrow_mut();
        // SAFETY: the caller's contract (for both).
        unsafe {
            if let Some((id, st)) = eng.irecv_now(&spec, ptr, len)? {
                return Ok((id, Some(self.localize(st))));
            }
            Ok((eng.start_recv(spec, ptr, len)?, None))
        }
    }

    /// Look once for a small message for a blocking receive from `source`
    /// waiting in its shared-memory ring while nothing else is going on
    /// (as a blocking receive does before it posts: no protocol that hears
    /// receives, nothing posted or unexpected), and copy it into `ptr`:
    /// [`RecvNow::Took`] with its status (ranks as this communicator
    /// numbers them). [`RecvNow::Spun`]: nothing yet, look again or post;
    /// [`RecvNow::NotNow`]: post the receive. Nothing is consumed or taken
    /// unless the message is.
    ///
    /// # Safety
    /// `ptr..ptr+len` is valid for writes during the call.
    pub unsafe fn recv_now_raw(
        &self,
        source: impl Into<Source>,
        tag: i32,
        ptr: *mut u8,
        len: usize,
    ) -> Result<RecvNow> {
        let spec = self.spec(source.into(), tag)?;
        // SAFETY: the caller's contract.
        let r = unsafe {
            self.engine
                .borrow_mut()
                .recv_now_within(1, &spec, ptr, len)?
        };
        Ok(match r {
            RecvNow::Took(st) => RecvNow::Took(self.localize(st)),
            other => other,
        })
    }

    /// Start sending `len` bytes at `ptr` to `dest` in one of this
    /// communicator's private message spaces ([`TagSpace`]), which only
    /// [`Comm::irecv_private_raw`] of the same space matches.
    ///
    /// # Safety
    /// As [`Comm::isend_raw`].
    pub unsafe fn isend_private_raw(
        &self,
        space: TagSpace,
        dest: usize,
        tag: i32,
        ptr: *const u8,
        len: usize,
    ) -> Result<RawRequest> {
        let dest = self.check_dest(dest, tag)?;
        // SAFETY: the caller's contract.
        unsafe {
            self.engine.borrow_mut().start_send_lean(
                dest,
                space.tag(tag),
                self.collective_context(),
                ptr,
                len,
                false,
            )
        }
    }

    /// Start receiving up to `len` bytes into `ptr` from `source`'s
    /// [`Comm::isend_private_raw`] of `space` and `tag`.
    ///
    /// # Safety
    /// As [`Comm::irecv_raw`].
    pub unsafe fn irecv_private_raw(
        &self,
        space: TagSpace,
        source: usize,
        tag: i32,
        ptr: *mut u8,
        len: usize,
    ) -> Result<RawRequest> {
        let mut spec = self.spec(Source::Rank(source), tag)?;
        spec.tag = Some(space.tag(tag));
        spec.context = self.collective_context();
        // SAFETY: the caller's contract.
        unsafe { self.engine.borrow_mut().start_recv(spec, ptr, len) }
    }

    /// Start a send of `slen` bytes at `sptr` to `dest` and a receive of up
    /// to `rlen` bytes into `rptr` from `source` (`None`: either left
    /// out, as for `MPI_PROC_NULL`), as one request whose status is the
    /// receive's (MPI's `MPI_Isendrecv`).
    ///
    /// # Safety
    /// As [`Comm::isend_raw`] and [`Comm::irecv_raw`] for the two buffers.
    #[allow(clippy::too_many_arguments)] // sendrecv's own list
    pub unsafe fn isendrecv_raw(
        &self,
        dest: Option<usize>,
        send_tag: i32,
        sptr: *const u8,
        slen: usize,
        source: Option<Source>,
        recv_tag: i32,
        rptr: *mut u8,
        rlen: usize,
    ) -> Result<RawRequest> {
        let send_to = dest.map(|d| self.check_dest(d, send_tag)).transpose()?;
        let spec = source.map(|s| self.spec(s, recv_tag)).transpose()?;
        let mut eng = self.engine.borrow_mut();
        let mut parts: smallvec::SmallVec<[crate::engine::ReqId; 2]> = smallvec::SmallVec::new();
        let mut result_part = None;
        if let Some(spec) = spec {
            // SAFETY: the caller's contract.
            parts.push(unsafe { eng.start_recv(spec, rptr, rlen)? });
            result_part = Some(0);
        }
        if let Some(to) = send_to {
            // SAFETY: the caller's contract.
            let id = unsafe { eng.start_send_lean(to, send_tag, self.context, sptr, slen, false) };
            match id {
                Ok(id) => parts.push(id),
                Err(e) => {
                    // The receive must not outlive this call: withdrawn,
                    // or (already matched, writing the caller's memory)
                    // the engine stops.
                    if let Some(&r) = parts.first() {
                        if eng.withdraw(r) {
                            let _ = eng.take_status(r);
                        } else {
                            eng.fail(&e);
                        }
                    }
                    return Err(e);
                }
            }
        }
        eng.start_group(self.context, &parts, result_part)
    }

    /// Block until every request of `reqs` (`None`: inactive) completed;
    /// then take each status with [`Comm::finish_raw`].
    pub fn wait_all_raw(&self, reqs: &[Option<RawRequest>]) -> Result<()> {
        self.engine.borrow_mut().wait_all(reqs)
    }

    /// From now on, number this communicator's point-to-point calls among
    /// every call of the process (the process lane, see
    /// [`crate::protocol::CallId`]) rather than on their own: for traffic
    /// whose effects a re-execution must apply at the same point among
    /// all of the process's calls, such as one-sided requests applied to
    /// memory the program reads between its calls.
    pub fn use_process_lane(&self) {
        self.engine.borrow_mut().use_process_lane(self.context);
    }

    /// Start a request that completes when [`Comm::complete_external_raw`]
    /// is called on it (MPI's generalized requests); its status is empty.
    pub fn start_external_raw(&self) -> Result<RawRequest> {
        self.engine.borrow_mut().start_external()
    }

    /// Complete a request of [`Comm::start_external_raw`] (an error if it
    /// is not one, or already complete).
    pub fn complete_external_raw(&self, r: RawRequest) -> Result<()> {
        self.engine.borrow_mut().complete_external(r)
    }

    /// One pass of progress, then whether the requests of `reqs` (`None`:
    /// inactive) are all done (`all`) or any is: for a caller that waits
    /// outside vpml ([`Comm::outside_sleep_raw`]). No completion call is
    /// made (the protocol sees none): complete them afterwards with
    /// [`Comm::wait_all_raw`] or [`Comm::completion_raw`], which then do
    /// not block.
    pub fn poll_raw(&self, reqs: &[Option<RawRequest>], all: bool) -> Result<Polled> {
        let mut eng = self.engine.borrow_mut();
        let progressed = eng.progress()?;
        let mut each = reqs.iter().flatten().map(|&r| eng.is_done(r));
        let done = if all {
            each.all(|d| d)
        } else {
            each.any(|d| d)
        };
        Ok(Polled { progressed, done })
    }

    /// Is request `r` done as of the engine's last progress? (No progress
    /// is made: for a check at every wait's poll, where the wait's own
    /// poll lets messages in; see [`Comm::progresses_raw`].)
    pub fn is_done_raw(&self, r: RawRequest) -> bool {
        self.engine.borrow().is_done(r)
    }

    /// How many times the engine has progressed so far: a caller that
    /// checks requests with [`Comm::is_done_raw`] at points of its own
    /// sees from it whether anything let messages in since its last
    /// point, and polls itself if not.
    pub fn progresses_raw(&self) -> u64 {
        self.engine.borrow().progresses()
    }

    /// Should the binding complete request `r` with its next completion
    /// call? While this process re-executes, exactly when the log says
    /// that call completed `r` (`Some(true)`, and `Some(false)` otherwise,
    /// even if `r` is done — always `false` past the last logged event,
    /// while it re-makes sends its peers have: the logged execution would
    /// have logged such a completion before them); once it has caught up,
    /// whenever `r` is done (`None`: check with [`Comm::poll_raw`]). For requests a binding
    /// completes at points of its own choosing rather than the program's
    /// (the MPI C library's one-sided requests): the points where it did
    /// are logged as the calls' outcomes, and a re-execution finds them
    /// there.
    pub fn logged_next_completes_raw(&self, r: RawRequest) -> Option<bool> {
        self.engine.borrow().logged_next_completes(r)
    }

    /// How many empty polls a caller that waits outside vpml may spin
    /// through before it yields or sleeps: what the engine's own blocking
    /// waits do (many when the ranks of this host have a core each, a few
    /// when they share cores).
    pub fn spin_polls_raw(&self) -> u32 {
        self.engine.borrow().idle_spin()
    }

    /// Arm a sleep to take after letting the engine go (see
    /// [`OutsideSleep`]); `None` if something already
    /// arrived (poll again instead).
    pub fn outside_sleep_raw(&self) -> Option<OutsideSleep> {
        self.engine.borrow_mut().outside_sleep()
    }

    /// A waker for the outside sleepers of this process's engine.
    pub fn waker_raw(&self) -> Waker {
        self.engine.borrow().waker()
    }

    /// One completion call of `kind` over `reqs`: the indices of the
    /// requests it completes (see [`crate::wait_any`] and the others for
    /// what each kind completes); take their statuses with
    /// [`Comm::finish_raw`].
    pub fn completion_raw(
        &self,
        kind: CompletionKind,
        reqs: &[Option<RawRequest>],
    ) -> Result<Vec<usize>> {
        self.engine.borrow_mut().completion_call(kind, reqs)
    }

    /// The status of a completed request (ranks as this communicator
    /// numbers them), freeing it (an error for a send complete at start,
    /// see [`Comm::isend_raw`]).
    #[inline]
    pub fn finish_raw(&self, r: RawRequest) -> Result<Status> {
        let st = self.engine.borrow_mut().take_status(r)?;
        Ok(self.localize(st))
    }

    /// Try to cancel a receive that has not matched (see
    /// [`crate::Request::cancel`]).
    pub fn cancel_raw(&self, r: RawRequest) -> Result<bool> {
        self.engine.borrow_mut().cancel(r)
    }

    /// Let an active request finish in the background (`MPI_Request_free`):
    /// its id is gone, its memory must stay valid until the engine is done.
    pub fn detach_raw(&self, r: RawRequest) {
        if let Ok(mut e) = self.engine.try_borrow_mut() {
            e.detach(r, None);
        }
    }
}
