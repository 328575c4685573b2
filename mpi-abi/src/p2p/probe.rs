//! Probes and status queries: `MPI_Probe`, `MPI_Iprobe`,
//! `MPI_Get_count`, `MPI_Get_elements`.

use std::ffi::c_int;

use super::{source_of, tag_of, write_status};
use crate::consts::*;
use crate::state::{comm, error, put, vpml_error};
use crate::types::{info, is_pair};

export! {
    fn MPI_Get_count / PMPI_Get_count(status: *const MpiStatus, dt: Datatype, count: *mut c_int) -> c_int {
        get_count("MPI_Get_count", status, dt, count, false)
    }

    fn MPI_Get_elements / PMPI_Get_elements(status: *const MpiStatus, dt: Datatype, count: *mut c_int) -> c_int {
        get_count("MPI_Get_elements", status, dt, count, true)
    }

    fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const MpiStatus, dt: Datatype, count: *mut Count) -> c_int {
        match count_of("MPI_Get_elements_x", status, dt, true) {
            Ok(n) => {
                // SAFETY: an MPI_Count pointer (caller contract).
                unsafe { put(count, n.unwrap_or(Count::from(MPI_UNDEFINED))) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) -> c_int {
        // SAFETY: a status pointer (caller contract).
        let Some(st) = (unsafe { status.as_mut() }) else {
            return error(MPI_COMM_WORLD, "MPI_Status_set_cancelled", MPI_ERR_ARG, "null status");
        };
        st.count_hi_and_cancelled = (st.count_hi_and_cancelled & !1) | c_int::from(flag != 0);
        MPI_SUCCESS
    }

    fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut MpiStatus, dt: Datatype, count: c_int) -> c_int {
        set_elements("MPI_Status_set_elements", status, dt, Count::from(count))
    }

    fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut MpiStatus, dt: Datatype, count: Count) -> c_int {
        set_elements("MPI_Status_set_elements_x", status, dt, count)
    }

    fn MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, h: Comm, status: *mut MpiStatus) -> c_int {
        let c = match comm("MPI_Probe", h) { Ok(c) => c, Err(code) => return code };
        if source == MPI_PROC_NULL {
            // SAFETY: a status pointer or MPI_STATUS_IGNORE.
            unsafe { write_status(status, None, true) };
            return MPI_SUCCESS;
        }
        let probed = if crate::threads::waits_in_library() {
            probe_threaded(&c, source, tag)
        } else {
            c.probe(source_of(source), tag_of(tag))
        };
        match probed {
            Ok(st) => {
                // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                unsafe { write_status(status, Some(&st), false) };
                MPI_SUCCESS
            }
            Err(e) => vpml_error(h, "MPI_Probe", &e),
        }
    }

    fn MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, h: Comm, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        // A polling loop is a progress point for one-sided requests.
        crate::rma::progress();
        let c = match comm("MPI_Iprobe", h) { Ok(c) => c, Err(code) => return code };
        if source == MPI_PROC_NULL {
            // SAFETY: caller's pointers.
            unsafe {
                put(flag, 1);
                write_status(status, None, true);
            }
            return MPI_SUCCESS;
        }
        match c.iprobe(source_of(source), tag_of(tag)) {
            Ok(found) => {
                // SAFETY: caller's pointers.
                unsafe {
                    put(flag, c_int::from(found.is_some()));
                    if let Some(st) = found {
                        write_status(status, Some(&st), false);
                    }
                }
                MPI_SUCCESS
            }
            Err(e) => vpml_error(h, "MPI_Iprobe", &e),
        }
    }
}

/// `MPI_Probe` under `MPI_THREAD_MULTIPLE`: nonblocking probes until one
/// finds a message, letting other threads call MPI between them.
pub(super) fn probe_threaded(
    c: &vpml::Comm,
    source: c_int,
    tag: c_int,
) -> vpml::Result<vpml::Status> {
    let mut found = None;
    crate::threads::wait_for(c, || {
        let progressed = c.poll_raw(&[], true)?.progressed;
        found = c.iprobe(source_of(source), tag_of(tag))?;
        Ok(vpml::raw::Polled {
            progressed,
            done: found.is_some(),
        })
    })?;
    found.ok_or_else(|| vpml::Error::EngineFailed("probe ended without a message".into()))
}

/// Record in `status` that `count` basic elements of `dt` arrived.
fn set_elements(func: &str, status: *mut MpiStatus, dt: Datatype, count: Count) -> c_int {
    let Some(t) = info(dt).filter(|t| t.size > 0) else {
        return error(MPI_COMM_WORLD, func, MPI_ERR_TYPE, "invalid datatype");
    };
    // SAFETY: a status pointer (caller contract).
    let Some(st) = (unsafe { status.as_mut() }) else {
        return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null status");
    };
    let unit = (t.size / t.per.max(1)) as u64;
    // A pair type's element is two basic elements (as Get_elements counts).
    let count = if t.base.is_some_and(is_pair) {
        count / 2
    } else {
        count
    };
    let Some(bytes) = u64::try_from(count)
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|&b| b < 1 << 63)
    else {
        return error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, "invalid count");
    };
    st.count_lo = bytes as u32 as c_int;
    st.count_hi_and_cancelled = (((bytes >> 32) as c_int) << 1) | (st.count_hi_and_cancelled & 1);
    MPI_SUCCESS
}

/// `MPI_Get_count_c`: the count as an `MPI_Count` (`MPI_UNDEFINED` if
/// not a whole number of elements).
pub(crate) fn get_count_large(
    func: &str,
    status: *const MpiStatus,
    dt: Datatype,
    count: *mut Count,
) -> c_int {
    match count_of(func, status, dt, false) {
        Ok(n) => {
            // SAFETY: an MPI_Count pointer (caller contract).
            unsafe { put(count, n.unwrap_or(Count::from(MPI_UNDEFINED))) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

fn get_count(
    func: &str,
    status: *const MpiStatus,
    dt: Datatype,
    count: *mut c_int,
    elements: bool,
) -> c_int {
    match count_of(func, status, dt, elements) {
        Ok(n) => {
            // Past an int: MPI_UNDEFINED (the _x calls say how many).
            let n = n
                .and_then(|n| c_int::try_from(n).ok())
                .unwrap_or(MPI_UNDEFINED);
            // SAFETY: an int pointer (caller contract).
            unsafe { put(count, n) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

/// How many elements of `dt` (or of its basic type, for `elements`) the
/// status says arrived: `None` if not a whole number of them.
fn count_of(
    func: &str,
    status: *const MpiStatus,
    dt: Datatype,
    elements: bool,
) -> Result<Option<Count>, c_int> {
    let Some(t) = info(dt) else {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_TYPE,
            "invalid datatype",
        ));
    };
    // SAFETY: a status pointer (caller contract).
    let Some(st) = (unsafe { status.as_ref() }) else {
        return Err(error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null status"));
    };
    let bytes =
        (st.count_lo as u32 as u64) | ((((st.count_hi_and_cancelled as u32) >> 1) as u64) << 32);
    if t.size == 0 {
        // A datatype of no bytes: no message holds a whole number of them
        // but an empty one, which holds none (as MPICH counts).
        return Ok((bytes == 0).then_some(0));
    }
    if elements && t.base.is_none() {
        return elements_of_mixed(func, dt, bytes, t.size as u64);
    }
    let unit = if elements {
        (t.size / t.per) as u64
    } else {
        t.size as u64
    };
    // A pair type's element is two basic elements.
    let basic = if elements && t.base.is_some_and(is_pair) {
        2
    } else {
        1
    };
    Ok(bytes
        .is_multiple_of(unit)
        .then(|| Count::try_from(bytes / unit * basic).ok())
        .flatten())
}

/// The basic elements a predefined type's element holds: (bytes of each,
/// how many) — a pair type's value and index are two.
fn basic_elements(dt: Datatype) -> Result<Vec<(usize, usize)>, String> {
    Ok(match dt {
        MPI_FLOAT_INT | MPI_2INT | MPI_2INTEGER | MPI_2REAL => vec![(4, 2)],
        MPI_DOUBLE_INT | MPI_LONG_INT => vec![(8, 1), (4, 1)],
        MPI_SHORT_INT => vec![(2, 1), (4, 1)],
        MPI_LONG_DOUBLE_INT => vec![(16, 1), (4, 1)],
        MPI_2DOUBLE_PRECISION => vec![(8, 2)],
        _ => match crate::types::predefined_size(dt) {
            Some(0) => Vec::new(),
            Some(n) => vec![(n, 1)],
            None => return Err("invalid datatype".into()),
        },
    })
}

/// `MPI_Get_elements` for a datatype of several basic types (a struct):
/// the basic elements of the whole elements in `bytes`, then of the type
/// map's prefix that the rest fills; `None` if it ends inside one.
fn elements_of_mixed(
    func: &str,
    dt: Datatype,
    bytes: u64,
    size: u64,
) -> Result<Option<Count>, c_int> {
    let runs = crate::recipes::expand(dt, &basic_elements)
        .map_err(|why| error(MPI_COMM_WORLD, func, MPI_ERR_TYPE, &why))?;
    let per: u64 = runs.iter().map(|&(_, k)| k as u64).sum();
    let (whole, mut rest) = (bytes / size, bytes % size);
    let mut n = whole * per;
    for &(unit, k) in &runs {
        let taken = (rest / unit as u64).min(k as u64);
        n += taken;
        rest -= taken * unit as u64;
        if taken < k as u64 {
            break;
        }
    }
    Ok((rest == 0).then(|| Count::try_from(n).ok()).flatten())
}

/// Copy a status between C's `MPI_Status`, Fortran's `MPI_Fint` array and
/// Fortran 2008's `MPI_F08_status`: in MPICH's ABI all three are the same
/// five ints in the same order.
///
/// # Safety
/// `from` and `to` are null or point to five ints.
unsafe fn copy_status(func: &str, from: *const c_int, to: *mut c_int) -> c_int {
    if from.is_null() || to.is_null() {
        return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null status");
    }
    // SAFETY: caller contract (five ints each; they may not overlap in
    // a correct program, and a copy of equal ones is harmless).
    unsafe { std::ptr::copy(from, to, 5) };
    MPI_SUCCESS
}

export! {
    fn MPI_Status_c2f / PMPI_Status_c2f(c: *const MpiStatus, f: *mut c_int) -> c_int {
        // SAFETY: caller contract.
        unsafe { copy_status("MPI_Status_c2f", c.cast(), f) }
    }

    fn MPI_Status_f2c / PMPI_Status_f2c(f: *const c_int, c: *mut MpiStatus) -> c_int {
        // SAFETY: caller contract.
        unsafe { copy_status("MPI_Status_f2c", f, c.cast()) }
    }

    fn MPI_Status_c2f08 / PMPI_Status_c2f08(c: *const MpiStatus, f08: *mut c_int) -> c_int {
        // SAFETY: caller contract.
        unsafe { copy_status("MPI_Status_c2f08", c.cast(), f08) }
    }

    fn MPI_Status_f082c / PMPI_Status_f082c(f08: *const c_int, c: *mut MpiStatus) -> c_int {
        // SAFETY: caller contract.
        unsafe { copy_status("MPI_Status_f082c", f08, c.cast()) }
    }

    fn MPI_Status_f082f / PMPI_Status_f082f(f08: *const c_int, f: *mut c_int) -> c_int {
        // SAFETY: caller contract.
        unsafe { copy_status("MPI_Status_f082f", f08, f) }
    }

    fn MPI_Status_f2f08 / PMPI_Status_f2f08(f: *const c_int, f08: *mut c_int) -> c_int {
        // SAFETY: caller contract.
        unsafe { copy_status("MPI_Status_f2f08", f, f08) }
    }
}
