//! Packing: `MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size`. The packed form is
//! the bytes of the elements in type-map order, back to back (the form the
//! library sends non-contiguous datatypes in), so `MPI_PACKED` data packed
//! here and sent travels unchanged.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{comm, error, put};
use crate::types::{info, layout, pack, span, unpack};

/// `*position` as a byte offset, or the error of `func`.
///
/// # Safety
/// `position` is an int pointer.
unsafe fn offset(h: Comm, func: &str, position: *mut c_int) -> Result<usize, c_int> {
    // SAFETY: caller contract.
    let p = unsafe { position.as_ref().copied() };
    p.and_then(|p| usize::try_from(p).ok())
        .ok_or_else(|| error(h, func, MPI_ERR_ARG, "null or negative position"))
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

    fn MPI_Pack / PMPI_Pack(inbuf: *const c_void, count: c_int, dt: Datatype, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, h: Comm) -> c_int {
        let func = "MPI_Pack";
        if let Err(code) = comm(func, h) {
            return code;
        }
        // SAFETY: an int pointer (caller contract).
        let at = match unsafe { offset(h, func, position) } { Ok(p) => p, Err(code) => return code };
        let (Some(t), Some(ti)) = (layout(dt), info(dt)) else { return error(h, func, MPI_ERR_TYPE, "invalid datatype") };
        // What it takes, checked against the room before anything is packed.
        let len = match span(count, dt) { Ok(l) => l, Err((code, why)) => return error(h, func, code, why) };
        let room = usize::try_from(outsize).unwrap_or(0);
        let Some(end) = at.checked_add(len).filter(|&e| e <= room) else {
            return error(h, func, MPI_ERR_TRUNCATE, &format!("{len} bytes at {at} do not fit {room}"));
        };
        if len > 0 {
            // A non-contiguous type may address absolute memory from
            // MPI_BOTTOM (null); the packed buffer may not be null.
            if (ti.contiguous && inbuf.is_null()) || outbuf.is_null() {
                return error(h, func, MPI_ERR_BUFFER, "null buffer");
            }
            // SAFETY: `inbuf` holds `count` elements of `dt` (caller
            // contract; `span` accepted `count`, so it is not negative);
            // `outbuf` holds `outsize` bytes and at..end lies inside.
            unsafe {
                let data = pack(inbuf as *const u8, count as usize, &t);
                std::ptr::copy_nonoverlapping(data.as_ptr(), (outbuf as *mut u8).add(at), data.len().min(len));
            }
        }
        // SAFETY: as above; `end` <= outsize, an int.
        unsafe { put(position, end as c_int) };
        MPI_SUCCESS
    }

    fn MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, count: c_int, dt: Datatype, h: Comm) -> c_int {
        let func = "MPI_Unpack";
        if let Err(code) = comm(func, h) {
            return code;
        }
        let comm = h;
        // SAFETY: an int pointer (caller contract).
        let at = match unsafe { offset(h, func, position) } { Ok(p) => p, Err(code) => return code };
        let (Some(t), Some(ti)) = (layout(dt), info(dt)) else { return error(comm, func, MPI_ERR_TYPE, "invalid datatype") };
        let len = match span(count, dt) { Ok(l) => l, Err((code, why)) => return error(comm, func, code, why) };
        let room = usize::try_from(insize).unwrap_or(0);
        let Some(end) = at.checked_add(len).filter(|&e| e <= room) else {
            return error(comm, func, MPI_ERR_TRUNCATE, &format!("{len} bytes at {at} are past the {room}-byte input"));
        };
        if len > 0 {
            // (Elements of a non-contiguous type may be at absolute
            // addresses from MPI_BOTTOM, null.)
            if inbuf.is_null() || (ti.contiguous && outbuf.is_null()) {
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
