//! Virtual topologies: Cartesian grids (`MPI_Cart_*`, `MPI_Dims_create`),
//! graphs (`MPI_Graph_*`), distributed graphs (`MPI_Dist_graph_*`) and
//! `MPI_Topo_test`.
//!
//! A topology is information attached to a communicator: the ranks keep
//! their order (`reorder` is accepted and ignored, as MPI allows), so a
//! topology communicator is a split or a duplicate of the old one with
//! the description kept beside it. `MPI_Comm_dup` keeps it.

use std::ffi::c_int;

use crate::comm::register_with;
use crate::consts::*;
use crate::state::SharedComm;
use crate::state::{STATE, c_array, comm, comm_slot, error, intra_comm, put, vpml_error};

/// A communicator's virtual topology.
#[derive(Clone, Debug)]
pub(crate) enum Topology {
    /// A grid of `dims` (row-major ranks), periodic where `periods` says.
    Cart {
        dims: Vec<c_int>,
        periods: Vec<bool>,
    },
    /// A graph in MPI's `index`/`edges` form.
    Graph {
        index: Vec<c_int>,
        edges: Vec<c_int>,
    },
    /// This process's edges of a distributed graph.
    DistGraph {
        sources: Vec<c_int>,
        source_weights: Vec<c_int>,
        destinations: Vec<c_int>,
        dest_weights: Vec<c_int>,
        weighted: bool,
    },
}

/// `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY`: MPICH's header declares them as
/// `int * const` data symbols, compared by address.
#[repr(transparent)]
pub struct WeightsSentinel(*const c_int);

// SAFETY: the pointer is never dereferenced, only compared: a constant
// address shared by every thread.
unsafe impl Sync for WeightsSentinel {}

static UNWEIGHTED_TARGET: c_int = 0;
static WEIGHTS_EMPTY_TARGET: c_int = 0;

/// The address a program passes for "no weights" (MPICH's `MPI_UNWEIGHTED`).
#[unsafe(no_mangle)]
pub static MPI_UNWEIGHTED: WeightsSentinel = WeightsSentinel(&UNWEIGHTED_TARGET);
/// The address a program passes for "weights, but none here" (MPICH's
/// `MPI_WEIGHTS_EMPTY`).
#[unsafe(no_mangle)]
pub static MPI_WEIGHTS_EMPTY: WeightsSentinel = WeightsSentinel(&WEIGHTS_EMPTY_TARGET);

/// The topology of communicator `h`, if it has one.
pub(crate) fn topology_of(h: Comm) -> Option<Topology> {
    STATE.with(|s| {
        let s = s.borrow();
        s.comms.get(comm_slot(h)?)?.as_ref()?.topology.clone()
    })
}

/// A process's neighbours in its communicator's topology, in the order
/// neighbourhood collectives number their blocks: the ranks it receives
/// from and sends to (`None`: `MPI_PROC_NULL`, the edge of a non-periodic
/// grid), and the order to start its sends in (see [`neighbors`]).
#[derive(Clone)]
pub(crate) struct Neighbors {
    pub sources: Vec<Option<usize>>,
    pub destinations: Vec<Option<usize>>,
    pub send_order: Vec<usize>,
}

/// The neighbours of `rank` in the topology of `h`. In a Cartesian grid
/// the blocks go, per dimension, to the neighbour below then the one
/// above, and come from them in that order; where one rank is both (a
/// periodic dimension of two), what goes up must arrive from below: the
/// sends start in each dimension upward first, so that messages between
/// the two, matched in order, pair each block with its place.
pub(crate) fn neighbors(h: Comm, rank: usize) -> Result<Neighbors, (c_int, String)> {
    match topology_of(h) {
        Some(Topology::Cart { dims, periods }) => {
            let coords = coords_of(&dims, rank);
            let mut list = Vec::with_capacity(2 * dims.len());
            for d in 0..dims.len() {
                for step in [-1, 1] {
                    let mut at = coords.clone();
                    at[d] += step;
                    list.push(rank_at(&dims, &periods, &at));
                }
            }
            let send_order = (0..dims.len()).flat_map(|d| [2 * d + 1, 2 * d]).collect();
            Ok(Neighbors {
                sources: list.clone(),
                destinations: list,
                send_order,
            })
        }
        Some(Topology::Graph { index, edges }) => {
            let list: Vec<Option<usize>> = graph_neighbors(&index, &edges, rank)
                .iter()
                .map(|&r| usize::try_from(r).ok())
                .collect();
            let send_order = (0..list.len()).collect();
            Ok(Neighbors {
                sources: list.clone(),
                destinations: list,
                send_order,
            })
        }
        Some(Topology::DistGraph {
            sources,
            destinations,
            ..
        }) => Ok(Neighbors {
            send_order: (0..destinations.len()).collect(),
            sources: sources.iter().map(|&r| usize::try_from(r).ok()).collect(),
            destinations: destinations
                .iter()
                .map(|&r| usize::try_from(r).ok())
                .collect(),
        }),
        None => Err((MPI_ERR_TOPOLOGY, "the communicator has no topology".into())),
    }
}

/// Copy `v` to the C array `out` of room `max` (as much as fits).
///
/// # Safety
/// `out` holds `max` values when `max > 0` and it is not null.
unsafe fn copy_out<T: Copy>(v: &[T], out: *mut T, max: c_int) {
    let n = v.len().min(usize::try_from(max).unwrap_or(0));
    if n > 0 && !out.is_null() {
        // SAFETY: caller contract; `n` fits.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), out, n) };
    }
}

/// The Cartesian topology of `h`, or the error of `func`.
fn cart(func: &str, h: Comm) -> Result<(SharedComm, Vec<c_int>, Vec<bool>), c_int> {
    let c = comm(func, h)?;
    match topology_of(h) {
        Some(Topology::Cart { dims, periods }) => Ok((c, dims, periods)),
        _ => Err(error(
            h,
            func,
            MPI_ERR_TOPOLOGY,
            "the communicator has no Cartesian topology",
        )),
    }
}

/// Row-major coordinates of `rank` in a grid of `dims`.
fn coords_of(dims: &[c_int], mut rank: usize) -> Vec<c_int> {
    let mut coords = vec![0; dims.len()];
    for (i, &d) in dims.iter().enumerate().rev() {
        let d = d.max(1) as usize;
        coords[i] = (rank % d) as c_int;
        rank /= d;
    }
    coords
}

/// The rank at `coords` in a grid of `dims` (periodic dimensions wrap;
/// `None` outside a non-periodic one).
fn rank_at(dims: &[c_int], periods: &[bool], coords: &[c_int]) -> Option<usize> {
    let mut rank = 0usize;
    for ((&d, &p), &c) in dims.iter().zip(periods).zip(coords) {
        let c = if p {
            c.rem_euclid(d.max(1))
        } else if (0..d).contains(&c) {
            c
        } else {
            return None;
        };
        rank = rank * d as usize + c as usize;
    }
    Some(rank)
}

/// Product of `dims`, if every one is positive (or there are none).
fn grid_size(dims: &[c_int]) -> Option<usize> {
    dims.iter().try_fold(1usize, |p, &d| {
        p.checked_mul(usize::try_from(d).ok().filter(|&d| d > 0)?)
    })
}

/// Fill the zero entries of `dims` so that their product with the others is
/// `nnodes` and they are as close to each other as possible, in
/// non-increasing order; `None` if the fixed entries do not divide
/// `nnodes`.
pub(crate) fn dims_create(nnodes: usize, dims: &[c_int]) -> Option<Vec<c_int>> {
    let fixed = dims
        .iter()
        .filter(|&&d| d > 0)
        .try_fold(1usize, |p, &d| p.checked_mul(d as usize))?;
    if fixed == 0 || !nnodes.is_multiple_of(fixed) {
        return None;
    }
    let free = dims.iter().filter(|&&d| d == 0).count();
    let rest = nnodes / fixed;
    if free == 0 {
        return (rest == 1).then(|| dims.to_vec());
    }
    let divisors = divisors_of(rest);
    let mut best: Option<Vec<usize>> = None;
    let mut current = Vec::with_capacity(free);
    search(rest, free, usize::MAX, &divisors, &mut current, &mut best);
    let mut chosen = best?.into_iter();
    Some(
        dims.iter()
            .map(|&d| {
                if d == 0 {
                    chosen.next().unwrap_or(1) as c_int
                } else {
                    d
                }
            })
            .collect(),
    )
}

/// The divisors of `n`, in increasing order.
fn divisors_of(n: usize) -> Vec<usize> {
    let (mut low, mut high) = (Vec::new(), Vec::new());
    let mut d = 1;
    while d * d <= n {
        if n.is_multiple_of(d) {
            low.push(d);
            if d * d != n {
                high.push(n / d);
            }
        }
        d += 1;
    }
    low.extend(high.into_iter().rev());
    low
}

/// Is `base^exp >= target` (without overflow)?
fn pow_reaches(base: usize, exp: usize, target: usize) -> bool {
    let mut p = 1usize;
    for _ in 0..exp {
        if p >= target {
            return true;
        }
        p = p.saturating_mul(base);
    }
    p >= target
}

/// Is `base^exp > target` (without overflow)?
fn pow_exceeds(base: usize, exp: usize, target: usize) -> bool {
    pow_reaches(base, exp, target.saturating_add(1))
}

/// Is factorization `a` better than `b`: closer largest and smallest
/// factors, and among equals larger factors read from the smallest up
/// (what MPICH's `dims5` test expects, e.g. 13x9x8x6 over 13x12x6x6)?
fn better(a: &[usize], b: &[usize]) -> bool {
    let spread = |v: &[usize]| v[0] - v[v.len() - 1];
    match spread(a).cmp(&spread(b)) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => a.iter().rev().cmp(b.iter().rev()).is_gt(),
    }
}

/// Depth-first search of non-increasing factorizations of `rest` into
/// `left` factors no larger than `cap`, keeping the [`better`] one.
fn search(
    rest: usize,
    left: usize,
    cap: usize,
    divisors: &[usize],
    current: &mut Vec<usize>,
    best: &mut Option<Vec<usize>>,
) {
    if rest == 1 {
        // Only ones left (however many dimensions: no recursion).
        let before = current.len();
        current.resize(before + left, 1);
        if best.as_ref().is_none_or(|b| better(current, b)) {
            *best = Some(current.clone());
        }
        current.truncate(before);
        return;
    }
    if left == 1 {
        if rest <= cap {
            current.push(rest);
            if best.as_ref().is_none_or(|b| better(current, b)) {
                *best = Some(current.clone());
            }
            current.pop();
        }
        return;
    }
    for &f in divisors.iter().rev() {
        if f > cap || !rest.is_multiple_of(f) {
            continue;
        }
        // Non-increasing: the remaining `left - 1` factors are at most f,
        // so f^left must reach `rest`; smaller f only make it worse.
        if !pow_reaches(f, left - 1, rest / f) {
            break;
        }
        // To be no worse than the best spread, every later factor must be
        // at least first - spread: their product must allow it.
        if let Some(b) = best.as_ref() {
            let first = current.first().copied().unwrap_or(f);
            if let Some(floor) = first
                .checked_sub(b[0] - b[b.len() - 1])
                .filter(|&fl| fl > 1)
                && (f < floor || pow_exceeds(floor, left - 1, rest / f))
            {
                continue;
            }
        }
        current.push(f);
        search(rest / f, left - 1, f, divisors, current, best);
        current.pop();
    }
}

/// Register `c` (made from `h`) with `topology`, and write its handle.
///
/// # Safety
/// `out` is a communicator handle pointer.
unsafe fn give(h: Comm, c: Option<vpml::Comm>, topology: Topology, out: *mut Comm) -> c_int {
    let handle = c.map_or(MPI_COMM_NULL, |c| register_with(h, c, Some(topology)));
    // SAFETY: caller contract.
    unsafe { put(out, handle) };
    MPI_SUCCESS
}

/// The neighbours of `rank` in a graph in `index`/`edges` form.
fn graph_neighbors<'a>(index: &[c_int], edges: &'a [c_int], rank: usize) -> &'a [c_int] {
    let start = if rank == 0 {
        0
    } else {
        index.get(rank - 1).copied().unwrap_or(0)
    };
    let end = index.get(rank).copied().unwrap_or(start);
    let (start, end) = (start.max(0) as usize, end.max(0) as usize);
    edges.get(start..end.max(start)).unwrap_or(&[])
}

/// The graph topology of `h`, or the error of `func`.
fn graph(func: &str, h: Comm) -> Result<(SharedComm, Vec<c_int>, Vec<c_int>), c_int> {
    let c = comm(func, h)?;
    match topology_of(h) {
        Some(Topology::Graph { index, edges }) => Ok((c, index, edges)),
        _ => Err(error(
            h,
            func,
            MPI_ERR_TOPOLOGY,
            "the communicator has no graph topology",
        )),
    }
}

/// Is `p` one of the weight sentinels (or null)?
fn no_weights(p: *const c_int) -> bool {
    p.is_null() || std::ptr::eq(p, MPI_UNWEIGHTED.0) || std::ptr::eq(p, MPI_WEIGHTS_EMPTY.0)
}

/// Check a distributed graph's ranks against a communicator of `size`.
fn check_ranks(h: Comm, func: &str, ranks: &[c_int], size: usize) -> Result<(), c_int> {
    match ranks
        .iter()
        .find(|&&r| usize::try_from(r).map_or(true, |r| r >= size))
    {
        Some(r) => Err(error(h, func, MPI_ERR_RANK, &format!("rank {r} of {size}"))),
        None => Ok(()),
    }
}

export! {
    fn MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
        let func = "MPI_Dims_create";
        let (Ok(n), Ok(_)) = (usize::try_from(nnodes), usize::try_from(ndims)) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "negative node or dimension count");
        };
        // SAFETY: `dims` holds `ndims` ints (caller contract).
        let given = unsafe { c_array(dims as *const c_int, ndims) };
        if given.iter().any(|&d| d < 0) {
            return error(MPI_COMM_WORLD, func, MPI_ERR_DIMS, "negative dimension");
        }
        match dims_create(n, given) {
            Some(v) => {
                // SAFETY: as above.
                unsafe { copy_out(&v, dims, ndims) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, func, MPI_ERR_DIMS, &format!("{nnodes} nodes do not fit the given dimensions")),
        }
    }

    fn MPI_Cart_create / PMPI_Cart_create(h: Comm, ndims: c_int, dims: *const c_int, periods: *const c_int, _reorder: c_int, out: *mut Comm) -> c_int {
        let func = "MPI_Cart_create";
        let c = match intra_comm(func, h) { Ok(c) => c, Err(code) => return code };
        if ndims < 0 {
            return error(h, func, MPI_ERR_DIMS, "negative dimension count");
        }
        // SAFETY: both arrays hold `ndims` ints (caller contract).
        let (dims, periods) = unsafe { (c_array(dims, ndims).to_vec(), c_array(periods, ndims)) };
        let Some(size) = grid_size(&dims) else {
            return error(h, func, MPI_ERR_DIMS, "a dimension is not positive");
        };
        if size > c.size() {
            return error(h, func, MPI_ERR_DIMS, &format!("a grid of {size} on {} ranks", c.size()));
        }
        let periods = (0..dims.len()).map(|i| periods.get(i).is_some_and(|&p| p != 0)).collect();
        let color = (c.rank() < size).then_some(0);
        match crate::agreement::split(func, h, &c, color, c.rank() as i64) {
            // SAFETY: a handle pointer (caller contract).
            Ok(d) => unsafe { give(h, d, Topology::Cart { dims, periods }, out) },
            Err(code) => code,
        }
    }

    fn MPI_Cartdim_get / PMPI_Cartdim_get(h: Comm, ndims: *mut c_int) -> c_int {
        match cart("MPI_Cartdim_get", h) {
            Ok((_, dims, _)) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(ndims, dims.len() as c_int) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Cart_get / PMPI_Cart_get(h: Comm, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) -> c_int {
        match cart("MPI_Cart_get", h) {
            Ok((c, d, p)) => {
                let p: Vec<c_int> = p.iter().map(|&b| c_int::from(b)).collect();
                // SAFETY: the arrays hold `maxdims` ints (caller contract).
                unsafe {
                    copy_out(&d, dims, maxdims);
                    copy_out(&p, periods, maxdims);
                    copy_out(&coords_of(&d, c.rank()), coords, maxdims);
                }
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Cart_rank / PMPI_Cart_rank(h: Comm, coords: *const c_int, rank: *mut c_int) -> c_int {
        let func = "MPI_Cart_rank";
        match cart(func, h) {
            Ok((_, d, p)) => {
                // SAFETY: `coords` holds one int per dimension (caller contract).
                let coords = unsafe { c_array(coords, d.len() as c_int) };
                match rank_at(&d, &p, coords) {
                    Some(r) => {
                        // SAFETY: an int pointer (caller contract).
                        unsafe { put(rank, r as c_int) };
                        MPI_SUCCESS
                    }
                    None => error(h, func, MPI_ERR_ARG, &format!("coordinates {coords:?} outside the grid {d:?}")),
                }
            }
            Err(code) => code,
        }
    }

    fn MPI_Cart_coords / PMPI_Cart_coords(h: Comm, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int {
        let func = "MPI_Cart_coords";
        match cart(func, h) {
            Ok((c, d, _)) => match usize::try_from(rank).ok().filter(|&r| r < c.size()) {
                Some(r) => {
                    // SAFETY: `coords` holds `maxdims` ints (caller contract).
                    unsafe { copy_out(&coords_of(&d, r), coords, maxdims) };
                    MPI_SUCCESS
                }
                None => error(h, func, MPI_ERR_RANK, &format!("rank {rank} of {}", c.size())),
            },
            Err(code) => code,
        }
    }

    fn MPI_Cart_shift / PMPI_Cart_shift(h: Comm, direction: c_int, disp: c_int, source: *mut c_int, dest: *mut c_int) -> c_int {
        let func = "MPI_Cart_shift";
        match cart(func, h) {
            Ok((c, d, p)) => {
                let Some(dir) = usize::try_from(direction).ok().filter(|&i| i < d.len()) else {
                    return error(h, func, MPI_ERR_ARG, &format!("direction {direction} of a {}-dimensional grid", d.len()));
                };
                let here = coords_of(&d, c.rank());
                let at = |delta: i64| {
                    let mut co = here.clone();
                    let moved = i64::from(co[dir]) + delta;
                    co[dir] = if p[dir] {
                        // Periodic: wrap before it can leave an int.
                        moved.rem_euclid(i64::from(d[dir].max(1))) as c_int
                    } else {
                        match c_int::try_from(moved) {
                            Ok(v) => v,
                            Err(_) => return MPI_PROC_NULL,
                        }
                    };
                    rank_at(&d, &p, &co).map_or(MPI_PROC_NULL, |r| r as c_int)
                };
                // SAFETY: int pointers (caller contract).
                unsafe {
                    put(source, at(-i64::from(disp)));
                    put(dest, at(i64::from(disp)));
                }
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Cart_sub / PMPI_Cart_sub(h: Comm, remain: *const c_int, out: *mut Comm) -> c_int {
        let func = "MPI_Cart_sub";
        let (c, d, p) = match cart(func, h) { Ok(t) => t, Err(code) => return code };
        // SAFETY: `remain` holds one int per dimension (caller contract).
        let remain = unsafe { c_array(remain, d.len() as c_int) };
        let keep = |i: usize| remain.get(i).is_some_and(|&k| k != 0);
        let here = coords_of(&d, c.rank());
        // Ranks that share the dropped coordinates form one grid; their
        // order there is the order of the kept coordinates (row-major,
        // as here).
        let color = (0..d.len()).filter(|&i| !keep(i)).fold(0u64, |acc, i| acc * d[i] as u64 + here[i] as u64);
        let dims: Vec<c_int> = (0..d.len()).filter(|&i| keep(i)).map(|i| d[i]).collect();
        let periods: Vec<bool> = (0..d.len()).filter(|&i| keep(i)).map(|i| p[i]).collect();
        let Ok(color) = u32::try_from(color) else {
            return error(h, func, MPI_ERR_DIMS, "grid too large");
        };
        // No dimension kept: a zero-dimensional grid, which MPICH gives
        // to rank 0 alone (MPI_COMM_NULL elsewhere).
        let color = (!dims.is_empty() || c.rank() == 0).then_some(color);
        match crate::agreement::split(func, h, &c, color, c.rank() as i64) {
            // SAFETY: a handle pointer (caller contract).
            Ok(sub) => unsafe { give(h, sub, Topology::Cart { dims, periods }, out) },
            Err(code) => code,
        }
    }

    fn MPI_Cart_map / PMPI_Cart_map(h: Comm, ndims: c_int, dims: *const c_int, _periods: *const c_int, newrank: *mut c_int) -> c_int {
        let func = "MPI_Cart_map";
        let c = match intra_comm(func, h) { Ok(c) => c, Err(code) => return code };
        // SAFETY: `dims` holds `ndims` ints (caller contract).
        let Some(size) = grid_size(unsafe { c_array(dims, ndims) }) else {
            return error(h, func, MPI_ERR_DIMS, "a dimension is not positive");
        };
        if size > c.size() {
            return error(h, func, MPI_ERR_DIMS, &format!("a grid of {size} on {} ranks", c.size()));
        }
        let r = if c.rank() < size { c.rank() as c_int } else { MPI_UNDEFINED };
        // SAFETY: an int pointer (caller contract).
        unsafe { put(newrank, r) };
        MPI_SUCCESS
    }
}

export! {
    fn MPI_Graph_create / PMPI_Graph_create(h: Comm, nnodes: c_int, index: *const c_int, edges: *const c_int, _reorder: c_int, out: *mut Comm) -> c_int {
        let func = "MPI_Graph_create";
        let c = match intra_comm(func, h) { Ok(c) => c, Err(code) => return code };
        let Some(n) = usize::try_from(nnodes).ok().filter(|&n| n <= c.size()) else {
            return error(h, func, MPI_ERR_ARG, &format!("a graph of {nnodes} nodes on {} ranks", c.size()));
        };
        // SAFETY: `index` holds `nnodes` ints, `edges` index[nnodes-1] (caller contract).
        let index = unsafe { c_array(index, nnodes) }.to_vec();
        let nedges = index.last().copied().unwrap_or(0);
        if index.windows(2).any(|w| w[1] < w[0]) || index.first().is_some_and(|&i| i < 0) {
            return error(h, func, MPI_ERR_ARG, "the index array decreases");
        }
        // SAFETY: as above.
        let edges = unsafe { c_array(edges, nedges) }.to_vec();
        if let Err(code) = check_ranks(h, func, &edges, n) {
            return code;
        }
        let color = (c.rank() < n).then_some(0);
        match crate::agreement::split(func, h, &c, color, c.rank() as i64) {
            // SAFETY: a handle pointer (caller contract).
            Ok(d) => unsafe { give(h, d, Topology::Graph { index, edges }, out) },
            Err(code) => code,
        }
    }

    fn MPI_Graphdims_get / PMPI_Graphdims_get(h: Comm, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
        match graph("MPI_Graphdims_get", h) {
            Ok((_, index, edges)) => {
                // SAFETY: int pointers (caller contract).
                unsafe {
                    put(nnodes, index.len() as c_int);
                    put(nedges, edges.len() as c_int);
                }
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Graph_get / PMPI_Graph_get(h: Comm, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) -> c_int {
        match graph("MPI_Graph_get", h) {
            Ok((_, i, e)) => {
                // SAFETY: the arrays hold `maxindex` and `maxedges` ints (caller contract).
                unsafe {
                    copy_out(&i, index, maxindex);
                    copy_out(&e, edges, maxedges);
                }
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(h: Comm, rank: c_int, n: *mut c_int) -> c_int {
        let func = "MPI_Graph_neighbors_count";
        match graph(func, h) {
            Ok((_, i, e)) => match usize::try_from(rank).ok().filter(|&r| r < i.len()) {
                Some(r) => {
                    // SAFETY: an int pointer (caller contract).
                    unsafe { put(n, graph_neighbors(&i, &e, r).len() as c_int) };
                    MPI_SUCCESS
                }
                None => error(h, func, MPI_ERR_RANK, &format!("rank {rank} of a graph of {}", i.len())),
            },
            Err(code) => code,
        }
    }

    fn MPI_Graph_neighbors / PMPI_Graph_neighbors(h: Comm, rank: c_int, max: c_int, out: *mut c_int) -> c_int {
        let func = "MPI_Graph_neighbors";
        match graph(func, h) {
            Ok((_, i, e)) => match usize::try_from(rank).ok().filter(|&r| r < i.len()) {
                Some(r) => {
                    // SAFETY: `out` holds `max` ints (caller contract).
                    unsafe { copy_out(graph_neighbors(&i, &e, r), out, max) };
                    MPI_SUCCESS
                }
                None => error(h, func, MPI_ERR_RANK, &format!("rank {rank} of a graph of {}", i.len())),
            },
            Err(code) => code,
        }
    }

    fn MPI_Graph_map / PMPI_Graph_map(h: Comm, nnodes: c_int, _index: *const c_int, _edges: *const c_int, newrank: *mut c_int) -> c_int {
        let func = "MPI_Graph_map";
        let c = match intra_comm(func, h) { Ok(c) => c, Err(code) => return code };
        let Some(n) = usize::try_from(nnodes).ok().filter(|&n| n <= c.size()) else {
            return error(h, func, MPI_ERR_ARG, &format!("a graph of {nnodes} nodes on {} ranks", c.size()));
        };
        let r = if c.rank() < n { c.rank() as c_int } else { MPI_UNDEFINED };
        // SAFETY: an int pointer (caller contract).
        unsafe { put(newrank, r) };
        MPI_SUCCESS
    }

    fn MPI_Topo_test / PMPI_Topo_test(h: Comm, status: *mut c_int) -> c_int {
        if let Err(code) = comm("MPI_Topo_test", h) {
            return code;
        }
        let t = match topology_of(h) {
            Some(Topology::Cart { .. }) => MPI_CART,
            Some(Topology::Graph { .. }) => MPI_GRAPH,
            Some(Topology::DistGraph { .. }) => MPI_DIST_GRAPH,
            None => MPI_UNDEFINED,
        };
        // SAFETY: an int pointer (caller contract).
        unsafe { put(status, t) };
        MPI_SUCCESS
    }

    fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(h: Comm, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, destinations: *const c_int, destweights: *const c_int, _info: c_int, _reorder: c_int, out: *mut Comm) -> c_int {
        let func = "MPI_Dist_graph_create_adjacent";
        let c = match intra_comm(func, h) { Ok(c) => c, Err(code) => return code };
        if indegree < 0 || outdegree < 0 {
            return error(h, func, MPI_ERR_ARG, "negative degree");
        }
        let weighted = !(std::ptr::eq(sourceweights, MPI_UNWEIGHTED.0) || std::ptr::eq(destweights, MPI_UNWEIGHTED.0));
        // SAFETY: the arrays hold `indegree` and `outdegree` ints, or are
        // sentinels when there are no weights (caller contract).
        let topo = unsafe {
            Topology::DistGraph {
                sources: c_array(sources, indegree).to_vec(),
                source_weights: if no_weights(sourceweights) { Vec::new() } else { c_array(sourceweights, indegree).to_vec() },
                destinations: c_array(destinations, outdegree).to_vec(),
                dest_weights: if no_weights(destweights) { Vec::new() } else { c_array(destweights, outdegree).to_vec() },
                weighted,
            }
        };
        if let Topology::DistGraph { sources, destinations, .. } = &topo {
            for ranks in [sources, destinations] {
                if let Err(code) = check_ranks(h, func, ranks, c.size()) {
                    return code;
                }
            }
        }
        match crate::agreement::dup(func, h, &c) {
            // SAFETY: a handle pointer (caller contract).
            Ok(d) => unsafe { give(h, Some(d), topo, out) },
            Err(code) => code,
        }
    }

    fn MPI_Dist_graph_create / PMPI_Dist_graph_create(h: Comm, n: c_int, sources: *const c_int, degrees: *const c_int, destinations: *const c_int, weights: *const c_int, _info: c_int, _reorder: c_int, out: *mut Comm) -> c_int {
        let func = "MPI_Dist_graph_create";
        let c = match intra_comm(func, h) { Ok(c) => c, Err(code) => return code };
        if n < 0 {
            return error(h, func, MPI_ERR_ARG, "negative node count");
        }
        // SAFETY: `sources` and `degrees` hold `n` ints, `destinations`
        // (and `weights`, unless a sentinel) the sum of the degrees
        // (caller contract).
        let (srcs, degs) = unsafe { (c_array(sources, n), c_array(degrees, n)) };
        if srcs.len() != n as usize || degs.len() != n as usize {
            return error(h, func, MPI_ERR_ARG, "null source or degree array");
        }
        if degs.iter().any(|&d| d < 0) {
            return error(h, func, MPI_ERR_ARG, "negative degree");
        }
        let Some(total) = degs.iter().try_fold(0 as c_int, |t, &d| t.checked_add(d)) else {
            return error(h, func, MPI_ERR_ARG, "the degrees add up to more than an int holds");
        };
        // SAFETY: as above.
        let dsts = unsafe { c_array(destinations, total) };
        let weighted = !std::ptr::eq(weights, MPI_UNWEIGHTED.0);
        let ws: Vec<c_int> = if no_weights(weights) {
            vec![1; dsts.len()]
        } else {
            // SAFETY: as above.
            unsafe { c_array(weights, total) }.to_vec()
        };
        if dsts.len() != total as usize || ws.len() != total as usize {
            return error(h, func, MPI_ERR_ARG, "null destination or weight array");
        }
        if let Err(code) = check_ranks(h, func, srcs, c.size()).and_then(|()| check_ranks(h, func, dsts, c.size())) {
            return code;
        }
        // Every edge this process names, as (source, destination, weight).
        let mut mine = Vec::with_capacity(3 * dsts.len());
        let mut k = 0;
        for (&s, &d) in srcs.iter().zip(degs) {
            for _ in 0..d {
                mine.extend([s, dsts[k], ws[k]]);
                k += 1;
            }
        }
        // Everyone learns every edge (the graphs MPI programs describe
        // this way are small), then keeps those that touch it.
        let size = c.size();
        let mut counts = vec![0 as c_int; size];
        let gathered = c
            .allgather(&[mine.len() as c_int], &mut counts)
            .and_then(|()| {
                let counts: Vec<usize> = counts.iter().map(|&x| x.max(0) as usize).collect();
                let displs: Vec<usize> = counts.iter().scan(0, |at, &x| { let o = *at; *at += x; Some(o) }).collect();
                let mut all = vec![0 as c_int; counts.iter().sum()];
                c.allgatherv(&mine, &mut all, &counts, &displs).map(|()| all)
            })
            .and_then(|all| crate::agreement::exclusive(|| c.dup()).map(|d| (all, d)));
        let (all, d) = match gathered { Ok(v) => v, Err(e) => return vpml_error(h, func, &e) };
        let me = c.rank() as c_int;
        let (mut sources, mut source_weights, mut destinations, mut dest_weights) = (vec![], vec![], vec![], vec![]);
        for e in all.chunks_exact(3) {
            if e[1] == me {
                sources.push(e[0]);
                source_weights.push(e[2]);
            }
            if e[0] == me {
                destinations.push(e[1]);
                dest_weights.push(e[2]);
            }
        }
        if !weighted {
            source_weights.clear();
            dest_weights.clear();
        }
        let topo = Topology::DistGraph { sources, source_weights, destinations, dest_weights, weighted };
        // SAFETY: a handle pointer (caller contract).
        unsafe { give(h, Some(d), topo, out) }
    }

    fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(h: Comm, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) -> c_int {
        let func = "MPI_Dist_graph_neighbors_count";
        if let Err(code) = comm(func, h) {
            return code;
        }
        match topology_of(h) {
            Some(Topology::DistGraph { sources, destinations, weighted: w, .. }) => {
                // SAFETY: int pointers (caller contract).
                unsafe {
                    put(indegree, sources.len() as c_int);
                    put(outdegree, destinations.len() as c_int);
                    put(weighted, c_int::from(w));
                }
                MPI_SUCCESS
            }
            _ => error(h, func, MPI_ERR_TOPOLOGY, "the communicator has no distributed graph topology"),
        }
    }

    fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(h: Comm, maxin: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxout: c_int, destinations: *mut c_int, destweights: *mut c_int) -> c_int {
        let func = "MPI_Dist_graph_neighbors";
        if let Err(code) = comm(func, h) {
            return code;
        }
        match topology_of(h) {
            Some(Topology::DistGraph { sources: s, source_weights: sw, destinations: d, dest_weights: dw, weighted }) => {
                // SAFETY: the arrays hold `maxin` and `maxout` ints; weight
                // arrays are only written for a weighted graph and when
                // they are not sentinels (caller contract).
                unsafe {
                    copy_out(&s, sources, maxin);
                    copy_out(&d, destinations, maxout);
                    if weighted && !no_weights(sourceweights) {
                        copy_out(&sw, sourceweights, maxin);
                    }
                    if weighted && !no_weights(destweights) {
                        copy_out(&dw, destweights, maxout);
                    }
                }
                MPI_SUCCESS
            }
            _ => error(h, func, MPI_ERR_TOPOLOGY, "the communicator has no distributed graph topology"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::dims_create;

    #[test]
    fn dims_are_as_close_as_possible_and_non_increasing() {
        assert_eq!(dims_create(72, &[0, 0]), Some(vec![9, 8]));
        assert_eq!(dims_create(180, &[0, 0]), Some(vec![15, 12]));
        assert_eq!(dims_create(36, &[0, 0, 0]), Some(vec![4, 3, 3]));
        assert_eq!(dims_create(12, &[0, 3, 0]), Some(vec![2, 3, 2]));
        assert_eq!(dims_create(7, &[0, 0]), Some(vec![7, 1]));
        assert_eq!(dims_create(1, &[0, 0, 0]), Some(vec![1, 1, 1]));
        assert_eq!(dims_create(4096, &[0; 6]), Some(vec![4; 6]));
        // Fixed entries that do not divide the node count.
        assert_eq!(dims_create(6, &[4, 0]), None);
        assert_eq!(dims_create(6, &[2, 2]), None);
        assert_eq!(dims_create(4, &[2, 2]), Some(vec![2, 2]));
        // Equal spreads: the larger small factors win (MPICH's dims5).
        assert_eq!(dims_create(5616, &[0; 4]), Some(vec![13, 9, 8, 6]));
        assert_eq!(dims_create(228072, &[0; 3]), Some(vec![86, 52, 51]));
        assert_eq!(dims_create(712656, &[0; 5]), Some(vec![101, 14, 9, 8, 7]));
        assert_eq!(dims_create(221184, &[0; 2]), Some(vec![512, 432]));
        assert_eq!(dims_create(221184, &[0; 3]), Some(vec![64, 64, 54]));
        assert_eq!(dims_create(221184, &[0; 6]), Some(vec![9, 8, 8, 8, 8, 6]));
        // Powers that overflow 128 bits on the way.
        // A million dimensions: no recursion per dimension.
        let wide = dims_create(6, &vec![0; 1_000_000]).expect("fits");
        assert_eq!((wide[0], wide[1], wide[2]), (3, 2, 1));
        let many = dims_create(221184, &[0; 17]).expect("fits");
        assert_eq!(many.iter().product::<i32>(), 221184);
        assert!(many.windows(2).all(|w| w[0] >= w[1]), "{many:?}");
    }
}
