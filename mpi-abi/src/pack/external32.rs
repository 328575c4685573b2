//! `MPI_Pack_external`, `MPI_Unpack_external`, `MPI_Pack_external_size`
//! with MPI's portable data representation `external32`: the numbers of
//! the packed form, each big-endian and of the size MPI's table gives it.
//! On x86-64 Linux those sizes are the native ones but for `long` and
//! `unsigned long` (4 bytes there, 8 here), `wchar_t` (2, 4 here) and
//! `long double` (IEEE quad there, x87 extended here). A value that does
//! not fit its narrower `external32` size is an error
//! (`MPI_ERR_CONVERSION`), not cut silently.
//!
//! Converting needs the sequence of predefined types of one element in
//! packed order ([`crate::recipes::expand`]).

use std::ffi::{CStr, c_char, c_int, c_void};

use super::{pack_at, unpack_at};
use crate::consts::*;
use crate::state::{error, put};
use crate::types::predefined_size;

/// How one number travels in `external32`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Num {
    /// Bytes and characters: as they are.
    Byte,
    /// A number of this many bytes at both ends: its bytes reversed.
    Swap(usize),
    /// An integer narrower in `external32` (`long`, `wchar_t`): (native
    /// bytes, external bytes, signed).
    Narrow(usize, usize, bool),
    /// `long double`: x87 extended here, IEEE binary128 there.
    Quad,
    /// C's `bool`: 0 or 1 there.
    Bool,
}

impl Num {
    fn native(self) -> usize {
        match self {
            Num::Byte | Num::Bool => 1,
            Num::Swap(n) | Num::Narrow(n, _, _) => n,
            Num::Quad => 16,
        }
    }

    fn external(self) -> usize {
        match self {
            Num::Byte | Num::Bool => 1,
            Num::Swap(n) | Num::Narrow(_, n, _) => n,
            Num::Quad => 16,
        }
    }

    /// Write native `from` as `external32` into `to`; false if the value
    /// does not fit.
    fn pack(self, from: &[u8], to: &mut [u8]) -> bool {
        match self {
            Num::Byte => to.copy_from_slice(from),
            Num::Bool => to[0] = u8::from(from[0] != 0),
            Num::Swap(_) => {
                to.copy_from_slice(from);
                to.reverse();
            }
            Num::Narrow(_, n, signed) => {
                let v = le_value(from, signed);
                let bits = 8 * n as u32;
                let fits = if signed {
                    (-(1i128 << (bits - 1))..(1i128 << (bits - 1))).contains(&v)
                } else {
                    (0..(1i128 << bits)).contains(&v)
                };
                if !fits {
                    return false;
                }
                to.copy_from_slice(&v.to_be_bytes()[16 - n..]);
            }
            Num::Quad => to.copy_from_slice(&x87_to_quad(from).to_be_bytes()),
        }
        true
    }

    /// Write `external32` `from` as a native number into `to`.
    fn unpack(self, from: &[u8], to: &mut [u8]) {
        match self {
            Num::Byte | Num::Bool => to.copy_from_slice(from),
            Num::Swap(_) => {
                to.copy_from_slice(from);
                to.reverse();
            }
            Num::Narrow(native, _, signed) => {
                let mut be = [0u8; 16];
                be[16 - from.len()..].copy_from_slice(from);
                let mut v = i128::from_be_bytes(be);
                let bits = 8 * from.len() as u32;
                if signed && v >= 1i128 << (bits - 1) {
                    v -= 1i128 << bits;
                }
                to.copy_from_slice(&v.to_le_bytes()[..native]);
            }
            Num::Quad => {
                let mut be = [0u8; 16];
                be.copy_from_slice(from);
                to.copy_from_slice(&quad_to_x87(u128::from_be_bytes(be)));
            }
        }
    }
}

/// A little-endian integer of 1 to 8 bytes.
fn le_value(bytes: &[u8], signed: bool) -> i128 {
    let mut le = [0u8; 16];
    le[..bytes.len()].copy_from_slice(bytes);
    let v = i128::from_le_bytes(le);
    let bits = 8 * bytes.len() as u32;
    if signed && v >= 1i128 << (bits - 1) {
        v - (1i128 << bits)
    } else {
        v
    }
}

/// An x87 extended number (10 bytes of its 16, little-endian) as IEEE
/// binary128: the sign and the 15-bit exponent carry over (same bias),
/// the fraction is the 63 bits after the explicit integer bit, at the
/// top of the 112. Exact, denormals, infinities and NaNs included.
fn x87_to_quad(from: &[u8]) -> u128 {
    let mut m = [0u8; 8];
    m.copy_from_slice(&from[..8]);
    let mantissa = u64::from_le_bytes(m);
    let sign_exp = u16::from_le_bytes([from[8], from[9]]);
    (u128::from(sign_exp) << 112) | (u128::from(mantissa & (u64::MAX >> 1)) << 49)
}

/// The reverse of [`x87_to_quad`] (the fraction's last 49 bits, which x87
/// cannot hold, are dropped), as the 16 bytes of a `long double`.
fn quad_to_x87(q: u128) -> [u8; 16] {
    let sign_exp = (q >> 112) as u16;
    let fraction = ((q >> 49) as u64) & (u64::MAX >> 1);
    let integer_bit = if sign_exp & 0x7fff != 0 {
        1u64 << 63
    } else {
        0
    };
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&(fraction | integer_bit).to_le_bytes());
    out[8..10].copy_from_slice(&sign_exp.to_le_bytes());
    out
}

/// Runs of numbers in packed order: (kind, how many).
type Nums = Vec<(Num, usize)>;

/// Add `n` numbers of `kind` to `runs`, merging with the last run.
fn push(runs: &mut Nums, kind: Num, n: usize) {
    if n == 0 {
        return;
    }
    match runs.last_mut() {
        Some((k, c)) if *k == kind => *c += n,
        _ => runs.push((kind, n)),
    }
}

/// The numbers of one element of predefined type `dt`.
fn predefined_nums(dt: Datatype) -> Result<Nums, String> {
    let parts: &[Num] = match dt {
        MPI_BYTE | MPI_PACKED | MPI_CHAR | MPI_SIGNED_CHAR | MPI_UNSIGNED_CHAR | MPI_CHARACTER => {
            &[Num::Byte]
        }
        MPI_C_BOOL | MPI_CXX_BOOL => &[Num::Bool],
        MPI_WCHAR => &[Num::Narrow(4, 2, false)],
        MPI_LONG => &[Num::Narrow(8, 4, true)],
        MPI_UNSIGNED_LONG => &[Num::Narrow(8, 4, false)],
        MPI_LONG_DOUBLE => &[Num::Quad],
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => &[Num::Quad, Num::Quad],
        MPI_LONG_DOUBLE_INT => &[Num::Quad, Num::Swap(4)],
        MPI_LONG_INT => &[Num::Narrow(8, 4, true), Num::Swap(4)],
        MPI_REAL16 | MPI_COMPLEX32 => {
            return Err("REAL*16 has no external32 form in vpml".into());
        }
        MPI_FLOAT_INT | MPI_2INT | MPI_2INTEGER | MPI_2REAL => &[Num::Swap(4), Num::Swap(4)],
        MPI_DOUBLE_INT => &[Num::Swap(8), Num::Swap(4)],
        MPI_SHORT_INT => &[Num::Swap(2), Num::Swap(4)],
        MPI_2DOUBLE_PRECISION => &[Num::Swap(8), Num::Swap(8)],
        MPI_C_FLOAT_COMPLEX | MPI_CXX_FLOAT_COMPLEX | MPI_COMPLEX | MPI_COMPLEX8 => {
            &[Num::Swap(4), Num::Swap(4)]
        }
        MPI_C_DOUBLE_COMPLEX | MPI_CXX_DOUBLE_COMPLEX | MPI_DOUBLE_COMPLEX | MPI_COMPLEX16 => {
            &[Num::Swap(8), Num::Swap(8)]
        }
        _ => match predefined_size(dt) {
            // MPI_LB, MPI_UB: markers, no data.
            Some(0) => return Ok(Nums::new()),
            Some(1) => &[Num::Byte],
            Some(size) => return Ok(vec![(Num::Swap(size), 1)]),
            None => return Err("invalid datatype".into()),
        },
    };
    let mut runs = Nums::new();
    for &p in parts {
        push(&mut runs, p, 1);
    }
    Ok(runs)
}

/// The numbers of one element of `dt`, in packed order.
fn nums(dt: Datatype) -> Result<Nums, String> {
    crate::recipes::expand(dt, &predefined_nums)
}

/// Bytes of `count` elements of these numbers in `external32`.
fn external_size(runs: &Nums, count: usize) -> Option<usize> {
    let one = runs.iter().try_fold(0usize, |n, &(k, c)| {
        n.checked_add(k.external().checked_mul(c)?)
    })?;
    one.checked_mul(count)
}

/// Convert `count` elements of these numbers packed natively in `from`
/// into `external32` (`pack`) or back, into `to`. An error names the
/// first number that does not fit.
fn convert(
    runs: &Nums,
    count: usize,
    from: &[u8],
    to: &mut [u8],
    pack: bool,
) -> Result<(), String> {
    let (mut i, mut o, mut index) = (0usize, 0usize, 0usize);
    for _ in 0..count {
        for &(kind, n) in runs {
            let (a, b) = if pack {
                (kind.native(), kind.external())
            } else {
                (kind.external(), kind.native())
            };
            for _ in 0..n {
                let (Some(src), Some(dst)) = (from.get(i..i + a), to.get_mut(o..o + b)) else {
                    return Err("the type map does not match the packed size".into());
                };
                if pack {
                    if !kind.pack(src, dst) {
                        return Err(format!(
                            "number {index} does not fit the {b} bytes external32 gives its type"
                        ));
                    }
                } else {
                    kind.unpack(src, dst);
                }
                i += a;
                o += b;
                index += 1;
            }
        }
    }
    Ok(())
}

/// Check `datarep` names `external32` (MPI's only portable representation).
///
/// # Safety
/// `datarep` is null or a NUL-terminated string.
unsafe fn check_datarep(func: &str, datarep: *const c_char) -> Result<(), c_int> {
    if datarep.is_null() {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_ARG,
            "null data representation",
        ));
    }
    // SAFETY: a C string (caller contract).
    let rep = unsafe { CStr::from_ptr(datarep) }.to_string_lossy();
    if rep != "external32" {
        let why = format!("data representation '{rep}': only 'external32' is portable");
        return Err(error(MPI_COMM_WORLD, func, MPI_ERR_ARG, &why));
    }
    Ok(())
}

/// The datarep check, `*position` (an `MPI_Aint`) as a byte offset, and
/// the numbers of `dt`.
///
/// # Safety
/// `datarep` is null or a C string; `position` null or an `MPI_Aint`
/// pointer.
unsafe fn prepare(
    func: &str,
    datarep: *const c_char,
    position: *mut Aint,
    dt: Datatype,
    count: c_int,
) -> Result<(usize, Nums, usize), c_int> {
    // SAFETY: caller contract.
    unsafe { check_datarep(func, datarep)? };
    // SAFETY: caller contract.
    let at = unsafe { position.as_ref().copied() }
        .and_then(|p| usize::try_from(p).ok())
        .ok_or_else(|| {
            error(
                MPI_COMM_WORLD,
                func,
                MPI_ERR_ARG,
                "null or negative position",
            )
        })?;
    let runs = nums(dt).map_err(|why| {
        error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_TYPE,
            &format!("external32: {why}"),
        )
    })?;
    let count = usize::try_from(count)
        .map_err(|_| error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, "negative count"))?;
    Ok((at, runs, count))
}

export! {
    fn MPI_Pack_external_size / PMPI_Pack_external_size(datarep: *const c_char, count: c_int, dt: Datatype, size: *mut Aint) -> c_int {
        let func = "MPI_Pack_external_size";
        let mut zero: Aint = 0;
        // SAFETY: a C string (caller contract); `zero` a position.
        let (_, runs, count) = match unsafe { prepare(func, datarep, &mut zero, dt, count) } {
            Ok(p) => p,
            Err(code) => return code,
        };
        match external_size(&runs, count).and_then(|n| Aint::try_from(n).ok()) {
            // SAFETY: an MPI_Aint pointer (caller contract).
            Some(n) => unsafe { put(size, n) },
            None => return error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, "count too large"),
        }
        MPI_SUCCESS
    }

    fn MPI_Pack_external / PMPI_Pack_external(datarep: *const c_char, inbuf: *const c_void, count: c_int, dt: Datatype, outbuf: *mut c_void, outsize: Aint, position: *mut Aint) -> c_int {
        let func = "MPI_Pack_external";
        // SAFETY: a C string and an MPI_Aint pointer (caller contract).
        let (at, runs, n) = match unsafe { prepare(func, datarep, position, dt, count) } {
            Ok(p) => p,
            Err(code) => return code,
        };
        let room = usize::try_from(outsize).unwrap_or(0);
        let Some(len) = external_size(&runs, n) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, "count too large");
        };
        let Some(end) = at.checked_add(len).filter(|&e| e <= room) else {
            let why = format!("{len} bytes at {at} do not fit {room}");
            return error(MPI_COMM_WORLD, func, MPI_ERR_TRUNCATE, &why);
        };
        if len > 0 {
            if outbuf.is_null() {
                return error(MPI_COMM_WORLD, func, MPI_ERR_BUFFER, "null buffer");
            }
            // The native packed form first, then each number converted.
            let native_len = crate::types::span(count, dt).unwrap_or(0);
            let mut native = vec![0u8; native_len];
            // SAFETY: `native` holds `native_len` bytes; `inbuf` holds
            // `count` elements of `dt` (caller contract).
            if let Err(code) = unsafe { pack_at(MPI_COMM_WORLD, func, inbuf, count, dt, native.as_mut_ptr().cast(), native_len, 0) } {
                return code;
            }
            // SAFETY: `outbuf` holds `outsize` bytes (caller contract);
            // at..end lies inside.
            let out = unsafe { std::slice::from_raw_parts_mut((outbuf as *mut u8).add(at), len) };
            if let Err(why) = convert(&runs, n, &native, out, true) {
                return error(MPI_COMM_WORLD, func, MPI_ERR_CONVERSION, &why);
            }
        }
        // SAFETY: an MPI_Aint pointer (caller contract).
        unsafe { put(position, end as Aint) };
        MPI_SUCCESS
    }

    fn MPI_Unpack_external / PMPI_Unpack_external(datarep: *const c_char, inbuf: *const c_void, insize: Aint, position: *mut Aint, outbuf: *mut c_void, count: c_int, dt: Datatype) -> c_int {
        let func = "MPI_Unpack_external";
        // SAFETY: a C string and an MPI_Aint pointer (caller contract).
        let (at, runs, n) = match unsafe { prepare(func, datarep, position, dt, count) } {
            Ok(p) => p,
            Err(code) => return code,
        };
        let room = usize::try_from(insize).unwrap_or(0);
        let Some(len) = external_size(&runs, n) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_COUNT, "count too large");
        };
        let Some(end) = at.checked_add(len).filter(|&e| e <= room) else {
            let why = format!("{len} bytes at {at} are past the {room}-byte input");
            return error(MPI_COMM_WORLD, func, MPI_ERR_TRUNCATE, &why);
        };
        if len > 0 {
            if inbuf.is_null() {
                return error(MPI_COMM_WORLD, func, MPI_ERR_BUFFER, "null buffer");
            }
            // SAFETY: `inbuf` holds `insize` bytes, at..end inside.
            let input = unsafe { std::slice::from_raw_parts((inbuf as *const u8).add(at), len) };
            let native_len = crate::types::span(count, dt).unwrap_or(0);
            let mut native = vec![0u8; native_len];
            if let Err(why) = convert(&runs, n, input, &mut native, false) {
                return error(MPI_COMM_WORLD, func, MPI_ERR_CONVERSION, &why);
            }
            // SAFETY: `native` holds `native_len` bytes; `outbuf` holds
            // `count` elements of `dt` (caller contract).
            if let Err(code) = unsafe { unpack_at(MPI_COMM_WORLD, func, native.as_ptr().cast(), native_len, 0, outbuf, count, dt) } {
                return code;
            }
        }
        // SAFETY: an MPI_Aint pointer (caller contract).
        unsafe { put(position, end as Aint) };
        MPI_SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(kind: Num, native: &[u8]) -> Vec<u8> {
        let mut ext = vec![0u8; kind.external()];
        assert!(kind.pack(native, &mut ext));
        let mut back = vec![0u8; kind.native()];
        kind.unpack(&ext, &mut back);
        assert_eq!(back, native);
        ext
    }

    #[test]
    fn long_is_four_big_endian_bytes_and_comes_back_sign_extended() {
        let ext = round_trip(Num::Narrow(8, 4, true), &(-2i64).to_le_bytes());
        assert_eq!(ext, [0xff, 0xff, 0xff, 0xfe]);
        let ext = round_trip(Num::Narrow(8, 4, false), &4_000_000_000u64.to_le_bytes());
        assert_eq!(ext, 4_000_000_000u32.to_be_bytes());
    }

    #[test]
    fn a_long_too_large_for_four_bytes_is_refused() {
        let mut ext = [0u8; 4];
        assert!(!Num::Narrow(8, 4, true).pack(&(1i64 << 40).to_le_bytes(), &mut ext));
        assert!(!Num::Narrow(8, 4, false).pack(&(-1i64).to_le_bytes(), &mut ext));
    }

    #[test]
    fn long_double_becomes_ieee_quad() {
        // 1.0L: exponent 0x3fff, integer bit set; -2.5L.
        let mut one = [0u8; 16];
        one[7] = 0x80;
        one[8..10].copy_from_slice(&0x3fffu16.to_le_bytes());
        let ext = round_trip(Num::Quad, &one);
        assert_eq!(ext[..3], [0x3f, 0xff, 0]);
        let mut m = [0u8; 16];
        m[..8].copy_from_slice(&0xa000_0000_0000_0000u64.to_le_bytes());
        m[8..10].copy_from_slice(&0xc000u16.to_le_bytes());
        let ext = round_trip(Num::Quad, &m);
        assert_eq!(ext[..3], [0xc0, 0x00, 0x40]);
    }

    #[test]
    fn bool_is_zero_or_one() {
        let mut ext = [0u8; 1];
        assert!(Num::Bool.pack(&[2], &mut ext));
        assert_eq!(ext, [1]);
    }

    #[test]
    fn pair_and_complex_types_convert_each_part() {
        let runs = predefined_nums(MPI_DOUBLE_INT).unwrap();
        let native: Vec<u8> = (1..=12).collect();
        let mut ext = vec![0u8; 12];
        convert(&runs, 1, &native, &mut ext, true).unwrap();
        assert_eq!(ext, [8, 7, 6, 5, 4, 3, 2, 1, 12, 11, 10, 9]);
        assert_eq!(
            predefined_nums(MPI_C_FLOAT_COMPLEX).unwrap(),
            [(Num::Swap(4), 2)]
        );
    }

    #[test]
    fn a_buffer_shorter_than_the_type_map_is_an_error() {
        let runs = predefined_nums(MPI_DOUBLE).unwrap();
        let mut out = [0u8; 8];
        assert!(convert(&runs, 1, &[0u8; 6], &mut out, true).is_err());
    }
}
