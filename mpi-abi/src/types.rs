//! Datatypes and reduction operations.
//!
//! Data moves as bytes: a predefined type's size is in its handle, and a
//! derived type made by `MPI_Type_contiguous` is a run of a predefined
//! type, so no packing is needed. Reductions copy the C buffer into a
//! `Vec` of the matching Rust type (no alignment is assumed) and run
//! vpml's collectives with [`CombineOp`], which applies a predefined
//! operation or calls the C program's own function.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{STATE, UserFn};

/// What a datatype handle stands for.
#[derive(Clone, Copy)]
pub(crate) struct TypeInfo {
    /// Bytes per element.
    pub size: usize,
    /// The predefined type it is made of.
    pub base: Datatype,
    /// How many `base` elements one element holds.
    pub per: usize,
}

/// Size of a predefined datatype, if `dt` is one.
fn predefined_size(dt: Datatype) -> Option<usize> {
    let h = dt as u32;
    if h >> 24 == 0x4c {
        return Some(((h >> 8) & 0xff) as usize);
    }
    match dt {
        MPI_FLOAT_INT | MPI_SHORT_INT => Some(8),
        MPI_DOUBLE_INT | MPI_LONG_INT => Some(16),
        MPI_LONG_DOUBLE_INT => Some(32),
        _ => None,
    }
}

/// The datatype behind handle `dt`.
pub(crate) fn info(dt: Datatype) -> Option<TypeInfo> {
    if let Some(size) = predefined_size(dt) {
        return Some(TypeInfo {
            size,
            base: dt,
            per: 1,
        });
    }
    let h = dt as u32;
    if h & 0xff00_0000 != USER_TYPE_KIND {
        return None;
    }
    let d = STATE.with(|s| {
        s.borrow()
            .types
            .get((h & 0xff_ffff) as usize)
            .copied()
            .flatten()
    })?;
    let base = predefined_size(d.base)?;
    Some(TypeInfo {
        size: base * d.count,
        base: d.base,
        per: d.count,
    })
}

/// Bytes of `count` elements of `dt`.
pub(crate) fn span(count: c_int, dt: Datatype) -> Result<usize, (c_int, &'static str)> {
    let t = info(dt).ok_or((MPI_ERR_TYPE, "invalid datatype"))?;
    let n = usize::try_from(count).map_err(|_| (MPI_ERR_COUNT, "negative count"))?;
    n.checked_mul(t.size)
        .ok_or((MPI_ERR_COUNT, "count too large"))
}

/// The C buffer of `count` elements of `dt` at `buf`, as bytes.
///
/// # Safety
/// `buf` holds `count` elements of `dt` (the C caller's contract).
pub(crate) unsafe fn bytes<'a>(
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
) -> Result<&'a mut [u8], (c_int, &'static str)> {
    let n = span(count, dt)?;
    if n == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err((MPI_ERR_BUFFER, "null buffer"));
    }
    // SAFETY: caller contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, n) })
}

/// A reduction operation as the C program named it.
#[derive(Clone, Copy)]
pub(crate) struct CombineOp {
    op: Op,
    user: Option<UserFn>,
    dt: Datatype,
}

impl CombineOp {
    /// The operation `op` over elements of `dt`, if it applies to them.
    pub(crate) fn new(op: Op, dt: Datatype) -> Result<CombineOp, (c_int, &'static str)> {
        let h = op as u32;
        if h & 0xff00_0000 == USER_OP_KIND {
            let f = STATE.with(|s| {
                s.borrow()
                    .ops
                    .get((h & 0xff_ffff) as usize)
                    .copied()
                    .flatten()
            });
            return match f {
                Some(f) => Ok(CombineOp {
                    op,
                    user: Some(f),
                    dt,
                }),
                None => Err((MPI_ERR_OP, "invalid operation")),
            };
        }
        let base = info(dt).ok_or((MPI_ERR_TYPE, "invalid datatype"))?.base;
        let float = matches!(base, MPI_FLOAT | MPI_DOUBLE);
        let pair = matches!(
            base,
            MPI_2INT | MPI_FLOAT_INT | MPI_DOUBLE_INT | MPI_LONG_INT
        );
        let ok = match op {
            MPI_MAX | MPI_MIN | MPI_SUM | MPI_PROD => !pair,
            MPI_LAND | MPI_LOR | MPI_LXOR | MPI_BAND | MPI_BOR | MPI_BXOR => !pair && !float,
            MPI_MINLOC | MPI_MAXLOC => pair,
            MPI_REPLACE | MPI_NO_OP => true,
            _ => return Err((MPI_ERR_OP, "invalid operation")),
        };
        if !ok {
            return Err((MPI_ERR_OP, "operation not defined for this datatype"));
        }
        Ok(CombineOp { op, user: None, dt })
    }
}

/// Element types reductions run on.
pub(crate) trait Element: vpml::Pod + PartialOrd {
    fn combine(op: Op, a: Self, b: Self) -> Self;
}

macro_rules! int_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    MPI_MAX => if b > a { b } else { a },
                    MPI_MIN => if b < a { b } else { a },
                    MPI_SUM => a.wrapping_add(b),
                    MPI_PROD => a.wrapping_mul(b),
                    MPI_LAND => ((a != 0) && (b != 0)) as $t,
                    MPI_LOR => ((a != 0) || (b != 0)) as $t,
                    MPI_LXOR => ((a != 0) != (b != 0)) as $t,
                    MPI_BAND => a & b,
                    MPI_BOR => a | b,
                    MPI_BXOR => a ^ b,
                    MPI_NO_OP => a,
                    _ => b, // MPI_REPLACE
                }
            }
        }
    )*};
}
int_element!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    MPI_MAX => if b > a { b } else { a },
                    MPI_MIN => if b < a { b } else { a },
                    MPI_SUM => a + b,
                    MPI_PROD => a * b,
                    MPI_NO_OP => a,
                    _ => b, // MPI_REPLACE (others were refused)
                }
            }
        }
    )*};
}
float_element!(f32, f64);

/// A (value, index) pair of `MINLOC`/`MAXLOC`, laid out as MPICH's pair
/// types (`MPI_2INT`, `MPI_FLOAT_INT`, `MPI_DOUBLE_INT`, `MPI_LONG_INT`).
macro_rules! pair_element {
    ($($name:ident($v:ty, $pad:ty)),*) => {$(
        #[repr(C)]
        #[derive(Clone, Copy, PartialEq, PartialOrd, Default)]
        pub(crate) struct $name {
            value: $v,
            index: i32,
            pad: $pad,
        }
        // SAFETY: plain integers and floats with explicit padding fields:
        // every bit pattern is valid and there are no implicit holes.
        unsafe impl bytemuck::Zeroable for $name {}
        // SAFETY: as above.
        unsafe impl bytemuck::Pod for $name {}
        impl Element for $name {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                let take_b = match op {
                    MPI_MAXLOC => b.value > a.value || (b.value == a.value && b.index < a.index),
                    MPI_MINLOC => b.value < a.value || (b.value == a.value && b.index < a.index),
                    MPI_NO_OP => false,
                    _ => true, // MPI_REPLACE
                };
                if take_b { b } else { a }
            }
        }
    )*};
}
pair_element!(
    IntInt(i32, ()),
    FloatInt(f32, ()),
    DoubleInt(f64, u32),
    LongInt(i64, u32)
);

impl<T: Element> vpml::Op<T> for CombineOp {
    fn apply(&self, a: T, b: T) -> T {
        let Some(f) = self.user else {
            return T::combine(self.op, a, b);
        };
        // MPI's user function computes inout = in ⊕ inout, `in` being the
        // operand from lower ranks.
        let (mut a, mut b) = (a, b);
        let mut len: c_int = 1;
        let mut dt = self.dt;
        // SAFETY: a C function of the program's, given one element of the
        // datatype it was called with (its contract).
        unsafe {
            f(
                &mut a as *mut T as *mut c_void,
                &mut b as *mut T as *mut c_void,
                &mut len,
                &mut dt,
            )
        };
        b
    }
}

/// Which reduction collective to run.
#[derive(Clone, Copy)]
pub(crate) enum Reduction {
    All,
    To(usize),
    Scan,
    Exscan,
    ScatterBlock,
}

/// Run reduction `kind` of `n` elements of `dt` (`n` × size of `dt` bytes
/// in `send`; `recv` gets the result, `n`/size elements for
/// `ScatterBlock`).
pub(crate) fn reduce(
    comm: &vpml::Comm,
    kind: Reduction,
    send: &[u8],
    recv: &mut [u8],
    op: CombineOp,
    dt: Datatype,
) -> Result<(), (c_int, String)> {
    let t = info(dt).ok_or((MPI_ERR_TYPE, "invalid datatype".to_string()))?;
    macro_rules! go {
        ($t:ty) => {
            run::<$t>(comm, kind, send, recv, op)
        };
    }
    let r = match t.base {
        MPI_CHAR | MPI_SIGNED_CHAR | MPI_INT8_T => go!(i8),
        MPI_UNSIGNED_CHAR | MPI_BYTE | MPI_UINT8_T | MPI_C_BOOL | MPI_PACKED => go!(u8),
        MPI_SHORT | MPI_INT16_T => go!(i16),
        MPI_UNSIGNED_SHORT | MPI_UINT16_T => go!(u16),
        MPI_INT | MPI_INT32_T => go!(i32),
        MPI_UNSIGNED | MPI_UINT32_T | MPI_WCHAR => go!(u32),
        MPI_LONG | MPI_LONG_LONG_INT | MPI_INT64_T | MPI_AINT | MPI_OFFSET | MPI_COUNT => {
            go!(i64)
        }
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG | MPI_UINT64_T => go!(u64),
        MPI_FLOAT => go!(f32),
        MPI_DOUBLE => go!(f64),
        MPI_2INT => go!(IntInt),
        MPI_FLOAT_INT => go!(FloatInt),
        MPI_DOUBLE_INT => go!(DoubleInt),
        MPI_LONG_INT => go!(LongInt),
        _ => {
            return Err((
                MPI_ERR_TYPE,
                "reductions over this datatype are not supported".into(),
            ));
        }
    };
    r.map_err(|e| (crate::state::class_of(&e), e.to_string()))
}

fn run<T: Element>(
    comm: &vpml::Comm,
    kind: Reduction,
    send: &[u8],
    recv: &mut [u8],
    op: CombineOp,
) -> vpml::Result<()> {
    let elems = |b: &[u8]| -> Vec<T> {
        let n = b.len() / std::mem::size_of::<T>();
        let mut v = vec![<T as bytemuck::Zeroable>::zeroed(); n];
        bytemuck::cast_slice_mut::<T, u8>(&mut v)
            .copy_from_slice(&b[..n * std::mem::size_of::<T>()]);
        v
    };
    let input = elems(send);
    let mut out = elems(recv);
    match kind {
        Reduction::All => comm.allreduce(&input, &mut out, &op)?,
        Reduction::To(root) => {
            if comm.rank() == root {
                comm.reduce(&input, &mut out, &op, root)?
            } else {
                comm.reduce(&input, &mut [], &op, root)?
            }
        }
        Reduction::Scan => comm.scan(&input, &mut out, &op)?,
        Reduction::Exscan => comm.exscan(&input, &mut out, &op)?,
        Reduction::ScatterBlock => {
            let mut all = vec![<T as bytemuck::Zeroable>::zeroed(); input.len()];
            comm.allreduce(&input, &mut all, &op)?;
            let n = out.len();
            let r = comm.rank();
            out.copy_from_slice(&all[r * n..(r + 1) * n]);
        }
    }
    let n = out.len() * std::mem::size_of::<T>();
    recv[..n].copy_from_slice(bytemuck::cast_slice(&out));
    Ok(())
}
