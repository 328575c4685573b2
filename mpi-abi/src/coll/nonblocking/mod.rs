//! Nonblocking collectives (`MPI_Ibarrier` … `MPI_Ialltoallw`, and
//! `MPI_Alltoallw`, which waits for its nonblocking twin), on vpml's
//! nonblocking collectives: each call lays the collective out as the
//! transfers this rank makes — every block straight between the two
//! ranks it moves between, all started at once — and a last step that
//! runs when the request completes (folding reductions in rank order,
//! unpacking non-contiguous datatypes). The request owns the memory the
//! transfers use until then. On an intercommunicator the transfers name
//! the remote group, and reductions fold its contributions.
//!
//! Direct transfers cost a message per pair of ranks where the blocking
//! collectives use trees; in exchange a collective needs nothing more
//! from this rank once started, so it completes while the rank waits for
//! anything, and a re-execution after a crash repeats it exactly.
//! `MPI_Comm_idup` duplicates at once, without communication, from
//! contexts its parent reserved (see `vpml::Comm::idup`), and returns a
//! completed request.
//!
//! The layouts are in `movement` (barrier, broadcast, gathers, scatters,
//! all-to-alls), `predefined` (their common case, blocks of predefined
//! datatypes in the program's buffers, without block lists) and
//! `reductions`; the MPI calls in `calls`.

pub(in crate::coll) mod calls;
mod movement;
mod predefined;
mod reductions;

pub(in crate::coll) use movement::*;
pub(in crate::coll) use predefined::*;
pub(in crate::coll) use reductions::*;

use std::ffi::{c_int, c_void};

use vpml::raw::Transfer;

use super::checked;
use crate::coll::Res;
use crate::consts::*;
use crate::state::{
    Active, AfterCollective, More, ReqEntry, STATE, error, put, request_handle, vpml_error,
};
use crate::types::{Message, info};

/// A nonblocking collective laid out: this rank's transfers, and its last
/// step, which owns whatever memory they use besides the caller's buffers
/// (`None`: nothing to do, every transfer in the caller's buffers — then
/// the request is as plain as a send's, and completes on the fast path).
pub(crate) struct Laid {
    pub(super) sends: Transfers,
    pub(super) recvs: Transfers,
    /// This rank's own block, copied once the transfers have started, so
    /// that a large copy overlaps with the peers reading their blocks.
    pub(super) own: Option<OwnCopy>,
    pub(super) after: Option<AfterCollective>,
}

/// `len` bytes from `from` to `to`: this rank's own block of a
/// collective (see [`Laid::own`]).
pub(super) struct OwnCopy {
    from: *const u8,
    to: *mut u8,
    len: usize,
}

impl OwnCopy {
    /// # Safety
    /// `from` and `to` hold `len` bytes each, do not overlap, and stay
    /// valid (and `to` untouched by the program) until the collective's
    /// request completes: both lie in the program's buffers, which MPI
    /// keeps so, or in memory the collective's last step owns.
    pub(super) unsafe fn new(from: *const u8, to: *mut u8, len: usize) -> OwnCopy {
        OwnCopy { from, to, len }
    }
}

/// A collective's transfers one way: on the stack for a few peers.
pub(super) type Transfers = smallvec::SmallVec<[Transfer; 4]>;

/// The ranks a collective exchanges with: on the stack for small jobs.
pub(super) type Ranks = smallvec::SmallVec<[usize; 8]>;

impl Laid {
    /// The same collective, whose request ends with `error` (if any): an
    /// error only this rank sees still starts its transfers, so that its
    /// peers' messages are not left for the next collective to match.
    fn ending_with(self, error: Option<(c_int, String)>) -> Laid {
        let Some(e) = error else {
            return self;
        };
        let after = self.after;
        Laid {
            after: Some(Box::new(move || {
                // (The memory `after` owns is released either way.)
                if let Some(after) = after {
                    let _ = after();
                }
                Err(e)
            })),
            ..self
        }
    }

    /// Nothing to do (a bystander of an intercommunicator's root group).
    fn nothing() -> Laid {
        Laid {
            sends: Transfers::new(),
            recvs: Transfers::new(),
            own: None,
            after: None,
        }
    }

    /// The same collective, whose last step then releases `held` (memory
    /// the transfers use).
    pub(super) fn holding(self, held: Option<AfterCollective>) -> Laid {
        let Some(held) = held else {
            return self;
        };
        let after = match self.after {
            None => held,
            Some(first) => Box::new(move || {
                let r = first();
                let _ = held();
                r
            }),
        };
        Laid {
            after: Some(after),
            ..self
        }
    }
}

/// The last step of a transfer into `m`: unpack it into the caller's
/// buffer (`None` when `m` is that buffer: nothing to do).
pub(super) fn finishing(m: Message) -> Option<AfterCollective> {
    match m {
        Message::Direct { .. } => None,
        staged => Some(Box::new(move || {
            staged.finish(None);
            Ok(())
        })),
    }
}

/// A transfer of `len` bytes at `ptr` to or from `peer`.
pub(super) fn transfer(peer: usize, ptr: *const u8, len: usize) -> Transfer {
    Transfer {
        peer,
        ptr: ptr as *mut u8,
        len,
    }
}

/// The last step of a transfer out of `m`: let its packed copy go (`None`
/// when `m` is the caller's buffer: nothing to keep).
pub(super) fn keeping(m: Message) -> Option<AfterCollective> {
    match m {
        Message::Direct { .. } => None,
        staged => Some(Box::new(move || {
            drop(staged);
            Ok(())
        })),
    }
}

/// Start `laid` on `c` and give the program its request.
pub(super) fn launch(
    func: &str,
    h: Comm,
    c: &crate::state::SharedComm,
    laid: Res<Laid>,
    req: *mut Request,
) -> c_int {
    let laid = match laid {
        Ok(l) => l,
        Err((code, why)) => return error(h, func, code, &why),
    };
    if req.is_null() {
        return error(h, func, MPI_ERR_REQUEST, "null request pointer");
    }
    match start_laid(c, laid, 0) {
        Ok((active, after)) => {
            let mut entry = match after {
                None => ReqEntry::new(h, Some(active)),
                after => ReqEntry::with(
                    h,
                    Some(active),
                    More {
                        after,
                        ..More::default()
                    },
                ),
            };
            entry.collective = true;
            let i = STATE.with(|s| s.borrow_mut().requests.insert(entry));
            // SAFETY: a request handle pointer (caller contract).
            unsafe { put(req, request_handle(i)) };
            MPI_SUCCESS
        }
        Err(e) => vpml_error(h, func, &e),
    }
}

/// Start the transfers of `laid` on `c`: the operation in flight and the
/// last step its request keeps.
pub(super) fn start_laid(
    c: &crate::state::SharedComm,
    laid: Laid,
    lane: u32,
) -> vpml::Result<(Active, Option<AfterCollective>)> {
    // SAFETY: every transfer is in the caller's buffers, which MPI's
    // contract keeps valid and untouched until the request completes, or
    // in memory `laid.after` owns, which the request keeps as long.
    let id = unsafe { c.start_collective_raw(&laid.sends, &laid.recvs, lane) }?;
    if let Some(own) = laid.own
        && own.len > 0
    {
        // SAFETY: `OwnCopy::new`'s contract.
        unsafe { std::ptr::copy_nonoverlapping(own.from, own.to, own.len) };
    }
    Ok((Active::new(id, c, 0, 0, 0), laid.after))
}

/// What this rank does in a rooted collective.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// The root: it exchanges with every other rank (every remote rank
    /// on an intercommunicator).
    Root,
    /// It exchanges with the root, this peer.
    Leaf(usize),
    /// A member of an intercommunicator's root group other than the root.
    Idle,
}

fn role(c: &vpml::Comm, root: c_int) -> Res<Role> {
    let bad = || (MPI_ERR_ROOT, format!("invalid root {root}"));
    if c.is_inter() {
        return match root {
            MPI_ROOT => Ok(Role::Root),
            MPI_PROC_NULL => Ok(Role::Idle),
            r => usize::try_from(r)
                .ok()
                .filter(|&r| r < c.remote_size())
                .map(Role::Leaf)
                .ok_or_else(bad),
        };
    }
    let r = usize::try_from(root)
        .ok()
        .filter(|&r| r < c.size())
        .ok_or_else(bad)?;
    Ok(if r == c.rank() {
        Role::Root
    } else {
        Role::Leaf(r)
    })
}

/// How many ranks the transfers may name, and this rank among them
/// (`None` on an intercommunicator, whose transfers name the remote group).
fn peers(c: &vpml::Comm) -> (usize, Option<usize>) {
    if c.is_inter() {
        (c.remote_size(), None)
    } else {
        (c.size(), Some(c.rank()))
    }
}

/// Every peer but this rank.
fn others(c: &vpml::Comm) -> impl Iterator<Item = usize> {
    let (n, me) = peers(c);
    (0..n).filter(move |&i| Some(i) != me)
}

fn intra_only(c: &vpml::Comm) -> Res {
    if c.is_inter() {
        return Err((MPI_ERR_COMM, "not defined on an intercommunicator".into()));
    }
    Ok(())
}

fn no_in_place_on_inter(c: &vpml::Comm, send: *const c_void) -> Res {
    super::no_in_place_on_inter(c, send)
}

/// What a collective sends from: the program's send buffer itself for a
/// contiguous datatype (MPI leaves it untouched until the request
/// completes), else a packed copy — or, where the collective writes its
/// result over the input (in place, or overlapping buffers), a copy of
/// the input. The request's last step keeps it until then.
pub(super) struct Outgoing {
    ptr: *const u8,
    len: usize,
    /// What the bytes belong to (held, never read: `ptr` points into it
    /// or into the program's buffer it describes).
    _holder: Holder,
}

/// The owner of an [`Outgoing`]'s bytes.
#[allow(dead_code)] // Held for ownership alone: the bytes are read through `ptr`.
enum Holder {
    /// The program's buffer, or its packed copy.
    Message(Message),
    /// Bytes of the library's own.
    Copy(Vec<u8>),
}

impl Outgoing {
    /// The bytes of `count` elements of `dt` at `buf`, to send.
    ///
    /// # Safety
    /// `buf` holds them, untouched until the request completes (the C
    /// caller's contract).
    pub(super) unsafe fn of(buf: *const c_void, count: c_int, dt: Datatype) -> Res<Outgoing> {
        // SAFETY: caller contract.
        let mut m = checked(unsafe { Message::new(buf, count, dt, true) })?;
        let (ptr, len) = m.target();
        Ok(Outgoing {
            ptr,
            len,
            _holder: Holder::Message(m),
        })
    }

    /// Bytes this value owns.
    pub(super) fn copy(bytes: Vec<u8>) -> Outgoing {
        Outgoing {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            _holder: Holder::Copy(bytes),
        }
    }

    pub(super) fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The last step that keeps these bytes until the transfers are done
    /// (`None` for the program's own buffer, which MPI keeps).
    pub(super) fn held(self) -> Option<AfterCollective> {
        if self.owns_nothing() {
            return None;
        }
        Some(Box::new(move || {
            drop(self);
            Ok(())
        }))
    }

    /// Nothing to keep: the bytes are the program's own buffer, or none.
    pub(super) fn owns_nothing(&self) -> bool {
        match &self._holder {
            Holder::Message(m) => matches!(m, Message::Direct { .. }),
            Holder::Copy(bytes) => bytes.is_empty(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the program's buffer (kept untouched until the request
        // completes, which outlives this value's use) or memory this value
        // holds; `len` bytes either way.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The packed bytes of `count` elements of `dt` at `buf`, owned.
///
/// # Safety
/// `buf` holds them (the C caller's contract).
pub(super) unsafe fn owned(buf: *const c_void, count: c_int, dt: Datatype) -> Res<Vec<u8>> {
    // SAFETY: caller contract.
    let mut m = checked(unsafe { Message::new(buf, count, dt, true) })?;
    Ok(m.read_only().to_vec())
}

/// Bytes per element of `dt`.
fn element_size(dt: Datatype) -> Res<usize> {
    info(dt)
        .map(|t| t.size)
        .ok_or_else(|| (MPI_ERR_TYPE, "invalid datatype".to_string()))
}

// ---------------------------------------------------------------- layouts

/// Start `laid` as `func`'s request, or (no `req`) start it and wait: the
/// blocking form.
pub(in crate::coll) fn launch_or_wait(
    func: &str,
    h: Comm,
    c: &crate::state::SharedComm,
    laid: Res<Laid>,
    req: Option<*mut Request>,
) -> c_int {
    match req {
        Some(req) => launch(func, h, c, laid, req),
        None => {
            let mut r = MPI_REQUEST_NULL;
            let code = launch(func, h, c, laid, &mut r);
            if code != MPI_SUCCESS {
                return code;
            }
            // SAFETY: a request this call made; null is MPI_STATUS_IGNORE.
            unsafe { crate::p2p::MPI_Wait(&mut r, std::ptr::null_mut()) }
        }
    }
}
