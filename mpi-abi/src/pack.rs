//! Packing: `MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size`, and their
//! portable twins `MPI_Pack_external`, `MPI_Unpack_external`,
//! `MPI_Pack_external_size` (data representation `external32`). The
//! packed form is the bytes of the elements in type-map order, back to
//! back (the form the library sends non-contiguous datatypes in), so
//! `MPI_PACKED` data packed here and sent travels unchanged; `external32`
//! is the same form with each number big-endian (see `external32`).

mod external32;

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

/// Pack `count` elements of `dt` from `inbuf` into `outbuf` (`room`
/// bytes) at byte `at`: the offset just past them, or the error of `func`
/// (raised on `h`).
///
/// # Safety
/// `inbuf` holds `count` elements of `dt`; `outbuf` holds `room` bytes.
#[allow(clippy::too_many_arguments)] // MPI_Pack's own list
pub(crate) unsafe fn pack_at(
    h: Comm,
    func: &str,
    inbuf: *const c_void,
    count: c_int,
    dt: Datatype,
    outbuf: *mut c_void,
    room: usize,
    at: usize,
) -> Result<usize, c_int> {
    let (Some(t), Some(ti)) = (layout(dt), info(dt)) else {
        return Err(error(h, func, MPI_ERR_TYPE, "invalid datatype"));
    };
    // What it takes, checked against the room before anything is packed.
    let len = span(count, dt).map_err(|(code, why)| error(h, func, code, why))?;
    let Some(end) = at.checked_add(len).filter(|&e| e <= room) else {
        let why = format!("{len} bytes at {at} do not fit {room}");
        return Err(error(h, func, MPI_ERR_TRUNCATE, &why));
    };
    if len > 0 {
        // A non-contiguous type may address absolute memory from
        // MPI_BOTTOM (null); the packed buffer may not be null.
        if (ti.contiguous && inbuf.is_null()) || outbuf.is_null() {
            return Err(error(h, func, MPI_ERR_BUFFER, "null buffer"));
        }
        // SAFETY: `inbuf` holds `count` elements of `dt` (caller
        // contract; `span` accepted `count`, so it is not negative);
        // `outbuf` holds `room` bytes and at..end lies inside.
        unsafe {
            let data = pack(inbuf as *const u8, count as usize, &t);
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (outbuf as *mut u8).add(at),
                data.len().min(len),
            );
        }
    }
    Ok(end)
}

/// Unpack `count` elements of `dt` into `outbuf` from `inbuf` (`room`
/// bytes) at byte `at`: the offset just past what was read, or the error
/// of `func` (raised on `h`).
///
/// # Safety
/// `inbuf` holds `room` bytes; `outbuf` holds `count` elements of `dt`.
#[allow(clippy::too_many_arguments)] // MPI_Unpack's own list
pub(crate) unsafe fn unpack_at(
    h: Comm,
    func: &str,
    inbuf: *const c_void,
    room: usize,
    at: usize,
    outbuf: *mut c_void,
    count: c_int,
    dt: Datatype,
) -> Result<usize, c_int> {
    let (Some(t), Some(ti)) = (layout(dt), info(dt)) else {
        return Err(error(h, func, MPI_ERR_TYPE, "invalid datatype"));
    };
    let len = span(count, dt).map_err(|(code, why)| error(h, func, code, why))?;
    let Some(end) = at.checked_add(len).filter(|&e| e <= room) else {
        let why = format!("{len} bytes at {at} are past the {room}-byte input");
        return Err(error(h, func, MPI_ERR_TRUNCATE, &why));
    };
    if len > 0 {
        // (Elements of a non-contiguous type may be at absolute
        // addresses from MPI_BOTTOM, null.)
        if inbuf.is_null() || (ti.contiguous && outbuf.is_null()) {
            return Err(error(h, func, MPI_ERR_BUFFER, "null buffer"));
        }
        // SAFETY: `inbuf` holds `room` bytes, at..end inside; `outbuf`
        // holds `count` elements of `dt` (caller contract).
        unsafe {
            let data = std::slice::from_raw_parts((inbuf as *const u8).add(at), len);
            unpack(data, outbuf as *mut u8, &t);
        }
    }
    Ok(end)
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
        let room = usize::try_from(outsize).unwrap_or(0);
        // SAFETY: caller contract.
        match unsafe { pack_at(h, func, inbuf, count, dt, outbuf, room, at) } {
            Ok(end) => {
                // SAFETY: an int pointer; `end` <= outsize, an int.
                unsafe { put(position, end as c_int) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, count: c_int, dt: Datatype, h: Comm) -> c_int {
        let func = "MPI_Unpack";
        if let Err(code) = comm(func, h) {
            return code;
        }
        // SAFETY: an int pointer (caller contract).
        let at = match unsafe { offset(h, func, position) } { Ok(p) => p, Err(code) => return code };
        let room = usize::try_from(insize).unwrap_or(0);
        // SAFETY: caller contract.
        match unsafe { unpack_at(h, func, inbuf, room, at, outbuf, count, dt) } {
            Ok(end) => {
                // SAFETY: an int pointer; `end` <= insize, an int.
                unsafe { put(position, end as c_int) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }
}
