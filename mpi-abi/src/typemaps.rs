//! Datatypes for arrays — `MPI_Type_create_subarray` (a block of a
//! multidimensional array) and `MPI_Type_create_darray` (a process's part
//! of an array distributed block- or cyclic-wise over a process grid) —
//! datatype names (`MPI_Type_set_name`/`get_name`, with MPI's names for
//! the predefined types), `MPI_Type_match_size`, and MPI-1's names of the
//! datatype calls that MPI-3 removed and MPICH keeps (`MPI_Type_struct`,
//! `MPI_Type_extent`, …).
//!
//! Both constructors place the elements in the array's memory order (the
//! last dimension fastest for `MPI_ORDER_C`, the first for
//! `MPI_ORDER_FORTRAN`), each row of the fastest dimension as one run, and
//! give the type the whole array's extent from 0, as MPI defines them.

use std::ffi::{c_char, c_int, c_void};

use crate::consts::*;
use crate::env::{counted, ints, make_type, old_type};
use crate::state::{DerivedType, STATE, error, put};
use crate::types::Builder;

/// `MPI_ORDER_C`, `MPI_ORDER_FORTRAN`.
const MPI_ORDER_C: c_int = 56;
const MPI_ORDER_FORTRAN: c_int = 57;
/// `MPI_DISTRIBUTE_*` and `MPI_DISTRIBUTE_DFLT_DARG`.
const MPI_DISTRIBUTE_BLOCK: c_int = 121;
const MPI_DISTRIBUTE_CYCLIC: c_int = 122;
const MPI_DISTRIBUTE_NONE: c_int = 123;
const MPI_DISTRIBUTE_DFLT_DARG: c_int = -49767;
/// Longest name a datatype keeps (`MPI_MAX_OBJECT_NAME` less the NUL).
const MAX_NAME: usize = 127;
/// Most rows (runs of the fastest dimension) a constructor lays out.
const MAX_ROWS: usize = 1 << 24;
/// Most elements an array type may take (the layout holds each run).
const MAX_ELEMENTS: usize = 1 << 26;

/// The elements of `old` at the given global indices of an array of
/// `sizes` (`picked[d]`: the indices taken in dimension `d`, increasing),
/// in memory order for `order`, with the whole array's extent from 0.
fn array_type(
    sizes: &[usize],
    picked: &[Vec<usize>],
    order: c_int,
    old: &DerivedType,
) -> Result<DerivedType, &'static str> {
    let n = sizes.len();
    // Dimensions from the slowest to the fastest.
    let dims: Vec<usize> = match order {
        MPI_ORDER_C => (0..n).collect(),
        MPI_ORDER_FORTRAN => (0..n).rev().collect(),
        _ => return Err("order must be MPI_ORDER_C or MPI_ORDER_FORTRAN"),
    };
    // Element stride of each dimension.
    let mut stride = vec![0isize; n];
    let mut s = 1isize;
    for &d in dims.iter().rev() {
        stride[d] = s;
        s = s
            .checked_mul(isize::try_from(sizes[d]).map_err(|_| "array too large")?)
            .ok_or("array too large")?;
    }
    let total_elems = s;
    let extent = total_elems
        .checked_mul(old.extent)
        .ok_or("array too large")?;
    let mut b = Builder::default();
    let rows: usize = dims[..n.saturating_sub(1)]
        .iter()
        .map(|&d| picked[d].len())
        .try_fold(1usize, |a, k| a.checked_mul(k))
        .filter(|&r| r <= MAX_ROWS)
        .ok_or("array type too large for vpml")?;
    let empty = picked.iter().any(Vec::is_empty);
    if n > 0 && !empty {
        let fast = dims[n - 1];
        // Odometer over the slower dimensions' picked indices.
        let mut at = vec![0usize; n];
        for _ in 0..rows {
            let base: isize = (0..n)
                .filter(|&d| d != fast)
                .map(|d| picked[d][at[d]] as isize * stride[d])
                .sum();
            for &i in &picked[fast] {
                b.place(old, (base + i as isize * stride[fast]) * old.extent);
            }
            for &d in dims[..n - 1].iter().rev() {
                at[d] += 1;
                if at[d] < picked[d].len() {
                    break;
                }
                at[d] = 0;
            }
        }
    }
    let mut t = b.build(false);
    if t.blocks.is_empty() {
        t.base = old.base;
        t.per = 0;
    }
    t.lb = 0;
    t.extent = extent;
    t.align = old.align;
    t.bounds = (crate::state::Bound::Marker, crate::state::Bound::Marker);
    Ok(t)
}

/// The processes' coordinates of `rank` in a grid of `psizes` (row-major,
/// as MPI's Cartesian topologies number them).
fn grid_coords(psizes: &[usize], mut rank: usize) -> Vec<usize> {
    let mut c = vec![0; psizes.len()];
    for (i, &p) in psizes.iter().enumerate().rev() {
        c[i] = rank % p.max(1);
        rank /= p.max(1);
    }
    c
}

/// The global indices of a dimension of `g` elements, distributed over `p`
/// processes as `distrib`/`darg` say, that the process at `coord` owns.
fn owned(
    g: usize,
    p: usize,
    coord: usize,
    distrib: c_int,
    darg: c_int,
) -> Result<Vec<usize>, &'static str> {
    match distrib {
        MPI_DISTRIBUTE_NONE => {
            if p != 1 {
                return Err("MPI_DISTRIBUTE_NONE needs one process in its dimension");
            }
            Ok((0..g).collect())
        }
        MPI_DISTRIBUTE_BLOCK => {
            let b = if darg == MPI_DISTRIBUTE_DFLT_DARG {
                g.div_ceil(p)
            } else {
                usize::try_from(darg)
                    .ok()
                    .filter(|&b| b > 0)
                    .ok_or("invalid block size")?
            };
            if b.checked_mul(p).is_none_or(|all| all < g) {
                return Err("the blocks do not cover the dimension");
            }
            let start = (coord * b).min(g);
            Ok((start..(start + b).min(g)).collect())
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let k = if darg == MPI_DISTRIBUTE_DFLT_DARG {
                1
            } else {
                usize::try_from(darg)
                    .ok()
                    .filter(|&k| k > 0)
                    .ok_or("invalid cyclic block size")?
            };
            Ok((0..g).filter(|i| (i / k) % p == coord).collect())
        }
        _ => Err("invalid distribution"),
    }
}

/// MPI's name of predefined datatype `dt`.
pub(crate) fn predefined_name(dt: Datatype) -> Option<&'static str> {
    Some(match dt {
        MPI_CHAR => "MPI_CHAR",
        MPI_SIGNED_CHAR => "MPI_SIGNED_CHAR",
        MPI_UNSIGNED_CHAR => "MPI_UNSIGNED_CHAR",
        MPI_BYTE => "MPI_BYTE",
        MPI_WCHAR => "MPI_WCHAR",
        MPI_SHORT => "MPI_SHORT",
        MPI_UNSIGNED_SHORT => "MPI_UNSIGNED_SHORT",
        MPI_INT => "MPI_INT",
        MPI_UNSIGNED => "MPI_UNSIGNED",
        MPI_LONG => "MPI_LONG",
        MPI_UNSIGNED_LONG => "MPI_UNSIGNED_LONG",
        MPI_FLOAT => "MPI_FLOAT",
        MPI_DOUBLE => "MPI_DOUBLE",
        MPI_LONG_DOUBLE => "MPI_LONG_DOUBLE",
        MPI_LONG_LONG_INT => "MPI_LONG_LONG_INT",
        MPI_UNSIGNED_LONG_LONG => "MPI_UNSIGNED_LONG_LONG",
        MPI_PACKED => "MPI_PACKED",
        MPI_2INT => "MPI_2INT",
        MPI_FLOAT_INT => "MPI_FLOAT_INT",
        MPI_DOUBLE_INT => "MPI_DOUBLE_INT",
        MPI_LONG_INT => "MPI_LONG_INT",
        MPI_SHORT_INT => "MPI_SHORT_INT",
        MPI_LONG_DOUBLE_INT => "MPI_LONG_DOUBLE_INT",
        MPI_INT8_T => "MPI_INT8_T",
        MPI_INT16_T => "MPI_INT16_T",
        MPI_INT32_T => "MPI_INT32_T",
        MPI_INT64_T => "MPI_INT64_T",
        MPI_UINT8_T => "MPI_UINT8_T",
        MPI_UINT16_T => "MPI_UINT16_T",
        MPI_UINT32_T => "MPI_UINT32_T",
        MPI_UINT64_T => "MPI_UINT64_T",
        MPI_C_BOOL => "MPI_C_BOOL",
        // The same handle as MPI_C_COMPLEX, MPI's name for it.
        MPI_C_FLOAT_COMPLEX => "MPI_C_COMPLEX",
        MPI_C_DOUBLE_COMPLEX => "MPI_C_DOUBLE_COMPLEX",
        MPI_C_LONG_DOUBLE_COMPLEX => "MPI_C_LONG_DOUBLE_COMPLEX",
        MPI_CXX_BOOL => "MPI_CXX_BOOL",
        MPI_CXX_FLOAT_COMPLEX => "MPI_CXX_FLOAT_COMPLEX",
        MPI_CXX_DOUBLE_COMPLEX => "MPI_CXX_DOUBLE_COMPLEX",
        MPI_CXX_LONG_DOUBLE_COMPLEX => "MPI_CXX_LONG_DOUBLE_COMPLEX",
        MPI_AINT => "MPI_AINT",
        MPI_OFFSET => "MPI_OFFSET",
        MPI_COUNT => "MPI_COUNT",
        MPI_CHARACTER => "MPI_CHARACTER",
        MPI_INTEGER => "MPI_INTEGER",
        MPI_REAL => "MPI_REAL",
        MPI_LOGICAL => "MPI_LOGICAL",
        MPI_COMPLEX => "MPI_COMPLEX",
        MPI_DOUBLE_PRECISION => "MPI_DOUBLE_PRECISION",
        MPI_2INTEGER => "MPI_2INTEGER",
        MPI_2REAL => "MPI_2REAL",
        MPI_DOUBLE_COMPLEX => "MPI_DOUBLE_COMPLEX",
        MPI_2DOUBLE_PRECISION => "MPI_2DOUBLE_PRECISION",
        MPI_REAL4 => "MPI_REAL4",
        MPI_REAL8 => "MPI_REAL8",
        MPI_COMPLEX8 => "MPI_COMPLEX8",
        MPI_COMPLEX16 => "MPI_COMPLEX16",
        MPI_INTEGER1 => "MPI_INTEGER1",
        MPI_INTEGER2 => "MPI_INTEGER2",
        MPI_INTEGER4 => "MPI_INTEGER4",
        MPI_INTEGER8 => "MPI_INTEGER8",
        MPI_REAL16 => "MPI_REAL16",
        MPI_COMPLEX32 => "MPI_COMPLEX32",
        MPI_LB => "MPI_LB",
        MPI_UB => "MPI_UB",
        _ => return None,
    })
}

export! {
    fn MPI_Type_create_subarray / PMPI_Type_create_subarray(ndims: c_int, sizes: *const c_int, subsizes: *const c_int, starts: *const c_int, order: c_int, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_create_subarray", new, || {
            let n = counted(ndims)?;
            if n == 0 {
                return Err("ndims must be positive");
            }
            // SAFETY: each array holds `ndims` ints (caller contract).
            let (sz, sub, st) = unsafe { (ints(sizes, n)?, ints(subsizes, n)?, ints(starts, n)?) };
            let mut full = Vec::with_capacity(n);
            let mut picked = Vec::with_capacity(n);
            let mut elements = 1usize;
            for d in 0..n {
                let (g, k, s) = (counted(sz[d])?, counted(sub[d])?, counted(st[d])?);
                if g == 0 || s.checked_add(k).is_none_or(|e| e > g) {
                    return Err("a subarray must lie inside its array");
                }
                elements = elements.saturating_mul(k);
                if elements > MAX_ELEMENTS {
                    return Err("a subarray of more than 2^26 elements is too large for vpml");
                }
                full.push(g);
                picked.push((s..s + k).collect());
            }
            array_type(&full, &picked, order, &old_type(old)?)
        });
        crate::recipes::record(rc, new, || { let n = ndims.max(0) as usize; let mut ints = vec![ndims]; for a in [sizes, subsizes, starts] { ints.extend(crate::env::copied(a, n)); } ints.push(order); crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_SUBARRAY, ints, addrs: vec![], types: vec![old] } })
    }

    fn MPI_Type_create_darray / PMPI_Type_create_darray(size: c_int, rank: c_int, ndims: c_int, gsizes: *const c_int, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order: c_int, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_create_darray", new, || {
            let n = counted(ndims)?;
            if n == 0 {
                return Err("ndims must be positive");
            }
            let (procs, me) = (counted(size)?, counted(rank)?);
            // SAFETY: each array holds `ndims` ints (caller contract).
            let (g, dist, darg, p) = unsafe { (ints(gsizes, n)?, ints(distribs, n)?, ints(dargs, n)?, ints(psizes, n)?) };
            let grid: Vec<usize> = p.iter().map(|&x| counted(x)).collect::<Result<_, _>>()?;
            let all = grid.iter().try_fold(1usize, |a, &x| a.checked_mul(x));
            if grid.contains(&0) || all != Some(procs) || me >= procs {
                return Err("the process grid does not hold size processes, or rank is not among them");
            }
            let coords = grid_coords(&grid, me);
            let mut full = Vec::with_capacity(n);
            let mut picked = Vec::with_capacity(n);
            let mut elements = 1usize;
            for d in 0..n {
                let gd = counted(g[d])?;
                if gd > MAX_ELEMENTS {
                    return Err("a darray dimension of more than 2^26 elements is too large for vpml");
                }
                full.push(gd);
                let mine = owned(gd, grid[d], coords[d], dist[d], darg[d])?;
                elements = elements.saturating_mul(mine.len());
                if elements > MAX_ELEMENTS {
                    return Err("a darray part of more than 2^26 elements is too large for vpml");
                }
                picked.push(mine);
            }
            array_type(&full, &picked, order, &old_type(old)?)
        });
        crate::recipes::record(rc, new, || { let n = ndims.max(0) as usize; let mut ints = vec![size, rank, ndims]; for a in [gsizes, distribs, dargs, psizes] { ints.extend(crate::env::copied(a, n)); } ints.push(order); crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_DARRAY, ints, addrs: vec![], types: vec![old] } })
    }

    fn MPI_Type_set_name / PMPI_Type_set_name(dt: Datatype, name: *const c_char) -> c_int {
        if crate::types::info(dt).is_none() {
            return error(MPI_COMM_WORLD, "MPI_Type_set_name", MPI_ERR_TYPE, "invalid datatype");
        }
        // SAFETY: null or a C string (caller contract).
        let Some(text) = (unsafe { crate::env::object_name(name) }) else {
            return error(MPI_COMM_WORLD, "MPI_Type_set_name", MPI_ERR_ARG, "null name");
        };
        STATE.with(|s| s.borrow_mut().type_names.insert(dt, text));
        MPI_SUCCESS
    }

    fn MPI_Type_get_name / PMPI_Type_get_name(dt: Datatype, name: *mut c_char, len: *mut c_int) -> c_int {
        if crate::types::info(dt).is_none() {
            return error(MPI_COMM_WORLD, "MPI_Type_get_name", MPI_ERR_TYPE, "invalid datatype");
        }
        if name.is_null() || len.is_null() {
            return error(MPI_COMM_WORLD, "MPI_Type_get_name", MPI_ERR_ARG, "null argument");
        }
        let text = STATE
            .with(|s| s.borrow().type_names.get(&dt).cloned())
            .or_else(|| predefined_name(dt).map(str::to_string))
            .unwrap_or_default();
        let bytes = &text.as_bytes()[..text.len().min(MAX_NAME)];
        // SAFETY: `name` holds MPI_MAX_OBJECT_NAME chars, `len` an int
        // (caller contract).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, name, bytes.len());
            *name.add(bytes.len()) = 0;
            put(len, bytes.len() as c_int);
        }
        MPI_SUCCESS
    }

    fn MPI_Type_match_size / PMPI_Type_match_size(class: c_int, size: c_int, out: *mut Datatype) -> c_int {
        // MPI_TYPECLASS_REAL, _INTEGER, _COMPLEX: Fortran's sized types,
        // as MPICH answers.
        let t = match (class, size) {
            (1, 4) => MPI_REAL4,
            (1, 8) => MPI_REAL8,
            (1, 16) => MPI_REAL16,
            (2, 1) => MPI_INTEGER1,
            (2, 2) => MPI_INTEGER2,
            (2, 4) => MPI_INTEGER4,
            (2, 8) => MPI_INTEGER8,
            (3, 8) => MPI_COMPLEX8,
            (3, 16) => MPI_COMPLEX16,
            (3, 32) => MPI_COMPLEX32,
            _ => return error(MPI_COMM_WORLD, "MPI_Type_match_size", MPI_ERR_ARG, "no type of that class and size"),
        };
        if out.is_null() {
            return error(MPI_COMM_WORLD, "MPI_Type_match_size", MPI_ERR_ARG, "null datatype pointer");
        }
        // SAFETY: a handle pointer (caller contract, checked non-null).
        unsafe { put(out, t) };
        MPI_SUCCESS
    }

    fn MPI_Address / PMPI_Address(location: *mut c_void, address: *mut Aint) -> c_int {
        // SAFETY: MPI-1's name of MPI_Get_address (same contract).
        unsafe { crate::env::MPI_Get_address(location, address) }
    }

    fn MPI_Type_extent / PMPI_Type_extent(dt: Datatype, extent: *mut Aint) -> c_int {
        bound("MPI_Type_extent", dt, extent, |t| t.extent)
    }

    fn MPI_Type_lb / PMPI_Type_lb(dt: Datatype, lb: *mut Aint) -> c_int {
        bound("MPI_Type_lb", dt, lb, |t| t.lb)
    }

    fn MPI_Type_ub / PMPI_Type_ub(dt: Datatype, ub: *mut Aint) -> c_int {
        bound("MPI_Type_ub", dt, ub, |t| t.lb + t.extent)
    }

    fn MPI_Type_hvector / PMPI_Type_hvector(count: c_int, blocklen: c_int, stride: Aint, old: Datatype, new: *mut Datatype) -> c_int {
        // SAFETY: MPI-1's name (same contract).
        unsafe { crate::env::MPI_Type_create_hvector(count, blocklen, stride, old, new) }
    }

    fn MPI_Type_hindexed / PMPI_Type_hindexed(count: c_int, blocklens: *const c_int, displs: *const Aint, old: Datatype, new: *mut Datatype) -> c_int {
        // SAFETY: MPI-1's name (same contract).
        unsafe { crate::env::MPI_Type_create_hindexed(count, blocklens, displs, old, new) }
    }

    fn MPI_Type_struct / PMPI_Type_struct(count: c_int, blocklens: *const c_int, displs: *const Aint, types: *const Datatype, new: *mut Datatype) -> c_int {
        // SAFETY: MPI-1's name (same contract).
        unsafe { crate::env::MPI_Type_create_struct(count, blocklens, displs, types, new) }
    }
}

/// One bound of `dt`'s layout into `*out`, for MPI-1's calls.
fn bound(func: &str, dt: Datatype, out: *mut Aint, f: impl FnOnce(&DerivedType) -> isize) -> c_int {
    match crate::types::layout(dt) {
        Some(t) => {
            // SAFETY: an MPI_Aint pointer (caller contract).
            unsafe { put(out, f(&t) as Aint) };
            MPI_SUCCESS
        }
        None => error(MPI_COMM_WORLD, func, MPI_ERR_TYPE, "invalid datatype"),
    }
}
