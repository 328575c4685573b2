//! Packing: `MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size`. The packed form is
//! the bytes of the elements in type-map order, back to back (the form the
//! library sends non-contiguous datatypes in), so `MPI_PACKED` data packed
//! here and sent travels unchanged.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{error, put};
use crate::types::{layout, pack, span, unpack};

/// `*position` as a byte offset, or the error of `func`.
///
/// # Safety
/// `position` is an int pointer.
unsafe fn offset(func: &str, position: *mut c_int) -> Result<usize, c_int> {
    // SAFETY: caller contract.
    let p = unsafe { position.as_ref().copied() };
    p.and_then(|p| usize::try_from(p).ok()).ok_or_else(|| {
        error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_ARG,
            "null or negative position",
        )
    })
}

export! {
    fn MPI_Pack_size / PMPI_Pack_size(count: c_int, dt: Datatype, _comm: Comm, size: *mut c_int) -> c_int {
        match span(count, dt).map(c_int::try_from) {
            Ok(Ok(n)) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(size, n) };
                MPI_SUCCESS
            }
            Ok(Err(_)) => error(MPI_COMM_WORLD, "MPI_Pack_size", MPI_ERR_COUNT, "more bytes than an int holds"),
            Err((code, why)) => error(MPI_COMM_WORLD, "MPI_Pack_size", code, why),
        }
    }

    fn MPI_Pack / PMPI_Pack(inbuf: *const c_void, count: c_int, dt: Datatype, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, comm: Comm) -> c_int {
        let func = "MPI_Pack";
        // SAFETY: an int pointer (caller contract).
        let at = match unsafe { offset(func, position) } { Ok(p) => p, Err(code) => return code };
        let Some(t) = layout(dt) else { return error(comm, func, MPI_ERR_TYPE, "invalid datatype") };
        let Ok(n) = usize::try_from(count) else { return error(comm, func, MPI_ERR_COUNT, "negative count") };
        if n > 0 && inbuf.is_null() {
            return error(comm, func, MPI_ERR_BUFFER, "null input buffer");
        }
        // SAFETY: `inbuf` holds `count` elements of `dt` (caller contract).
        let data = unsafe { pack(inbuf as *const u8, n, &t) };
        let room = usize::try_from(outsize).unwrap_or(0);
        let Some(end) = at.checked_add(data.len()).filter(|&e| e <= room) else {
            return error(comm, func, MPI_ERR_TRUNCATE, &format!("{} bytes at {at} do not fit {room}", data.len()));
        };
        if !data.is_empty() {
            // SAFETY: `outbuf` holds `outsize` bytes and at..end lies inside.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (outbuf as *mut u8).add(at), data.len()) };
        }
        // SAFETY: as above; `end` <= outsize, an int.
        unsafe { put(position, end as c_int) };
        MPI_SUCCESS
    }

    fn MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, count: c_int, dt: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Unpack";
        // SAFETY: an int pointer (caller contract).
        let at = match unsafe { offset(func, position) } { Ok(p) => p, Err(code) => return code };
        let Some(t) = layout(dt) else { return error(comm, func, MPI_ERR_TYPE, "invalid datatype") };
        let len = match span(count, dt) { Ok(l) => l, Err((code, why)) => return error(comm, func, code, why) };
        let room = usize::try_from(insize).unwrap_or(0);
        let Some(end) = at.checked_add(len).filter(|&e| e <= room) else {
            return error(comm, func, MPI_ERR_TRUNCATE, &format!("{len} bytes at {at} are past the {room}-byte input"));
        };
        if len > 0 {
            if inbuf.is_null() || outbuf.is_null() {
                return error(comm, func, MPI_ERR_BUFFER, "null buffer");
            }
            // SAFETY: `inbuf` holds `insize` bytes, at..end inside;
            // `outbuf` holds `count` elements of `dt` (caller contract).
            unsafe {
                let data = std::slice::from_raw_parts((inbuf as *const u8).add(at), len);
                unpack(data, outbuf as *mut u8, &t);
            }
        }
        // SAFETY: as above; `end` <= insize, an int.
        unsafe { put(position, end as c_int) };
        MPI_SUCCESS
    }
}
