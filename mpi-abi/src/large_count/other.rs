//! The other large-count calls: packing (positions and sizes in
//! `MPI_Count`), status queries, `MPI_Op_create_c` (a user function that
//! counts in `MPI_Count`), the buffer of buffered sends, and windows
//! (displacement units in `MPI_Aint`).

use std::ffi::{c_char, c_int, c_void};

use super::narrow;
use crate::consts::*;
use crate::state::{STATE, UserFnC, UserFunction, error, handle_of, insert, put};

unsafe extern "C" {
    fn PMPI_Pack_external(
        datarep: *const c_char,
        inbuf: *const c_void,
        count: c_int,
        dt: Datatype,
        outbuf: *mut c_void,
        outsize: Aint,
        position: *mut Aint,
    ) -> c_int;
    fn PMPI_Unpack_external(
        datarep: *const c_char,
        inbuf: *const c_void,
        insize: Aint,
        position: *mut Aint,
        outbuf: *mut c_void,
        count: c_int,
        dt: Datatype,
    ) -> c_int;
    fn PMPI_Pack_external_size(
        datarep: *const c_char,
        count: c_int,
        dt: Datatype,
        size: *mut Aint,
    ) -> c_int;
    fn PMPI_Get_elements_x(status: *const MpiStatus, dt: Datatype, count: *mut Count) -> c_int;
    fn PMPI_Buffer_attach(buf: *mut c_void, size: c_int) -> c_int;
    fn PMPI_Buffer_detach(buf: *mut c_void, size: *mut c_int) -> c_int;
    fn PMPI_Win_create(
        base: *mut c_void,
        size: Aint,
        disp_unit: c_int,
        info: Info,
        comm: Comm,
        win: *mut Win,
    ) -> c_int;
    fn PMPI_Win_allocate(
        size: Aint,
        disp_unit: c_int,
        info: Info,
        comm: Comm,
        baseptr: *mut c_void,
        win: *mut Win,
    ) -> c_int;
    fn PMPI_Win_allocate_shared(
        size: Aint,
        disp_unit: c_int,
        info: Info,
        comm: Comm,
        baseptr: *mut c_void,
        win: *mut Win,
    ) -> c_int;
    fn PMPI_Win_shared_query(
        win: Win,
        rank: c_int,
        size: *mut Aint,
        disp_unit: *mut c_int,
        baseptr: *mut c_void,
    ) -> c_int;
}

/// An `MPI_Count` argument `what` that must fit an int here.
fn int_arg(func: &str, what: &str, v: Count) -> Result<c_int, c_int> {
    c_int::try_from(v).map_err(|_| {
        error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_COUNT,
            &format!("{what} {v}: vpml takes it up to 2^31-1"),
        )
    })
}

/// `*p` (an `MPI_Count` position) as a byte offset.
///
/// # Safety
/// `p` is null or an `MPI_Count` pointer.
unsafe fn position(func: &str, p: *const Count) -> Result<usize, c_int> {
    // SAFETY: caller contract.
    unsafe { p.as_ref().copied() }
        .and_then(|p| usize::try_from(p).ok())
        .ok_or_else(|| {
            error(
                MPI_COMM_WORLD,
                func,
                MPI_ERR_ARG,
                "null or negative position",
            )
        })
}

export! {
    fn MPI_Pack_c / PMPI_Pack_c(inbuf: *const c_void, count: Count, dt: Datatype, outbuf: *mut c_void, outsize: Count, pos: *mut Count, comm: Comm) -> c_int {
        let func = "MPI_Pack_c";
        let run = || -> Result<c_int, c_int> {
            // SAFETY: an MPI_Count pointer (caller contract).
            let at = unsafe { position(func, pos)? };
            let n = narrow(func, count, dt)?;
            let room = usize::try_from(outsize).unwrap_or(0);
            // SAFETY: the caller's buffers (as MPI_Pack's).
            let end = unsafe { crate::pack::pack_at(comm, func, inbuf, n.count, n.dt, outbuf, room, at)? };
            // SAFETY: as above.
            unsafe { put(pos, end as Count) };
            Ok(MPI_SUCCESS)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Unpack_c / PMPI_Unpack_c(inbuf: *const c_void, insize: Count, pos: *mut Count, outbuf: *mut c_void, count: Count, dt: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Unpack_c";
        let run = || -> Result<c_int, c_int> {
            // SAFETY: an MPI_Count pointer (caller contract).
            let at = unsafe { position(func, pos)? };
            let n = narrow(func, count, dt)?;
            let room = usize::try_from(insize).unwrap_or(0);
            // SAFETY: the caller's buffers (as MPI_Unpack's).
            let end = unsafe { crate::pack::unpack_at(comm, func, inbuf, room, at, outbuf, n.count, n.dt)? };
            // SAFETY: as above.
            unsafe { put(pos, end as Count) };
            Ok(MPI_SUCCESS)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Pack_size_c / PMPI_Pack_size_c(count: Count, dt: Datatype, _comm: Comm, size: *mut Count) -> c_int {
        let func = "MPI_Pack_size_c";
        let Some(t) = crate::types::info(dt) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_TYPE, "invalid datatype");
        };
        let bytes = usize::try_from(count).ok().and_then(|n| n.checked_mul(t.size)).and_then(|b| Count::try_from(b).ok());
        match bytes {
            // SAFETY: an MPI_Count pointer (caller contract).
            Some(b) => unsafe { put(size, b) },
            None => return error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, &format!("{count} elements")),
        }
        MPI_SUCCESS
    }

    fn MPI_Pack_external_c / PMPI_Pack_external_c(datarep: *const c_char, inbuf: *const c_void, count: Count, dt: Datatype, outbuf: *mut c_void, outsize: Count, pos: *mut Count) -> c_int {
        let run = || -> Result<c_int, c_int> {
            let n = narrow("MPI_Pack_external_c", count, dt)?;
            // SAFETY: the caller's arguments; an MPI_Count and an MPI_Aint
            // are both 64 bits here.
            Ok(unsafe { PMPI_Pack_external(datarep, inbuf, n.count, n.dt, outbuf, outsize as Aint, pos.cast()) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Unpack_external_c / PMPI_Unpack_external_c(datarep: *const c_char, inbuf: *const c_void, insize: Count, pos: *mut Count, outbuf: *mut c_void, count: Count, dt: Datatype) -> c_int {
        let run = || -> Result<c_int, c_int> {
            let n = narrow("MPI_Unpack_external_c", count, dt)?;
            // SAFETY: as MPI_Pack_external_c.
            Ok(unsafe { PMPI_Unpack_external(datarep, inbuf, insize as Aint, pos.cast(), outbuf, n.count, n.dt) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Pack_external_size_c / PMPI_Pack_external_size_c(datarep: *const c_char, count: Count, dt: Datatype, size: *mut Count) -> c_int {
        let run = || -> Result<c_int, c_int> {
            let n = narrow("MPI_Pack_external_size_c", count, dt)?;
            // SAFETY: as MPI_Pack_external_c.
            Ok(unsafe { PMPI_Pack_external_size(datarep, n.count, n.dt, size.cast()) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Get_count_c / PMPI_Get_count_c(status: *const MpiStatus, dt: Datatype, count: *mut Count) -> c_int {
        crate::p2p::get_count_large("MPI_Get_count_c", status, dt, count)
    }

    fn MPI_Get_elements_c / PMPI_Get_elements_c(status: *const MpiStatus, dt: Datatype, count: *mut Count) -> c_int {
        // SAFETY: the caller's arguments.
        unsafe { PMPI_Get_elements_x(status, dt, count) }
    }

    fn MPI_Op_create_c / PMPI_Op_create_c(f: Option<UserFnC>, commute: c_int, op: *mut Op) -> c_int {
        let Some(f) = f else {
            return error(MPI_COMM_WORLD, "MPI_Op_create_c", MPI_ERR_ARG, "null function");
        };
        let i = STATE.with(|s| insert(&mut s.borrow_mut().ops, 0, (UserFunction::Large(f), commute != 0)));
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(op, handle_of(USER_OP_KIND, i)) };
        MPI_SUCCESS
    }

    fn MPI_Buffer_attach_c / PMPI_Buffer_attach_c(buf: *mut c_void, size: Count) -> c_int {
        match int_arg("MPI_Buffer_attach_c", "a buffer of", size) {
            // SAFETY: the caller's buffer.
            Ok(n) => unsafe { PMPI_Buffer_attach(buf, n) },
            Err(code) => code,
        }
    }

    fn MPI_Buffer_detach_c / PMPI_Buffer_detach_c(buf: *mut c_void, size: *mut Count) -> c_int {
        let mut n: c_int = 0;
        // SAFETY: the caller's `void **`.
        let rc = unsafe { PMPI_Buffer_detach(buf, &mut n) };
        if rc == MPI_SUCCESS {
            // SAFETY: an MPI_Count pointer (caller contract).
            unsafe { put(size, Count::from(n)) };
        }
        rc
    }

    fn MPI_Win_create_c / PMPI_Win_create_c(base: *mut c_void, size: Aint, disp_unit: Aint, info: Info, comm: Comm, win: *mut Win) -> c_int {
        match int_arg("MPI_Win_create_c", "displacement unit", disp_unit as Count) {
            // SAFETY: the caller's arguments.
            Ok(u) => unsafe { PMPI_Win_create(base, size, u, info, comm, win) },
            Err(code) => code,
        }
    }

    fn MPI_Win_allocate_c / PMPI_Win_allocate_c(size: Aint, disp_unit: Aint, info: Info, comm: Comm, baseptr: *mut c_void, win: *mut Win) -> c_int {
        match int_arg("MPI_Win_allocate_c", "displacement unit", disp_unit as Count) {
            // SAFETY: the caller's arguments.
            Ok(u) => unsafe { PMPI_Win_allocate(size, u, info, comm, baseptr, win) },
            Err(code) => code,
        }
    }

    fn MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c(size: Aint, disp_unit: Aint, info: Info, comm: Comm, baseptr: *mut c_void, win: *mut Win) -> c_int {
        match int_arg("MPI_Win_allocate_shared_c", "displacement unit", disp_unit as Count) {
            // SAFETY: the caller's arguments.
            Ok(u) => unsafe { PMPI_Win_allocate_shared(size, u, info, comm, baseptr, win) },
            Err(code) => code,
        }
    }

    fn MPI_Win_shared_query_c / PMPI_Win_shared_query_c(win: Win, rank: c_int, size: *mut Aint, disp_unit: *mut Aint, baseptr: *mut c_void) -> c_int {
        let mut u: c_int = 0;
        // SAFETY: the caller's arguments.
        let rc = unsafe { PMPI_Win_shared_query(win, rank, size, &mut u, baseptr) };
        if rc == MPI_SUCCESS {
            // SAFETY: an MPI_Aint pointer (caller contract).
            unsafe { put(disp_unit, u as Aint) };
        }
        rc
    }
}
