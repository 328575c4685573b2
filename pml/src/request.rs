//! Requests: nonblocking operations in flight, and the wait/test family.
//!
//! A [`Request<B>`] owns the buffer of the operation until it completes; the
//! completion ([`Completed<B>`]) hands it back with the [`Status`]. Arrays of
//! requests are `&mut [Option<Request<B>>]`, exactly like MPI's arrays of
//! request handles: a completed entry becomes `None` (`MPI_REQUEST_NULL`).
//! [`Persistent<B>`] requests keep their buffer and can be started again.
//!
//! Per-request failures such as truncation are reported in the completion's
//! [`Status::error`]; the functions themselves fail only when the engine
//! does (e.g. a corrupt channel).

use crate::buffer::Buffer;
use std::rc::Rc;

use crate::comm::{Comm, Group, Mode, Shared, localize};
use crate::engine::ReqId;
use crate::error::{Error, Result};
use crate::matching::RecvSpec;
use crate::protocol::CompletionKind;
use crate::status::Status;

/// A nonblocking send or receive in flight, owning its buffer.
///
/// Dropping an active request detaches it: the operation still completes
/// and the buffer is freed then (like `MPI_Request_free`).
#[must_use = "a request does nothing unless waited for or tested"]
pub struct Request<B: Buffer> {
    engine: Shared,
    group: Option<Rc<Group>>,
    id: ReqId,
    buf: Option<B>,
}

/// A finished nonblocking operation: the buffer back, and its status.
#[derive(Debug)]
pub struct Completed<B> {
    /// The buffer given to the operation (for a receive, filled).
    pub buf: B,
    /// Source, tag, length and error of the operation.
    pub status: Status,
}

impl<B: Buffer> Request<B> {
    pub(crate) fn new(engine: Shared, group: Option<Rc<Group>>, id: ReqId, buf: B) -> Self {
        Request {
            engine,
            group,
            id,
            buf: Some(buf),
        }
    }

    /// Block until the operation completes.
    pub fn wait(mut self) -> Result<Completed<B>> {
        self.engine.borrow_mut().wait(self.id)?;
        self.finish()
    }

    /// The call id that created this request, as logs and traces name it
    /// (`0:0` once the request is gone).
    pub fn call_id(&self) -> crate::protocol::CallId {
        self.engine.borrow().call_of(self.id).unwrap_or_default()
    }

    /// Try to cancel a receive that has not matched yet. Returns true if it
    /// was cancelled; its completion then has [`Status::is_cancelled`] set.
    /// Sends are never cancelled.
    pub fn cancel(&self) -> Result<bool> {
        self.engine.borrow_mut().cancel(self.id)
    }

    fn finish(&mut self) -> Result<Completed<B>> {
        let status = self.engine.borrow_mut().take_status(self.id)?;
        let status = localize(&self.group, status);
        let buf = self
            .buf
            .take()
            .ok_or(Error::RequestState("request already completed"))?;
        Ok(Completed { buf, status })
    }
}

impl<B: Buffer> Drop for Request<B> {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            let keep: Box<dyn std::any::Any> = Box::new(buf);
            if let Ok(mut eng) = self.engine.try_borrow_mut() {
                eng.detach(self.id, Some(keep));
            } else {
                // The engine is busy (only possible while unwinding from
                // inside it): never free memory it may still write to.
                std::mem::forget(keep);
            }
        }
    }
}

/// What a persistent request does each time it is started.
pub(crate) enum PersistentKind {
    Send { dest: usize, tag: i32, mode: Mode },
    Recv { spec: RecvSpec },
}

/// A persistent request (`send_init`, `ssend_init`, `recv_init`): started
/// with [`Persistent::start`] or [`start_all`], completed like any request,
/// then started again. The buffer is reachable between uses.
pub struct Persistent<B: Buffer> {
    comm: Comm,
    kind: PersistentKind,
    buf: Option<B>,
    active: Option<ReqId>,
}

impl<B: Buffer> Persistent<B> {
    pub(crate) fn new(comm: Comm, kind: PersistentKind, buf: B) -> Self {
        Persistent {
            comm,
            kind,
            buf: Some(buf),
            active: None,
        }
    }

    /// True while started and not yet completed.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// The buffer, unless the request is active.
    pub fn buffer(&self) -> Option<&B> {
        if self.active.is_some() {
            None
        } else {
            self.buf.as_ref()
        }
    }

    /// The buffer for writing (e.g. the next message), unless the request is active.
    pub fn buffer_mut(&mut self) -> Option<&mut B> {
        if self.active.is_some() {
            None
        } else {
            self.buf.as_mut()
        }
    }

    /// Give the buffer back, ending the persistent request.
    pub fn into_buffer(mut self) -> Result<B> {
        if self.active.is_some() {
            return Err(Error::RequestState("persistent request is active"));
        }
        self.buf
            .take()
            .ok_or(Error::RequestState("persistent request has no buffer"))
    }

    /// Start one use of the request.
    pub fn start(&mut self) -> Result<()> {
        if self.active.is_some() {
            return Err(Error::RequestState("persistent request is already active"));
        }
        let buf = self
            .buf
            .as_mut()
            .ok_or(Error::RequestState("persistent request has no buffer"))?;
        let mut eng = self.comm.engine.borrow_mut();
        let id = match &self.kind {
            PersistentKind::Send { dest, tag, mode } => {
                let bytes = buf.as_bytes();
                // SAFETY: the buffer is unreachable through the API while the
                // request is active, and detached into the engine on drop.
                unsafe {
                    eng.start_send(
                        *dest,
                        *tag,
                        self.comm.context,
                        bytes.as_ptr(),
                        bytes.len(),
                        *mode == Mode::Synchronous,
                    )?
                }
            }
            PersistentKind::Recv { spec } => {
                let bytes = buf.as_bytes_mut();
                // SAFETY: as above.
                unsafe { eng.start_recv(*spec, bytes.as_mut_ptr(), bytes.len())? }
            }
        };
        self.active = Some(id);
        Ok(())
    }

    /// Block until the current use completes; the request becomes inactive.
    pub fn wait(&mut self) -> Result<Status> {
        let id = self
            .active
            .ok_or(Error::RequestState("persistent request is not active"))?;
        self.comm.engine.borrow_mut().wait(id)?;
        self.finish()
    }

    /// Cancel the current use if it is a receive that has not matched.
    pub fn cancel(&self) -> Result<bool> {
        match self.active {
            Some(id) => self.comm.engine.borrow_mut().cancel(id),
            None => Ok(false),
        }
    }

    fn finish(&mut self) -> Result<Status> {
        let id = self
            .active
            .take()
            .ok_or(Error::RequestState("persistent request is not active"))?;
        let st = self.comm.engine.borrow_mut().take_status(id)?;
        Ok(localize(self.comm.peers(), st))
    }
}

impl<B: Buffer> Drop for Persistent<B> {
    fn drop(&mut self) {
        if let (Some(id), Some(buf)) = (self.active.take(), self.buf.take()) {
            let keep: Box<dyn std::any::Any> = Box::new(buf);
            if let Ok(mut eng) = self.comm.engine.try_borrow_mut() {
                eng.detach(id, Some(keep));
            } else {
                std::mem::forget(keep);
            }
        }
    }
}

/// Start every persistent request in `reqs`.
pub fn start_all<B: Buffer>(reqs: &mut [Persistent<B>]) -> Result<()> {
    reqs.iter_mut().try_for_each(Persistent::start)
}

mod sealed {
    pub trait Sealed {}
}

/// The engine and id of an active request (internal to the wait/test functions).
#[doc(hidden)]
pub struct PendingHandle {
    engine: Shared,
    id: ReqId,
}

/// Something the wait/test functions accept: `Option<Request<B>>` (completes
/// to [`Completed<B>`] and becomes `None`) or [`Persistent<B>`] (completes to
/// a [`Status`] and becomes inactive).
pub trait RequestSlot: sealed::Sealed {
    /// What completing the slot yields.
    type Output;
    #[doc(hidden)]
    fn pending(&self) -> Option<PendingHandle>;
    #[doc(hidden)]
    fn finish_slot(&mut self) -> Result<Self::Output>;
}

impl<B: Buffer> sealed::Sealed for Option<Request<B>> {}
impl<B: Buffer> RequestSlot for Option<Request<B>> {
    type Output = Completed<B>;
    fn pending(&self) -> Option<PendingHandle> {
        self.as_ref().map(|r| PendingHandle {
            engine: r.engine.clone(),
            id: r.id,
        })
    }
    fn finish_slot(&mut self) -> Result<Completed<B>> {
        match self.take() {
            Some(mut r) => r.finish(),
            None => Err(Error::RequestState("no request in this slot")),
        }
    }
}

impl<B: Buffer> sealed::Sealed for Persistent<B> {}
impl<B: Buffer> RequestSlot for Persistent<B> {
    type Output = Status;
    fn pending(&self) -> Option<PendingHandle> {
        self.active.map(|id| PendingHandle {
            engine: self.comm.engine.clone(),
            id,
        })
    }
    fn finish_slot(&mut self) -> Result<Status> {
        self.finish()
    }
}

fn engine_of<S: RequestSlot>(slots: &[S]) -> Option<Shared> {
    slots.iter().find_map(|s| s.pending().map(|h| h.engine))
}

fn ids<S: RequestSlot>(slots: &[S]) -> Vec<Option<ReqId>> {
    slots.iter().map(|s| s.pending().map(|h| h.id)).collect()
}

fn finish_indices<S: RequestSlot>(
    slots: &mut [S],
    idx: Vec<usize>,
) -> Result<Vec<(usize, S::Output)>> {
    idx.into_iter()
        .map(|i| Ok((i, slots[i].finish_slot()?)))
        .collect()
}

/// Complete one request. Returns `None` if the slot is inactive.
pub fn wait<S: RequestSlot>(slot: &mut S) -> Result<Option<S::Output>> {
    let Some(h) = slot.pending() else {
        return Ok(None);
    };
    h.engine.borrow_mut().wait(h.id)?;
    Ok(Some(slot.finish_slot()?))
}

/// Complete every active request; outputs of the active slots, in slot order.
pub fn wait_all<S: RequestSlot>(slots: &mut [S]) -> Result<Vec<S::Output>> {
    let Some(eng) = engine_of(slots) else {
        return Ok(Vec::new());
    };
    let ids = ids(slots);
    eng.borrow_mut().wait_all(&ids)?;
    let idx: Vec<usize> = (0..slots.len()).filter(|&i| ids[i].is_some()).collect();
    Ok(finish_indices(slots, idx)?
        .into_iter()
        .map(|(_, o)| o)
        .collect())
}

/// Complete one of the active requests (the lowest index among those done).
/// `None` if no slot is active.
pub fn wait_any<S: RequestSlot>(slots: &mut [S]) -> Result<Option<(usize, S::Output)>> {
    Ok(completion(slots, CompletionKind::WaitAny)?
        .into_iter()
        .next())
}

/// Complete at least one active request, and every other that is done.
/// Empty if no slot is active.
pub fn wait_some<S: RequestSlot>(slots: &mut [S]) -> Result<Vec<(usize, S::Output)>> {
    completion(slots, CompletionKind::WaitSome)
}

/// Progress once, then complete the request if it is done.
pub fn test<S: RequestSlot>(slot: &mut S) -> Result<Option<S::Output>> {
    Ok(
        completion(std::slice::from_mut(slot), CompletionKind::Test)?
            .into_iter()
            .next()
            .map(|(_, out)| out),
    )
}

/// Progress once; if every active request is done, complete them all.
pub fn test_all<S: RequestSlot>(slots: &mut [S]) -> Result<Option<Vec<S::Output>>> {
    if engine_of(slots).is_none() {
        return Ok(Some(Vec::new()));
    }
    let done = completion(slots, CompletionKind::TestAll)?;
    if done.is_empty() {
        return Ok(None);
    }
    Ok(Some(done.into_iter().map(|(_, o)| o).collect()))
}

/// Progress once; complete the lowest-index active request that is done.
pub fn test_any<S: RequestSlot>(slots: &mut [S]) -> Result<Option<(usize, S::Output)>> {
    Ok(completion(slots, CompletionKind::TestAny)?
        .into_iter()
        .next())
}

/// Progress once; complete every active request that is done.
pub fn test_some<S: RequestSlot>(slots: &mut [S]) -> Result<Vec<(usize, S::Output)>> {
    completion(slots, CompletionKind::TestSome)
}

/// One completion call: the engine decides which slots complete (see
/// `Engine::completion_call`), then their outputs are taken.
fn completion<S: RequestSlot>(
    slots: &mut [S],
    kind: CompletionKind,
) -> Result<Vec<(usize, S::Output)>> {
    let Some(eng) = engine_of(slots) else {
        return Ok(Vec::new());
    };
    let ids = ids(slots);
    let done = eng.borrow_mut().completion_call(kind, &ids)?;
    finish_indices(slots, done)
}
