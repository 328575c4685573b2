//! Partitioned communication (MPI 4.0): `MPI_Psend_init`,
//! `MPI_Precv_init`, `MPI_Pready`, `MPI_Pready_range`, `MPI_Pready_list`,
//! `MPI_Parrived`, started with `MPI_Start(all)` and completed by the
//! wait/test family.
//!
//! The whole buffer travels as one message, sent when `MPI_Pready` has
//! marked the last partition, in the communicator's space for partitioned
//! messages (`vpml::raw::TagSpace::Partitioned`: a partitioned send
//! matches partitioned receives only), under a tag that also says which
//! request of its channel (communicator, peer, tag) it is, so that the
//! k-th send made matches the peer's k-th receive, as MPI says.
//! The two sides may therefore cut the buffer into different numbers of
//! partitions, as MPI allows. `MPI_Parrived` reports a partition once the
//! whole message is in — what MPI permits, not the earliest it could.
//!
//! Replay: the message is sent at the call that marks the last partition,
//! a point the program's own order fixes; `MPI_Parrived` is a test of the
//! receive (its outcomes logged as any test's), and the receive it
//! completes keeps its status for the wait that follows.

use std::ffi::{c_int, c_void};

use vpml::protocol::CompletionKind;

use super::new_request;
use crate::consts::*;
use crate::state::{
    Active, Persistent, ReqEntry, STATE, comm, error, put, request_slot, vpml_error,
};
use crate::types::Message;

/// What a partitioned request sends or receives: its whole buffer.
#[derive(Clone)]
struct Whole {
    send: bool,
    buf: *const c_void,
    /// Elements (`partitions` × the count per partition).
    total: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    /// The tag its messages carry in the partitioned space: the program's
    /// (its low 20 bits) and which request of the channel this is, in the
    /// order they were made (its low 10 bits; see [`channel_index`]).
    wire: c_int,
    on: crate::state::SharedComm,
}

/// Requests made so far on each channel (communicator context, peer, tag,
/// direction): the k-th send of a channel matches the peer's k-th
/// receive, as MPI matches partitioned requests in the order they were
/// made.
type Channels = std::collections::BTreeMap<(u32, c_int, c_int, bool), u32>;
static MADE: std::sync::Mutex<Channels> = std::sync::Mutex::new(Channels::new());

/// Set once a partitioned request is made (see [`any_unready`]).
static EVER_MADE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Has any partitioned request been made? (Their per-channel counts are
/// in no checkpoint: see `VPMLX_Checkpoint`.)
pub(crate) fn any_made() -> bool {
    !MADE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .is_empty()
}

/// The index of the next request made on the channel of `on`, `peer`,
/// `tag` and direction `send`.
fn channel_index(on: &vpml::Comm, peer: c_int, tag: c_int, send: bool) -> u32 {
    let mut made = MADE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let n = made.entry((on.context_id(), peer, tag, send)).or_insert(0);
    let k = *n;
    *n = n.wrapping_add(1);
    k
}

/// A partitioned request's operation.
pub(crate) struct Partitioned {
    whole: Whole,
    partitions: usize,
    /// Send side: which partitions `MPI_Pready` marked since the last
    /// start (`None`: never started).
    marked: Option<Vec<bool>>,
    /// Started and not yet completed by a wait or test.
    started: bool,
}

impl Partitioned {
    /// A started send with partitions still to mark: waiting for it needs
    /// another thread's `MPI_Pready`.
    pub(crate) fn unready(&self) -> bool {
        self.started && self.whole.send && self.marked.as_ref().is_some_and(|m| m.contains(&false))
    }

    /// A wait or test completed the request: it is inactive until the
    /// next start.
    pub(crate) fn retire(&mut self) {
        self.started = false;
        self.marked = None;
    }

    /// Do `self` and `other` carry messages of the same channel (same
    /// communicator, direction, peer and tag)?
    fn same_channel(&self, other: &Partitioned) -> bool {
        let (a, b) = (&self.whole, &other.whole);
        a.send == b.send
            && a.peer == b.peer
            && a.wire == b.wire
            && a.on.context_id() == b.on.context_id()
    }

    /// The tag the program gave (statuses show it).
    pub(crate) fn tag(&self) -> c_int {
        self.whole.tag
    }

    /// The datatype: a private copy of a derived one, released with the
    /// request.
    pub(crate) fn datatype(&self) -> Datatype {
        self.whole.dt
    }
}

/// An error to raise once the state is free: (class, why).
type Failure = (c_int, String);

/// `f` on the entry of partitioned request `h` and its operation, with
/// the entry's communicator; `None` if `h` is not one.
fn with_partitioned<T>(h: Request, f: impl FnOnce(&mut ReqEntry) -> T) -> Option<(Comm, T)> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let e = request_slot(h).and_then(|i| s.requests.get_mut(i))?;
        matches!(e.persistent(), Some(Persistent::Partitioned(_))).then(|| (e.comm, f(e)))
    })
}

/// The partitioned operation inside `e` (which [`with_partitioned`]
/// checked holds one).
fn op_of(e: &mut ReqEntry) -> Option<&mut Partitioned> {
    match e.persistent_mut() {
        Some(Persistent::Partitioned(p)) => Some(p),
        _ => None,
    }
}

/// Is any of `hs` a started partitioned send whose partitions are not all
/// marked ready?
pub(super) fn any_unready(hs: &[Request]) -> bool {
    // Every wait and test asks: a program that never made a partitioned
    // request pays one load, not a look at each handle.
    if !EVER_MADE.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    STATE.with(|s| {
        let s = s.borrow();
        hs.iter().any(|&h| {
            request_slot(h)
                .and_then(|i| s.requests.get(i))
                .is_some_and(|e| {
                    !e.proc_null
                        && matches!(e.persistent(), Some(Persistent::Partitioned(p)) if p.unready())
                })
        })
    })
}

#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn init(
    func: &str,
    send: bool,
    buf: *const c_void,
    partitions: c_int,
    count: Count,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    h: Comm,
    req: *mut Request,
) -> c_int {
    let c = match comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let parts = match usize::try_from(partitions) {
        Ok(p) if p > 0 => p,
        _ => return error(h, func, MPI_ERR_ARG, &format!("{partitions} partitions")),
    };
    let total = Count::from(partitions)
        .checked_mul(count)
        .filter(|&n| n >= 0);
    let Some(total) = total.and_then(|n| c_int::try_from(n).ok()) else {
        let why = format!(
            "{partitions} partitions of {count} elements: fewer than none, or more than 2^31-1"
        );
        return error(h, func, MPI_ERR_COUNT, &why);
    };
    if let Err((code, why)) = crate::types::span(total, dt) {
        return error(h, func, code, why);
    }
    if peer == MPI_ANY_SOURCE || tag == MPI_ANY_TAG {
        return error(
            h,
            func,
            MPI_ERR_ARG,
            "partitioned communication takes no wildcards",
        );
    }
    if !(0..1 << 20).contains(&tag) {
        let why =
            format!("invalid tag {tag}: vpml's partitioned communication takes tags below 2^20");
        return error(h, func, MPI_ERR_TAG, &why);
    }
    let peers = if c.is_inter() {
        c.remote_size()
    } else {
        c.size()
    };
    if peer != MPI_PROC_NULL && usize::try_from(peer).map_or(true, |p| p >= peers) {
        return error(h, func, MPI_ERR_RANK, &format!("invalid rank {peer}"));
    }
    EVER_MADE.store(true, std::sync::atomic::Ordering::Relaxed);
    let k = channel_index(&c, peer, tag, send);
    let wire = (tag << 10) | (k & 0x3ff) as c_int;
    // A request 1024 before on its channel still allocated would share
    // the tag: refused (its messages could be taken for this one's).
    let shared = STATE.with(|s| {
        s.borrow().requests.iter().any(|(_, e)| {
            matches!(e.persistent(), Some(Persistent::Partitioned(p))
                if p.whole.wire == wire && p.whole.send == send && p.whole.peer == peer
                    && p.whole.on.context_id() == c.context_id())
        })
    });
    if shared {
        let why = "1024 partitioned requests of one channel (communicator, peer, tag, direction) are allocated: free one first";
        return error(h, func, MPI_ERR_REQUEST, why);
    }
    let whole = Whole {
        send,
        buf,
        total,
        dt: crate::types::private_copy(dt).unwrap_or(dt),
        peer,
        tag,
        wire,
        on: c,
    };
    let entry = ReqEntry::persistent_op(
        h,
        Persistent::Partitioned(Partitioned {
            whole,
            partitions: parts,
            marked: None,
            started: false,
        }),
    );
    // SAFETY: a handle pointer (caller contract).
    unsafe { put(req, new_request(entry)) };
    MPI_SUCCESS
}

/// Start the whole buffer's send or receive, and put it in `h`'s entry:
/// the engine's request and the packed copy a non-contiguous datatype
/// travels in.
fn start_whole(func: &str, comm: Comm, h: Request, w: &Whole) -> c_int {
    // SAFETY: the program's buffer holds `total` elements of `dt` and
    // stays valid while the request is active (MPI's contract).
    let mut msg = match unsafe { Message::new(w.buf, w.total, w.dt, w.send) } {
        Ok(m) => m,
        Err((code, why)) => return error(comm, func, code, why),
    };
    let (ptr, len) = msg.target();
    let peer = w.peer as usize;
    // SAFETY: as above; a staging buffer lives in the request's entry as
    // long as the operation.
    let started = unsafe {
        if w.send {
            w.on.isend_private_raw(vpml::raw::TagSpace::Partitioned, peer, w.wire, ptr, len)
        } else {
            w.on.irecv_private_raw(vpml::raw::TagSpace::Partitioned, peer, w.wire, ptr, len)
        }
    };
    let id = match started {
        Ok(id) => id,
        Err(e) => return vpml_error(comm, func, &e),
    };
    let staging = matches!(msg, Message::Staged(_)).then_some(msg);
    let active = Active::new(id, &w.on, w.peer, w.tag, len);
    with_partitioned(h, |e| {
        e.active = Some(active);
        e.more_mut().staging = staging;
    });
    MPI_SUCCESS
}

/// `MPI_Start` of partitioned request `h`, which the caller found
/// inactive: a send waits for its partitions, a receive is posted. `None`
/// if `h` is not a partitioned request.
pub(super) fn start(h: Request) -> Option<c_int> {
    // Two requests in flight whose messages would carry the same tag
    // (requests 1024 apart on one channel) could take each other's
    // messages: the second is refused.
    let busy = STATE.with(|s| {
        let s = s.borrow();
        let mine = match s.requests.get(request_slot(h)?)?.persistent() {
            Some(Persistent::Partitioned(p)) => p,
            _ => return None,
        };
        Some(
            mine.whole.peer != MPI_PROC_NULL
                && s.requests.iter().any(|(other, e)| {
                    other != h
                        && matches!(e.persistent(),
                            Some(Persistent::Partitioned(p)) if p.started && p.same_channel(mine))
                }),
        )
    })?;
    if busy {
        let why = "another partitioned request whose messages carry the same tag is in flight (1024 requests apart on one channel)";
        let comm = with_partitioned(h, |e| e.comm).map_or(MPI_COMM_WORLD, |(c, _)| c);
        return Some(error(comm, "MPI_Start", MPI_ERR_REQUEST, why));
    }
    let (comm, post) = with_partitioned(h, |e| {
        let proc_null = {
            let op = op_of(e)?;
            op.marked = op.whole.send.then(|| vec![false; op.partitions]);
            op.started = true;
            op.whole.peer == MPI_PROC_NULL
        };
        e.proc_null = proc_null;
        let op = op_of(e)?;
        (!op.whole.send && !proc_null).then(|| op.whole.clone())
    })?;
    Some(match post {
        Some(w) => start_whole("MPI_Start", comm, h, &w),
        None => MPI_SUCCESS,
    })
}

/// Mark partitions `which` of send request `h` ready; the last one sends
/// the buffer.
fn mark(func: &str, h: Request, which: impl Iterator<Item = c_int>) -> c_int {
    let marked = with_partitioned(h, |e| -> Result<Option<Whole>, Failure> {
        let proc_null = e.proc_null;
        let Some(op) = op_of(e) else {
            return Ok(None);
        };
        if !op.whole.send {
            return Err((
                MPI_ERR_REQUEST,
                "a partitioned receive has no partitions to mark".into(),
            ));
        }
        let partitions = op.partitions;
        let Some(marks) = op.marked.as_mut().filter(|m| m.contains(&false)) else {
            return Err((
                MPI_ERR_REQUEST,
                "the request is not started, or all its partitions are marked".into(),
            ));
        };
        // Every partition checked before any is marked: an error leaves
        // the request as it was.
        let mut picked = Vec::new();
        for p in which {
            match usize::try_from(p).ok().filter(|&i| i < partitions) {
                Some(i) if !marks[i] && !picked.contains(&i) => picked.push(i),
                Some(_) => {
                    return Err((
                        MPI_ERR_ARG,
                        format!("partition {p} is already marked ready"),
                    ));
                }
                None => return Err((MPI_ERR_ARG, format!("partition {p} of {partitions}"))),
            }
        }
        for i in picked {
            marks[i] = true;
        }
        let last = !marks.contains(&false);
        Ok((last && !proc_null).then(|| op.whole.clone()))
    });
    match marked {
        None => error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_REQUEST,
            "not a partitioned request",
        ),
        Some((comm, Err((code, why)))) => error(comm, func, code, &why),
        Some((comm, Ok(Some(w)))) => start_whole(func, comm, h, &w),
        Some((_, Ok(None))) => MPI_SUCCESS,
    }
}

/// `MPI_Parrived`: has partition `partition` of receive `h` arrived? A
/// test of the whole receive; once it completed, its status waits in the
/// entry for the wait that completes the request.
fn arrived(h: Request, partition: c_int) -> Result<bool, c_int> {
    let func = "MPI_Parrived";
    crate::rma::progress();
    let looked = with_partitioned(h, |e| -> Result<_, Failure> {
        let id = e.active.as_ref().map(Active::id);
        let Some(op) = op_of(e) else {
            return Ok(None);
        };
        if op.whole.send {
            return Err((
                MPI_ERR_REQUEST,
                "a partitioned send has no partitions to arrive".into(),
            ));
        }
        if usize::try_from(partition).map_or(true, |p| p >= op.partitions) {
            return Err((
                MPI_ERR_ARG,
                format!("partition {partition} of {}", op.partitions),
            ));
        }
        Ok(id.map(|id| (id, op.whole.on.clone())))
    });
    let (comm, active) = match looked {
        None => {
            return Err(error(
                MPI_COMM_WORLD,
                func,
                MPI_ERR_REQUEST,
                "not a partitioned request",
            ));
        }
        Some((comm, Err((code, why)))) => return Err(error(comm, func, code, &why)),
        Some((comm, Ok(active))) => (comm, active),
    };
    // Not active: complete (its status kept for the wait), on
    // MPI_PROC_NULL, or not started (erroneous; it has arrived as much as
    // it ever will).
    let Some((id, on)) = active else {
        return Ok(true);
    };
    let done = on
        .completion_raw(CompletionKind::Test, &[Some(id)])
        .map_err(|e| vpml_error(comm, func, &e))?;
    if done.is_empty() {
        return Ok(false);
    }
    let kept = with_partitioned(h, |e| {
        let tag = op_of(e).map_or(0, |op| op.whole.tag);
        let a = e.active.take()?;
        let st = a.finish();
        if let (Some(m), Ok(st)) = (e.staging(), &st) {
            m.finish(Some(st.len()));
        }
        drop(e.take_staging());
        Some(st.map(|st| {
            e.proc_null = true;
            e.more_mut().ready = Some((st.source(), tag, st.len()));
            st.into_result().err()
        }))
    });
    // An error of the receive (a truncation) is raised here, where the
    // program learns it arrived.
    match kept {
        Some((_, Some(Err(e) | Ok(Some(e))))) => Err(vpml_error(comm, func, &e)),
        _ => Ok(true),
    }
}

export! {
    fn MPI_Psend_init / PMPI_Psend_init(buf: *const c_void, partitions: c_int, count: Count, dt: Datatype, dest: c_int, tag: c_int, h: Comm, _info: Info, req: *mut Request) -> c_int {
        init("MPI_Psend_init", true, buf, partitions, count, dt, dest, tag, h, req)
    }

    fn MPI_Precv_init / PMPI_Precv_init(buf: *mut c_void, partitions: c_int, count: Count, dt: Datatype, source: c_int, tag: c_int, h: Comm, _info: Info, req: *mut Request) -> c_int {
        init("MPI_Precv_init", false, buf, partitions, count, dt, source, tag, h, req)
    }

    fn MPI_Pready / PMPI_Pready(partition: c_int, req: Request) -> c_int {
        mark("MPI_Pready", req, std::iter::once(partition))
    }

    fn MPI_Pready_range / PMPI_Pready_range(low: c_int, high: c_int, req: Request) -> c_int {
        if low > high {
            return error(MPI_COMM_WORLD, "MPI_Pready_range", MPI_ERR_ARG, &format!("range {low}..={high} is empty"));
        }
        mark("MPI_Pready_range", req, low..=high)
    }

    fn MPI_Pready_list / PMPI_Pready_list(length: c_int, list: *const c_int, req: Request) -> c_int {
        let func = "MPI_Pready_list";
        let n = usize::try_from(length).unwrap_or(0);
        if n > 0 && list.is_null() {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null partition list");
        }
        // SAFETY: `list` holds `length` ints (caller contract).
        let parts = if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(list, n) } };
        mark(func, req, parts.iter().copied())
    }

    fn MPI_Parrived / PMPI_Parrived(req: Request, partition: c_int, flag: *mut c_int) -> c_int {
        match arrived(req, partition) {
            Ok(arrived) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(flag, c_int::from(arrived)) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }
}
