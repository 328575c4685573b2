//! MPI 4.0's large-count calls (`MPI_Send_c`, `MPI_Bcast_c`,
//! `MPI_Type_contiguous_c` …): the same calls with `MPI_Count` counts and
//! `MPI_Aint` displacements.
//!
//! Each runs its int twin (through its `PMPI_` name). A count that fits
//! an int passes as it is. A larger count of a contiguous datatype becomes
//! one element of a temporary contiguous type that many elements long (as
//! BigMPI does), so messages, collectives and one-sided operations of
//! more than 2^31-1 elements work; the temporary type keeps the element
//! type, so reductions still combine element by element. A larger count
//! of a non-contiguous datatype, and an array of counts or displacements
//! (the v and w collectives) with an entry past an int, fail with
//! `MPI_ERR_COUNT` naming the `_c` call. Errors the twin raises name the
//! twin (`MPI_Send` for `MPI_Send_c`).
//!
//! Datatype constructors (`types`) build from the counts themselves, so
//! one block may hold more than 2^31-1 elements; sizes and extents come
//! back whole.

mod coll;
mod coll_nonblocking;
mod coll_persistent;
mod other;
mod p2p;
mod rma;
mod types;

use std::ffi::c_int;

use crate::consts::*;
use crate::state::{Bound, DerivedType, STATE, error};

/// A (count, datatype) pair of a large-count call, as its int twin takes
/// it; a temporary type is freed when this is dropped (after the call:
/// every operation that outlives it keeps what it needs of the type).
pub(crate) struct Narrowed {
    pub count: c_int,
    pub dt: Datatype,
    temp: Option<Datatype>,
}

impl Drop for Narrowed {
    fn drop(&mut self) {
        if let Some(t) = self.temp {
            STATE.with(|s| crate::recipes::unref(&mut s.borrow_mut(), t));
        }
    }
}

/// `count` elements of `dt` as an int count and a datatype (see the
/// module). A negative count passes as -1, for the twin to refuse.
pub(crate) fn narrow(func: &str, count: Count, dt: Datatype) -> Result<Narrowed, c_int> {
    let plain = |count| Narrowed {
        count,
        dt,
        temp: None,
    };
    if let Ok(c) = c_int::try_from(count) {
        return Ok(plain(c));
    }
    let Ok(n) = usize::try_from(count) else {
        return Ok(plain(-1));
    };
    let (Some(t), Some(ti)) = (crate::types::layout(dt), crate::types::info(dt)) else {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_TYPE,
            "invalid datatype",
        ));
    };
    if !ti.contiguous {
        let why = format!(
            "{count} elements of a non-contiguous datatype: counts past 2^31-1 need a contiguous one"
        );
        return Err(error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, &why));
    }
    let bytes = ti
        .size
        .checked_mul(n)
        .filter(|&b| isize::try_from(b).is_ok())
        .ok_or_else(|| {
            error(
                MPI_COMM_WORLD,
                func,
                MPI_ERR_COUNT,
                &format!("{count} elements: too many bytes"),
            )
        })?;
    let whole = DerivedType {
        blocks: vec![(0, bytes)],
        lb: 0,
        extent: bytes as isize,
        base: ti.base,
        per: ti.per.saturating_mul(n),
        align: t.align,
        bounds: (Bound::Data, Bound::Data),
    };
    let mut h = MPI_DATATYPE_NULL;
    let rc = crate::env::make_type(func, &mut h, || Ok(whole));
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    Ok(Narrowed {
        count: 1,
        dt: h,
        temp: Some(h),
    })
}

/// `count` elements of `dt` to send from `buf`: nothing to narrow when
/// `buf` is `MPI_IN_PLACE` (MPI ignores the count and type then).
pub(crate) fn narrow_send(
    func: &str,
    buf: *const std::ffi::c_void,
    count: Count,
    dt: Datatype,
) -> Result<Narrowed, c_int> {
    if in_place(buf) {
        return Ok(Narrowed {
            count: 0,
            dt,
            temp: None,
        });
    }
    narrow(func, count, dt)
}

/// [`narrow`] for a reduction with `op`: a user operation's function is
/// shown the count and datatype the program gave, so its counts cannot
/// be narrowed (`MPI_ERR_COUNT`).
pub(crate) fn narrow_for_op(
    func: &str,
    count: Count,
    dt: Datatype,
    op: Op,
) -> Result<Narrowed, c_int> {
    let n = narrow(func, count, dt)?;
    if n.temp.is_some() && crate::state::slot_of(op, USER_OP_KIND).is_some() {
        let why = format!("{count} elements: a user operation takes at most 2^31-1 here");
        return Err(error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, &why));
    }
    Ok(n)
}

/// An array of counts or displacements as ints (a null or empty one is
/// null).
pub(crate) struct Ints(Option<Vec<c_int>>);

impl Ints {
    /// The array to hand the int twin.
    pub(crate) fn ptr(&self) -> *const c_int {
        self.0.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
    }
}

/// The `n` entries of `p` as ints, or `MPI_ERR_COUNT` naming `func` if
/// one does not fit.
///
/// # Safety
/// `p` is null or holds `n` entries.
pub(crate) unsafe fn ints_of<T>(func: &str, p: *const T, n: usize) -> Result<Ints, c_int>
where
    T: Copy + TryInto<c_int> + std::fmt::Display,
{
    if p.is_null() || n == 0 {
        return Ok(Ints(None));
    }
    // SAFETY: caller contract.
    let all = unsafe { std::slice::from_raw_parts(p, n) };
    all.iter()
        .map(|&v| {
            v.try_into().map_err(|_| {
                let why = format!(
                    "{v} in an array of counts or displacements: vpml takes them up to 2^31-1 there"
                );
                error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, &why)
            })
        })
        .collect::<Result<Vec<c_int>, c_int>>()
        .map(|v| Ints(Some(v)))
}

/// How many entries a v or w collective's arrays hold on `h`: its size,
/// or its remote group's on an intercommunicator.
pub(crate) fn group_len(func: &str, h: Comm) -> Result<usize, c_int> {
    let c = crate::state::comm(func, h)?;
    Ok(if c.is_inter() {
        c.remote_size()
    } else {
        c.size()
    })
}

/// How many entries `MPI_Reduce_scatter`'s counts hold on `h`: its
/// (local) size, on an intercommunicator too.
pub(crate) fn local_len(func: &str, h: Comm) -> Result<usize, c_int> {
    Ok(crate::state::comm(func, h)?.size())
}

/// Are a rooted v collective's root-only arrays significant here (this
/// rank is the root; on an intercommunicator, `root` is `MPI_ROOT`)? Only
/// then are they read.
pub(crate) fn at_root(func: &str, h: Comm, root: c_int) -> Result<bool, c_int> {
    let c = crate::state::comm(func, h)?;
    Ok(if c.is_inter() {
        root == MPI_ROOT
    } else {
        usize::try_from(root) == Ok(c.rank())
    })
}

/// Keep `arrays` (the int copies of a persistent collective's counts,
/// which its layout reads at each start) with the request `*req` the
/// int twin made.
///
/// # Safety
/// `req` is null or a request handle pointer.
pub(crate) unsafe fn keep_with(req: *const Request, arrays: Vec<Ints>) {
    // SAFETY: caller contract.
    let Some(&h) = (unsafe { req.as_ref() }) else {
        return;
    };
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let e = crate::state::request_slot(h).and_then(|i| s.requests.get_mut(i));
        if let Some(crate::state::Persistent::Collective(pc)) = e.and_then(|e| e.persistent_mut()) {
            pc.keep.extend(arrays.into_iter().filter_map(|a| a.0));
        }
    });
}

/// How many sources and destinations `h`'s topology gives this rank (the
/// lengths of a neighbourhood collective's receive and send arrays).
pub(crate) fn neighbor_lens(func: &str, h: Comm) -> Result<(usize, usize), c_int> {
    let c = crate::state::comm(func, h)?;
    let nb =
        crate::topo::neighbors(h, c.rank()).map_err(|(code, why)| error(h, func, code, &why))?;
    Ok((nb.sources.len(), nb.destinations.len()))
}
