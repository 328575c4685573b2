//! Reductions: the operation a C program names (`CombineOp`), and running
//! a reduction collective with it, through vpml's collectives for the
//! predefined operations or by gathering and folding for user ones.

use std::ffi::{c_int, c_void};

use super::datatype::{info, layout, pack, unpack};
#[cfg(target_arch = "x86_64")]
use super::element::LongDoubleInt;
use super::element::{
    ComplexF32, ComplexF64, DoubleDouble, DoubleInt, Element, FloatFloat, FloatInt, IntInt,
    LongInt, ShortInt,
};
#[cfg(target_arch = "x86_64")]
use super::long_double::{ComplexLongDouble, LongDouble};
use crate::consts::*;
use crate::state::{STATE, UserFunction, slot_of};

/// A reduction operation as the C program named it.
#[derive(Clone, Copy)]
pub(crate) struct CombineOp {
    op: Op,
    user: Option<UserFunction>,
}

impl CombineOp {
    /// Is it one of MPI's operations (not the program's)?
    pub(crate) fn is_predefined(&self) -> bool {
        self.user.is_none()
    }

    /// The operation `op` over elements of `dt`, if it applies to them.
    ///
    /// Inlined, with the checks out of line answering in one register: a
    /// result returned through memory was read back with a load wider
    /// than the stores that made it, which waits for every older store
    /// (a quarter of `MPI_Fetch_and_op`'s time on a shared-memory window).
    #[inline(always)]
    pub(crate) fn new(op: Op, dt: Datatype) -> Result<CombineOp, (c_int, &'static str)> {
        if slot_of(op, USER_OP_KIND).is_some() {
            return Self::user(op);
        }
        match refusal(op, dt) {
            None => Ok(CombineOp { op, user: None }),
            Some(&why) => Err(why),
        }
    }

    /// The program's operation `op` (a slot of the operation table).
    #[cold]
    #[inline(never)]
    fn user(op: Op) -> Result<CombineOp, (c_int, &'static str)> {
        let f = slot_of(op, USER_OP_KIND)
            .and_then(|i| STATE.with(|s| s.borrow().ops.get(i).copied().flatten()))
            .map(|(f, _)| f);
        match f {
            Some(f) => Ok(CombineOp { op, user: Some(f) }),
            None => Err((MPI_ERR_OP, "invalid operation")),
        }
    }
}

/// Why MPI's operation `op` does not apply to elements of `dt`, if it
/// does not.
#[inline(never)]
fn refusal(op: Op, dt: Datatype) -> Option<&'static (c_int, &'static str)> {
    let Some(info) = info(dt) else {
        return Some(&(MPI_ERR_TYPE, "invalid datatype"));
    };
    let Some(base) = info.base else {
        return Some(&(
            MPI_ERR_TYPE,
            "reductions need a datatype of one predefined type",
        ));
    };
    let float = matches!(
        base,
        MPI_FLOAT
            | MPI_DOUBLE
            | MPI_LONG_DOUBLE
            | MPI_REAL
            | MPI_REAL4
            | MPI_REAL8
            | MPI_DOUBLE_PRECISION
    );
    let complex = matches!(
        base,
        MPI_C_FLOAT_COMPLEX
            | MPI_C_DOUBLE_COMPLEX
            | MPI_CXX_FLOAT_COMPLEX
            | MPI_CXX_DOUBLE_COMPLEX
            | MPI_C_LONG_DOUBLE_COMPLEX
            | MPI_CXX_LONG_DOUBLE_COMPLEX
            | MPI_COMPLEX
            | MPI_DOUBLE_COMPLEX
            | MPI_COMPLEX8
            | MPI_COMPLEX16
    );
    let pair = super::is_pair(base);
    let ok = match op {
        MPI_SUM | MPI_PROD => !pair,
        MPI_MAX | MPI_MIN => !pair && !complex,
        // Logical operations on floats too, as MPICH allows.
        MPI_LAND | MPI_LOR | MPI_LXOR => !pair && !complex,
        MPI_BAND | MPI_BOR | MPI_BXOR => !pair && !float && !complex,
        MPI_MINLOC | MPI_MAXLOC => pair,
        MPI_REPLACE | MPI_NO_OP => true,
        _ => return Some(&(MPI_ERR_OP, "invalid operation")),
    };
    (!ok).then_some(&(MPI_ERR_OP, "operation not defined for this datatype"))
}

impl<T: Element> vpml::Op<T> for CombineOp {
    fn apply(&self, a: T, b: T) -> T {
        // User operations never get here (see `reduce`).
        T::combine(self.op, a, b)
    }
}

/// The element type a predefined datatype reduces as.
#[derive(Clone, Copy)]
enum ElementKind {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    IntInt,
    ShortInt,
    FloatInt,
    DoubleInt,
    LongInt,
    FloatFloat,
    DoubleDouble,
    ComplexF32,
    ComplexF64,
    #[cfg(target_arch = "x86_64")]
    LongDouble,
    #[cfg(target_arch = "x86_64")]
    LongDoubleInt,
    #[cfg(target_arch = "x86_64")]
    ComplexLongDouble,
}

/// The element type of predefined datatype `base`, if it reduces.
fn element_of(base: Datatype) -> Option<ElementKind> {
    use ElementKind::*;
    Some(match base {
        MPI_CHAR | MPI_SIGNED_CHAR | MPI_INT8_T | MPI_INTEGER1 => I8,
        MPI_UNSIGNED_CHAR | MPI_BYTE | MPI_UINT8_T | MPI_C_BOOL | MPI_CXX_BOOL | MPI_PACKED => U8,
        MPI_SHORT | MPI_INT16_T | MPI_INTEGER2 => I16,
        MPI_UNSIGNED_SHORT | MPI_UINT16_T => U16,
        MPI_INT | MPI_INT32_T | MPI_INTEGER | MPI_INTEGER4 | MPI_LOGICAL => I32,
        MPI_UNSIGNED | MPI_UINT32_T | MPI_WCHAR => U32,
        MPI_LONG | MPI_LONG_LONG_INT | MPI_INT64_T | MPI_AINT | MPI_OFFSET | MPI_COUNT
        | MPI_INTEGER8 => I64,
        MPI_UNSIGNED_LONG | MPI_UNSIGNED_LONG_LONG | MPI_UINT64_T => U64,
        MPI_FLOAT | MPI_REAL | MPI_REAL4 => F32,
        MPI_DOUBLE | MPI_DOUBLE_PRECISION | MPI_REAL8 => F64,
        MPI_2INT | MPI_2INTEGER => IntInt,
        MPI_SHORT_INT => ShortInt,
        MPI_FLOAT_INT => FloatInt,
        MPI_DOUBLE_INT => DoubleInt,
        MPI_LONG_INT => LongInt,
        MPI_2REAL => FloatFloat,
        MPI_2DOUBLE_PRECISION => DoubleDouble,
        MPI_C_FLOAT_COMPLEX | MPI_CXX_FLOAT_COMPLEX | MPI_COMPLEX | MPI_COMPLEX8 => ComplexF32,
        MPI_C_DOUBLE_COMPLEX | MPI_CXX_DOUBLE_COMPLEX | MPI_DOUBLE_COMPLEX | MPI_COMPLEX16 => {
            ComplexF64
        }
        #[cfg(target_arch = "x86_64")]
        MPI_LONG_DOUBLE => LongDouble,
        #[cfg(target_arch = "x86_64")]
        MPI_LONG_DOUBLE_INT => LongDoubleInt,
        #[cfg(target_arch = "x86_64")]
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => ComplexLongDouble,
        _ => return None,
    })
}

/// Which reduction collective to run.
pub(crate) enum Reduction {
    All,
    To(usize),
    Scan,
    Exscan,
    /// Reduce-scatter: rank `i` keeps the result's elements (of the
    /// datatype) `bounds[i]..bounds[i + 1]` (`bounds` has one entry per
    /// rank and a last one, the whole count).
    Scatter {
        bounds: Vec<usize>,
    },
    /// A reduce on an intercommunicator: the remote group's contributions
    /// to the root (`Here`), from the other group (`Remote`).
    Inter(vpml::InterRoot),
}

impl Reduction {
    /// The reduce-scatter of `counts[i]` elements to each rank `i`.
    pub(crate) fn scatter(counts: impl Iterator<Item = usize>) -> Reduction {
        let bounds = std::iter::once(0)
            .chain(counts.scan(0, |at, c| {
                *at += c;
                Some(*at)
            }))
            .collect();
        Reduction::Scatter { bounds }
    }
}

/// Run reduction `kind` over `count` elements of `dt`, packed in `send`
/// (`None`: in place, the input is in `recv`); `recv` (packed too) gets
/// the result (for `Scatter`, this rank's part of it).
pub(crate) fn reduce(
    comm: &vpml::Comm,
    kind: Reduction,
    send: Option<&[u8]>,
    recv: &mut [u8],
    op: CombineOp,
    dt: Datatype,
    count: usize,
) -> Result<(), (c_int, String)> {
    if comm.is_inter() && matches!(kind, Reduction::Scan | Reduction::Exscan) {
        return Err((
            MPI_ERR_COMM,
            "scans are not defined on an intercommunicator".into(),
        ));
    }
    if let Some(f) = op.user {
        let copy;
        let send = match send {
            Some(s) => s,
            None => {
                copy = recv.to_vec();
                &copy
            }
        };
        return user_reduce(comm, kind, send, recv, f, dt, count)
            .map_err(|e| (crate::state::class_of(&e), e.to_string()));
    }
    let t = info(dt).ok_or_else(|| (MPI_ERR_TYPE, "invalid datatype".to_string()))?;
    let Some(base) = t.base else {
        return Err((
            MPI_ERR_TYPE,
            "reductions need a datatype of one predefined type".into(),
        ));
    };
    // From here on elements are the base type's: one of `dt` holds `per`.
    let kind = match kind {
        Reduction::Scatter { bounds } => Reduction::Scatter {
            bounds: bounds.iter().map(|b| b * t.per).collect(),
        },
        other => other,
    };
    match super::padded_pair(base) {
        Some(pair) => {
            // The elements are the C structs, padding and all: expanded
            // from the packed pairs, and the result packed back.
            let send = send.map(|s| expand(s, &pair));
            let mut out = expand(recv, &pair);
            typed(comm, kind, send.as_deref(), &mut out, op, base)?;
            let packed = shrink(&out, &pair);
            let m = packed.len().min(recv.len());
            recv[..m].copy_from_slice(&packed[..m]);
            Ok(())
        }
        None => typed(comm, kind, send, recv, op, base),
    }
}

/// [`reduce`] of a predefined datatype that is not a padded pair, with a
/// predefined operation on an intracommunicator (the caller checked):
/// straight to the element loops.
pub(crate) fn reduce_predefined(
    comm: &vpml::Comm,
    kind: Reduction,
    send: &[u8],
    recv: &mut [u8],
    op: CombineOp,
    dt: Datatype,
) -> Result<(), (c_int, String)> {
    typed(comm, kind, Some(send), recv, op, dt)
}

/// Packed pairs of `pair` (a padded pair type) as the C structs.
fn expand(packed: &[u8], pair: &crate::state::DerivedType) -> Vec<u8> {
    let size: usize = pair.blocks.iter().map(|b| b.1).sum();
    let n = packed.len() / size.max(1);
    let mut out = vec![0u8; n * pair.extent as usize];
    // SAFETY: `out` holds `n` elements of `pair`, which `packed` fills.
    unsafe { unpack(&packed[..n * size], out.as_mut_ptr(), pair) };
    out
}

/// C structs of `pair` packed (the inverse of [`expand`]).
fn shrink(structs: &[u8], pair: &crate::state::DerivedType) -> Vec<u8> {
    let n = structs.len() / (pair.extent as usize).max(1);
    // SAFETY: `structs` holds `n` elements of `pair`.
    unsafe { pack(structs.as_ptr(), n, pair) }
}

/// Run reduction `kind` over elements of predefined type `base`.
fn typed(
    comm: &vpml::Comm,
    kind: Reduction,
    send: Option<&[u8]>,
    recv: &mut [u8],
    op: CombineOp,
    base: Datatype,
) -> Result<(), (c_int, String)> {
    // The predefined operations are fixed at compile time, so that the
    // element loops of the reduction compile to vector code.
    macro_rules! go {
        ($t:ty) => {
            match op.op {
                MPI_SUM => run::<$t, _>(comm, kind, send, recv, &Fixed::<MPI_SUM>),
                MPI_PROD => run::<$t, _>(comm, kind, send, recv, &Fixed::<MPI_PROD>),
                MPI_MAX => run::<$t, _>(comm, kind, send, recv, &Fixed::<MPI_MAX>),
                MPI_MIN => run::<$t, _>(comm, kind, send, recv, &Fixed::<MPI_MIN>),
                _ => run::<$t, _>(comm, kind, send, recv, &op),
            }
        };
    }
    let r = match element_of(base) {
        Some(ElementKind::I8) => go!(i8),
        Some(ElementKind::U8) => go!(u8),
        Some(ElementKind::I16) => go!(i16),
        Some(ElementKind::U16) => go!(u16),
        Some(ElementKind::I32) => go!(i32),
        Some(ElementKind::U32) => go!(u32),
        Some(ElementKind::I64) => go!(i64),
        Some(ElementKind::U64) => go!(u64),
        Some(ElementKind::F32) => go!(f32),
        Some(ElementKind::F64) => go!(f64),
        Some(ElementKind::IntInt) => go!(IntInt),
        Some(ElementKind::ShortInt) => go!(ShortInt),
        Some(ElementKind::FloatInt) => go!(FloatInt),
        Some(ElementKind::DoubleInt) => go!(DoubleInt),
        Some(ElementKind::LongInt) => go!(LongInt),
        Some(ElementKind::FloatFloat) => go!(FloatFloat),
        Some(ElementKind::DoubleDouble) => go!(DoubleDouble),
        Some(ElementKind::ComplexF32) => go!(ComplexF32),
        Some(ElementKind::ComplexF64) => go!(ComplexF64),
        #[cfg(target_arch = "x86_64")]
        Some(ElementKind::LongDouble) => go!(LongDouble),
        #[cfg(target_arch = "x86_64")]
        Some(ElementKind::LongDoubleInt) => go!(LongDoubleInt),
        #[cfg(target_arch = "x86_64")]
        Some(ElementKind::ComplexLongDouble) => go!(ComplexLongDouble),
        None => {
            return Err((
                MPI_ERR_TYPE,
                "reductions over this datatype are not supported".into(),
            ));
        }
    };
    r.map_err(|e| (crate::state::class_of(&e), e.to_string()))
}

/// A user operation: every contribution is gathered, then folded in rank
/// order by the program's function, called as MPI defines it (on whole
/// buffers laid out as `dt` says, `inout = in ⊕ inout` with `in` from the
/// lower ranks). Simple and exact for any datatype; user operations trade
/// speed for that.
fn user_reduce(
    comm: &vpml::Comm,
    kind: Reduction,
    send: &[u8],
    recv: &mut [u8],
    f: UserFunction,
    dt: Datatype,
    count: usize,
) -> vpml::Result<()> {
    // Contributions come from the remote group on an intercommunicator.
    let (n, r) = if comm.is_inter() {
        (comm.remote_size(), comm.rank())
    } else {
        (comm.size(), comm.rank())
    };
    let mut all = vec![0u8; send.len() * n];
    match kind {
        Reduction::Inter(vpml::InterRoot::Elsewhere) => return Ok(()),
        Reduction::Inter(root @ vpml::InterRoot::Remote(_)) => {
            return comm.inter_gather(send, &mut [], root);
        }
        Reduction::Inter(root) => comm.inter_gather(&[], &mut all, root)?,
        _ => comm.allgather(send, &mut all)?,
    }
    let block = |i: usize| &all[i * send.len()..(i + 1) * send.len()];
    let fold = |ranks: std::ops::Range<usize>| -> vpml::Result<Vec<u8>> {
        user_fold(f, dt, dt, count, ranks.map(block))
    };
    let result = match kind {
        Reduction::All => Some(fold(0..n)?),
        Reduction::To(root) if r == root => Some(fold(0..n)?),
        Reduction::To(_) => None,
        Reduction::Inter(_) => Some(fold(0..n)?),
        Reduction::Scan => Some(fold(0..r + 1)?),
        Reduction::Exscan if r > 0 => Some(fold(0..r)?),
        Reduction::Exscan => None,
        Reduction::Scatter { bounds } => {
            let start = bounds.get(r).copied().unwrap_or(0);
            let whole = fold(0..n)?;
            let at = (start * send.len() / count.max(1)).min(whole.len());
            let end = (at + recv.len()).min(whole.len());
            Some(whole[at..end].to_vec())
        }
    };
    if let Some(v) = result {
        let m = v.len().min(recv.len());
        recv[..m].copy_from_slice(&v[..m]);
    }
    Ok(())
}

/// Fold `parts` — packed contributions of `count` elements of `dt`, in
/// rank order — with the program's function, called as MPI defines it (on
/// whole buffers laid out as `dt` says, `inout = in ⊕ inout` with `in`
/// from the lower ranks), which is shown the handle `shown` (the
/// program's, where `dt` is a private copy of it).
fn user_fold<'a>(
    f: UserFunction,
    dt: Datatype,
    shown: Datatype,
    count: usize,
    mut parts: impl Iterator<Item = &'a [u8]>,
) -> vpml::Result<Vec<u8>> {
    let Some(t) = layout(dt) else {
        return Err(vpml::Error::RequestState("invalid datatype"));
    };
    // The bytes `count` elements span, relative to the buffer's address.
    let last = count.saturating_sub(1) as isize * t.extent;
    let lo = t
        .blocks
        .iter()
        .map(|b| b.0.min(b.0 + last))
        .min()
        .unwrap_or(0)
        .min(0);
    let hi = t
        .blocks
        .iter()
        .map(|b| (b.0 + b.1 as isize).max(b.0 + last + b.1 as isize))
        .max()
        .unwrap_or(0)
        .max(0);
    let scratch = |data: &[u8]| {
        let mut v = vec![0u8; (hi - lo) as usize];
        let at = v.as_mut_ptr().wrapping_offset(-lo);
        // SAFETY: `v` covers every byte `count` elements of `t` touch
        // from `at` (computed above).
        unsafe { unpack(data, at, &t) };
        v
    };
    let Some(first) = parts.next() else {
        return Ok(Vec::new());
    };
    let mut acc = scratch(first);
    for part in parts {
        let mut next = scratch(part);
        let mut shown_here = shown;
        // SAFETY: the program's function, on two buffers of `count`
        // elements of `dt` (MPI's contract for user operations).
        unsafe {
            f.call(
                acc.as_mut_ptr().wrapping_offset(-lo) as *mut c_void,
                next.as_mut_ptr().wrapping_offset(-lo) as *mut c_void,
                count,
                t.extent,
                &mut shown_here,
            )
        };
        acc = next;
    }
    // SAFETY: as for `scratch`.
    Ok(unsafe { pack(acc.as_ptr().wrapping_offset(-lo), count, &t) })
}

/// Fold `parts` — packed contributions of `count` elements of `dt`, in
/// rank order, the lower ranks' on the left as MPI orders a reduction —
/// with `op`, into `out` (packed, as long as a part). What a nonblocking
/// reduction does once every contribution arrived. A user operation is
/// shown the handle `shown` (see [`user_fold`]).
pub(crate) fn fold_packed(
    op: CombineOp,
    dt: Datatype,
    shown: Datatype,
    count: usize,
    parts: &[&[u8]],
    out: &mut [u8],
) -> Result<(), (c_int, String)> {
    let folded = match op.user {
        Some(f) => user_fold(f, dt, shown, count, parts.iter().copied())
            .map_err(|e| (crate::state::class_of(&e), e.to_string()))?,
        None => {
            let base = info(dt).and_then(|t| t.base).ok_or_else(|| {
                (
                    MPI_ERR_TYPE,
                    "reductions need a datatype of one predefined type".to_string(),
                )
            })?;
            fold_predefined(op, base, parts)?
        }
    };
    let m = folded.len().min(out.len());
    out[..m].copy_from_slice(&folded[..m]);
    Ok(())
}

/// [`fold_packed`] for a predefined operation over elements of `base`.
fn fold_predefined(
    op: CombineOp,
    base: Datatype,
    parts: &[&[u8]],
) -> Result<Vec<u8>, (c_int, String)> {
    if let Some(pair) = super::padded_pair(base) {
        let structs: Vec<Vec<u8>> = parts.iter().map(|p| expand(p, &pair)).collect();
        let views: Vec<&[u8]> = structs.iter().map(Vec::as_slice).collect();
        return Ok(shrink(&fold_structs(op, base, &views)?, &pair));
    }
    fold_structs(op, base, parts)
}

/// `acc` combined in place with `data` — as many packed elements of
/// predefined type `base`, `acc`'s on the left — by `op`: what an
/// accumulate leaves in its target's memory.
pub(crate) fn fold_into(
    op: CombineOp,
    base: Datatype,
    acc: &mut [u8],
    data: &[u8],
) -> Result<(), (c_int, String)> {
    if op.user.is_some() || super::padded_pair(base).is_some() {
        // (A user operation sees `acc`'s elements of `base`.)
        let count = acc.len() / super::predefined_size(base).unwrap_or(1).max(1);
        let mut out = vec![0u8; acc.len()];
        fold_packed(op, base, base, count, &[acc, data], &mut out)?;
        acc.copy_from_slice(&out);
        return Ok(());
    }
    fold_structs_into(op, base, acc, data)
}

/// [`fold_predefined`] on elements as `base`'s Rust type lays them out.
fn fold_structs(
    op: CombineOp,
    base: Datatype,
    parts: &[&[u8]],
) -> Result<Vec<u8>, (c_int, String)> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(Vec::new());
    };
    let mut acc = first.to_vec();
    for part in rest {
        fold_structs_into(op, base, &mut acc, part)?;
    }
    Ok(acc)
}

/// [`fold_into`] on elements as `base`'s Rust type lays them out.
fn fold_structs_into(
    op: CombineOp,
    base: Datatype,
    acc: &mut [u8],
    data: &[u8],
) -> Result<(), (c_int, String)> {
    fn fold<T: Element, O: vpml::Op<T>>(op: &O, acc: &mut [u8], data: &[u8]) {
        let size = std::mem::size_of::<T>();
        vpml::op::wide_vectors(acc.len(), || {
            for (a, b) in acc.chunks_exact_mut(size).zip(data.chunks_exact(size)) {
                let r = op.apply(
                    bytemuck::pod_read_unaligned::<T>(a),
                    bytemuck::pod_read_unaligned::<T>(b),
                );
                a.copy_from_slice(bytemuck::bytes_of(&r));
            }
        })
    }
    // The common operations fixed at compile time, as in `typed`: their
    // element loops compile to vector code.
    fn go<T: Element>(op: CombineOp, acc: &mut [u8], data: &[u8]) {
        match op.op {
            MPI_SUM => fold::<T, _>(&Fixed::<MPI_SUM>, acc, data),
            MPI_PROD => fold::<T, _>(&Fixed::<MPI_PROD>, acc, data),
            MPI_MAX => fold::<T, _>(&Fixed::<MPI_MAX>, acc, data),
            MPI_MIN => fold::<T, _>(&Fixed::<MPI_MIN>, acc, data),
            _ => fold::<T, _>(&op, acc, data),
        }
    }
    match element_of(base) {
        Some(ElementKind::I8) => go::<i8>(op, acc, data),
        Some(ElementKind::U8) => go::<u8>(op, acc, data),
        Some(ElementKind::I16) => go::<i16>(op, acc, data),
        Some(ElementKind::U16) => go::<u16>(op, acc, data),
        Some(ElementKind::I32) => go::<i32>(op, acc, data),
        Some(ElementKind::U32) => go::<u32>(op, acc, data),
        Some(ElementKind::I64) => go::<i64>(op, acc, data),
        Some(ElementKind::U64) => go::<u64>(op, acc, data),
        Some(ElementKind::F32) => go::<f32>(op, acc, data),
        Some(ElementKind::F64) => go::<f64>(op, acc, data),
        Some(ElementKind::IntInt) => go::<IntInt>(op, acc, data),
        Some(ElementKind::ShortInt) => go::<ShortInt>(op, acc, data),
        Some(ElementKind::FloatInt) => go::<FloatInt>(op, acc, data),
        Some(ElementKind::DoubleInt) => go::<DoubleInt>(op, acc, data),
        Some(ElementKind::LongInt) => go::<LongInt>(op, acc, data),
        Some(ElementKind::FloatFloat) => go::<FloatFloat>(op, acc, data),
        Some(ElementKind::DoubleDouble) => go::<DoubleDouble>(op, acc, data),
        Some(ElementKind::ComplexF32) => go::<ComplexF32>(op, acc, data),
        Some(ElementKind::ComplexF64) => go::<ComplexF64>(op, acc, data),
        #[cfg(target_arch = "x86_64")]
        Some(ElementKind::LongDouble) => go::<LongDouble>(op, acc, data),
        #[cfg(target_arch = "x86_64")]
        Some(ElementKind::LongDoubleInt) => go::<LongDoubleInt>(op, acc, data),
        #[cfg(target_arch = "x86_64")]
        Some(ElementKind::ComplexLongDouble) => go::<ComplexLongDouble>(op, acc, data),
        None => {
            return Err((
                MPI_ERR_TYPE,
                "reductions over this datatype are not supported".into(),
            ));
        }
    }
    Ok(())
}

/// A predefined operation fixed at compile time.
struct Fixed<const OP: Op>;

impl<T: Element, const OP: Op> vpml::Op<T> for Fixed<OP> {
    #[inline(always)]
    fn apply(&self, a: T, b: T) -> T {
        T::combine(OP, a, b)
    }
}

/// The elements in `bytes` (a whole number of them), in an aligned copy.
fn copied<T: Element>(bytes: &[u8]) -> Vec<T> {
    let mut v = vec![<T as bytemuck::Zeroable>::zeroed(); bytes.len() / std::mem::size_of::<T>()];
    bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
    v
}

/// `bytes` as elements of `T`: in place when aligned, else copied.
fn elems<T: Element>(bytes: &[u8]) -> std::borrow::Cow<'_, [T]> {
    let n = bytes.len() / std::mem::size_of::<T>();
    let bytes = &bytes[..n * std::mem::size_of::<T>()];
    match bytemuck::try_cast_slice::<u8, T>(bytes) {
        Ok(v) => std::borrow::Cow::Borrowed(v),
        Err(_) => std::borrow::Cow::Owned(copied(bytes)),
    }
}

fn run<T: Element, O: vpml::Op<T>>(
    comm: &vpml::Comm,
    kind: Reduction,
    send: Option<&[u8]>,
    recv: &mut [u8],
    op: &O,
) -> vpml::Result<()> {
    let n = recv.len() / std::mem::size_of::<T>() * std::mem::size_of::<T>();
    if let Ok(out) = bytemuck::try_cast_slice_mut::<u8, T>(&mut recv[..n]) {
        return run_on::<T, O>(comm, kind, send, out, op);
    }
    // An unaligned result buffer: reduce into an aligned copy.
    let mut out: Vec<T> = copied(&recv[..n]);
    run_on::<T, O>(comm, kind, send, &mut out, op)?;
    recv[..n].copy_from_slice(bytemuck::cast_slice(&out));
    Ok(())
}

/// Reduction `kind` of `send` (`None`: in `out`) into `out`.
fn run_on<T: Element, O: vpml::Op<T>>(
    comm: &vpml::Comm,
    kind: Reduction,
    send: Option<&[u8]>,
    out: &mut [T],
    op: &O,
) -> vpml::Result<()> {
    let input: std::borrow::Cow<'_, [T]> = match send {
        Some(s) => elems(s),
        None if matches!(kind, Reduction::All) => std::borrow::Cow::Borrowed(&[]),
        None => std::borrow::Cow::Owned(out.to_vec()),
    };
    match kind {
        Reduction::All => {
            if send.is_some() {
                out.copy_from_slice(&input);
            }
            comm.allreduce_in_place(out, op)?
        }
        Reduction::To(root) => {
            if comm.rank() == root {
                comm.reduce(&input, out, op, root)?
            } else {
                comm.reduce(&input, &mut [], op, root)?
            }
        }
        Reduction::Scan => comm.scan(&input, out, op)?,
        Reduction::Exscan => comm.exscan(&input, out, op)?,
        Reduction::Scatter { bounds } => comm.reduce_scatter(&input, out, &bounds, op)?,
        Reduction::Inter(root) => comm.inter_reduce(&input, out, op, root)?,
    }
    Ok(())
}
