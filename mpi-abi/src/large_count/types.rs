//! The large-count datatype calls (`MPI_Type_contiguous_c` …). A
//! constructor whose counts and displacements all fit an int runs its int
//! twin (its recipe is the int one); otherwise it builds the type from
//! the counts themselves, so one block may hold more than 2^31-1
//! elements, and records them as the recipe's large counts
//! (`MPI_Type_get_envelope_c`/`_contents_c` give them back).
//! `MPI_Type_create_subarray_c` and `_darray_c` take sizes up to 2^31-1.

use std::ffi::c_int;

use super::ints_of;
use crate::consts::*;
use crate::env::{blocks, make_type, old_type, strided, structure};
use crate::recipes::*;

unsafe extern "C" {
    fn PMPI_Type_contiguous(count: c_int, old: Datatype, new: *mut Datatype) -> c_int;
    fn PMPI_Type_vector(
        count: c_int,
        blocklen: c_int,
        stride: c_int,
        old: Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_create_hvector(
        count: c_int,
        blocklen: c_int,
        stride: Aint,
        old: Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_indexed(
        count: c_int,
        blocklens: *const c_int,
        displs: *const c_int,
        old: Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_create_hindexed(
        count: c_int,
        blocklens: *const c_int,
        displs: *const Aint,
        old: Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_create_indexed_block(
        count: c_int,
        blocklen: c_int,
        displs: *const c_int,
        old: Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_create_hindexed_block(
        count: c_int,
        blocklen: c_int,
        displs: *const Aint,
        old: Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_create_struct(
        count: c_int,
        blocklens: *const c_int,
        displs: *const Aint,
        types: *const Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_create_resized(old: Datatype, lb: Aint, extent: Aint, new: *mut Datatype)
    -> c_int;
    fn PMPI_Type_create_subarray(
        ndims: c_int,
        sizes: *const c_int,
        subsizes: *const c_int,
        starts: *const c_int,
        order: c_int,
        old: Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_create_darray(
        size: c_int,
        rank: c_int,
        ndims: c_int,
        gsizes: *const c_int,
        distribs: *const c_int,
        dargs: *const c_int,
        psizes: *const c_int,
        order: c_int,
        old: Datatype,
        new: *mut Datatype,
    ) -> c_int;
    fn PMPI_Type_size_x(dt: Datatype, size: *mut Count) -> c_int;
    fn PMPI_Type_get_extent_x(dt: Datatype, lb: *mut Count, extent: *mut Count) -> c_int;
    fn PMPI_Type_get_true_extent_x(dt: Datatype, lb: *mut Count, extent: *mut Count) -> c_int;
}

/// `n` counts of a C array (empty for `n` 0; `None` for a null array or
/// a negative `n`).
///
/// # Safety
/// `p` holds `n` entries.
unsafe fn counts<'a>(p: *const Count, n: Count) -> Option<&'a [Count]> {
    let n = usize::try_from(n).ok()?;
    if n == 0 {
        return Some(&[]);
    }
    // SAFETY: caller contract.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, n) })
}

/// Do all of `v` fit an int?
fn fit(v: &[Count]) -> bool {
    v.iter().all(|&c| c_int::try_from(c).is_ok())
}

/// The ints of `v`, which [`fit`] them.
fn small(v: &[Count]) -> Vec<c_int> {
    v.iter().map(|&c| c as c_int).collect()
}

/// The displacements of `v` as addresses.
fn addresses(v: &[Count]) -> Vec<Aint> {
    v.iter().map(|&c| c as Aint).collect()
}

/// Build with `layout` and record the large counts `large` (the
/// combiner's arguments in MPI's order) for a type a `_c` constructor
/// made past an int.
fn make_large(
    func: &str,
    new: *mut Datatype,
    combiner: c_int,
    large: Vec<Count>,
    types: Vec<Datatype>,
    layout: impl FnOnce() -> Result<crate::state::DerivedType, &'static str>,
) -> c_int {
    let rc = make_type(func, new, layout);
    record_large(rc, new, combiner, large, types)
}

/// A null or too-short array argument.
fn bad_array(func: &str) -> c_int {
    crate::state::error(
        MPI_COMM_WORLD,
        func,
        MPI_ERR_ARG,
        "null array or negative count",
    )
}

export! {
    fn MPI_Type_contiguous_c / PMPI_Type_contiguous_c(count: Count, old: Datatype, new: *mut Datatype) -> c_int {
        if let Ok(c) = c_int::try_from(count) {
            // SAFETY: the caller's arguments.
            return unsafe { PMPI_Type_contiguous(c, old, new) };
        }
        make_large("MPI_Type_contiguous_c", new, MPI_COMBINER_CONTIGUOUS, vec![count], vec![old], || {
            blocks(&old_type(old)?, std::iter::once((count, 0)))
        })
    }

    fn MPI_Type_vector_c / PMPI_Type_vector_c(count: Count, blocklen: Count, stride: Count, old: Datatype, new: *mut Datatype) -> c_int {
        let all = [count, blocklen, stride];
        if fit(&all) {
            // SAFETY: the caller's arguments.
            return unsafe { PMPI_Type_vector(count as c_int, blocklen as c_int, stride as c_int, old, new) };
        }
        make_large("MPI_Type_vector_c", new, MPI_COMBINER_VECTOR, all.to_vec(), vec![old], || {
            let o = old_type(old)?;
            strided(&o, count, blocklen, stride as isize * o.extent)
        })
    }

    fn MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c(count: Count, blocklen: Count, stride: Count, old: Datatype, new: *mut Datatype) -> c_int {
        if fit(&[count, blocklen]) {
            // SAFETY: the caller's arguments.
            return unsafe { PMPI_Type_create_hvector(count as c_int, blocklen as c_int, stride as Aint, old, new) };
        }
        make_large("MPI_Type_create_hvector_c", new, MPI_COMBINER_HVECTOR, vec![count, blocklen, stride], vec![old], || {
            strided(&old_type(old)?, count, blocklen, stride as isize)
        })
    }

    fn MPI_Type_indexed_c / PMPI_Type_indexed_c(count: Count, blocklens: *const Count, displs: *const Count, old: Datatype, new: *mut Datatype) -> c_int {
        let func = "MPI_Type_indexed_c";
        // SAFETY: the arrays hold `count` entries (caller contract).
        let (Some(lens), Some(offs)) = (unsafe { counts(blocklens, count) }, unsafe { counts(displs, count) }) else {
            return bad_array(func);
        };
        if fit(&[count]) && fit(lens) && fit(offs) {
            // SAFETY: the caller's arguments, as ints.
            return unsafe { PMPI_Type_indexed(count as c_int, small(lens).as_ptr(), small(offs).as_ptr(), old, new) };
        }
        let large = [&[count][..], lens, offs].concat();
        make_large(func, new, MPI_COMBINER_INDEXED, large, vec![old], || {
            let o = old_type(old)?;
            blocks(&o, lens.iter().zip(offs).map(|(&l, &d)| (l, d as isize * o.extent)))
        })
    }

    fn MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(count: Count, blocklens: *const Count, displs: *const Count, old: Datatype, new: *mut Datatype) -> c_int {
        let func = "MPI_Type_create_hindexed_c";
        // SAFETY: the arrays hold `count` entries (caller contract).
        let (Some(lens), Some(offs)) = (unsafe { counts(blocklens, count) }, unsafe { counts(displs, count) }) else {
            return bad_array(func);
        };
        if fit(&[count]) && fit(lens) {
            // SAFETY: the caller's arguments, as ints and addresses.
            return unsafe { PMPI_Type_create_hindexed(count as c_int, small(lens).as_ptr(), addresses(offs).as_ptr(), old, new) };
        }
        let large = [&[count][..], lens, offs].concat();
        make_large(func, new, MPI_COMBINER_HINDEXED, large, vec![old], || {
            blocks(&old_type(old)?, lens.iter().zip(offs).map(|(&l, &d)| (l, d as isize)))
        })
    }

    fn MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(count: Count, blocklen: Count, displs: *const Count, old: Datatype, new: *mut Datatype) -> c_int {
        let func = "MPI_Type_create_indexed_block_c";
        // SAFETY: the array holds `count` entries (caller contract).
        let Some(offs) = (unsafe { counts(displs, count) }) else {
            return bad_array(func);
        };
        if fit(&[count, blocklen]) && fit(offs) {
            // SAFETY: the caller's arguments, as ints.
            return unsafe { PMPI_Type_create_indexed_block(count as c_int, blocklen as c_int, small(offs).as_ptr(), old, new) };
        }
        let large = [&[count, blocklen][..], offs].concat();
        make_large(func, new, MPI_COMBINER_INDEXED_BLOCK, large, vec![old], || {
            let o = old_type(old)?;
            blocks(&o, offs.iter().map(|&d| (blocklen, d as isize * o.extent)))
        })
    }

    fn MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c(count: Count, blocklen: Count, displs: *const Count, old: Datatype, new: *mut Datatype) -> c_int {
        let func = "MPI_Type_create_hindexed_block_c";
        // SAFETY: the array holds `count` entries (caller contract).
        let Some(offs) = (unsafe { counts(displs, count) }) else {
            return bad_array(func);
        };
        if fit(&[count, blocklen]) {
            // SAFETY: the caller's arguments, as ints and addresses.
            return unsafe { PMPI_Type_create_hindexed_block(count as c_int, blocklen as c_int, addresses(offs).as_ptr(), old, new) };
        }
        let large = [&[count, blocklen][..], offs].concat();
        make_large(func, new, MPI_COMBINER_HINDEXED_BLOCK, large, vec![old], || {
            blocks(&old_type(old)?, offs.iter().map(|&d| (blocklen, d as isize)))
        })
    }

    fn MPI_Type_create_struct_c / PMPI_Type_create_struct_c(count: Count, blocklens: *const Count, displs: *const Count, types: *const Datatype, new: *mut Datatype) -> c_int {
        let func = "MPI_Type_create_struct_c";
        // SAFETY: the arrays hold `count` entries (caller contract).
        let (Some(lens), Some(offs)) = (unsafe { counts(blocklens, count) }, unsafe { counts(displs, count) }) else {
            return bad_array(func);
        };
        let n = lens.len();
        if n > 0 && types.is_null() {
            return bad_array(func);
        }
        // SAFETY: as above.
        let tys = if n == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(types, n) }.to_vec() };
        if fit(&[count]) && fit(lens) {
            // SAFETY: the caller's arguments, as ints and addresses.
            return unsafe { PMPI_Type_create_struct(count as c_int, small(lens).as_ptr(), addresses(offs).as_ptr(), tys.as_ptr(), new) };
        }
        let large = [&[count][..], lens, offs].concat();
        let parts = lens.iter().zip(offs).zip(tys.clone()).map(|((&l, &d), t)| (l, d as isize, t));
        make_large(func, new, MPI_COMBINER_STRUCT, large, tys, || structure(parts))
    }

    fn MPI_Type_create_resized_c / PMPI_Type_create_resized_c(old: Datatype, lb: Count, extent: Count, new: *mut Datatype) -> c_int {
        // SAFETY: the caller's arguments (an MPI_Aint holds an MPI_Count here).
        unsafe { PMPI_Type_create_resized(old, lb as Aint, extent as Aint, new) }
    }

    fn MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(ndims: c_int, sizes: *const Count, subsizes: *const Count, starts: *const Count, order: c_int, old: Datatype, new: *mut Datatype) -> c_int {
        let func = "MPI_Type_create_subarray_c";
        let n = usize::try_from(ndims).unwrap_or(0);
        let run = || -> Result<c_int, c_int> {
            // SAFETY: each array holds `ndims` entries (caller contract).
            let (a, b, c) = unsafe { (ints_of(func, sizes, n)?, ints_of(func, subsizes, n)?, ints_of(func, starts, n)?) };
            // SAFETY: as above, as ints.
            Ok(unsafe { PMPI_Type_create_subarray(ndims, a.ptr(), b.ptr(), c.ptr(), order, old, new) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Type_create_darray_c / PMPI_Type_create_darray_c(size: c_int, rank: c_int, ndims: c_int, gsizes: *const Count, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order: c_int, old: Datatype, new: *mut Datatype) -> c_int {
        let func = "MPI_Type_create_darray_c";
        let n = usize::try_from(ndims).unwrap_or(0);
        let run = || -> Result<c_int, c_int> {
            // SAFETY: `gsizes` holds `ndims` entries (caller contract).
            let g = unsafe { ints_of(func, gsizes, n)? };
            // SAFETY: the caller's arguments, `gsizes` as ints.
            Ok(unsafe { PMPI_Type_create_darray(size, rank, ndims, g.ptr(), distribs, dargs, psizes, order, old, new) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Type_size_c / PMPI_Type_size_c(dt: Datatype, size: *mut Count) -> c_int {
        // SAFETY: the caller's arguments.
        unsafe { PMPI_Type_size_x(dt, size) }
    }

    fn MPI_Type_get_extent_c / PMPI_Type_get_extent_c(dt: Datatype, lb: *mut Count, extent: *mut Count) -> c_int {
        // SAFETY: the caller's arguments.
        unsafe { PMPI_Type_get_extent_x(dt, lb, extent) }
    }

    fn MPI_Type_get_true_extent_c / PMPI_Type_get_true_extent_c(dt: Datatype, lb: *mut Count, extent: *mut Count) -> c_int {
        // SAFETY: the caller's arguments.
        unsafe { PMPI_Type_get_true_extent_x(dt, lb, extent) }
    }
}
