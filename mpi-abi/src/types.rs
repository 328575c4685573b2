//! Datatypes and reduction operations.
//!
//! Data moves as bytes. A predefined type's size is in its handle; a
//! derived type (contiguous, vector, hvector, indexed, struct) is a list
//! of byte runs with a lower bound and an extent, built by `Builder`.
//! Contiguous types use the C buffer as it is; point-to-point calls pack
//! the others into a staging buffer (`Message`) and unpack received
//! data when the receive completes. Reductions copy the C buffer into a
//! `Vec` of the matching Rust type (no alignment is assumed) and run
//! vpml's collectives with `CombineOp`, which applies a predefined
//! operation or calls the C program's own function.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{DerivedType, STATE, UserFn, slot_of};

/// What a datatype handle stands for.
#[derive(Clone, Copy)]
pub(crate) struct TypeInfo {
    /// Bytes of data per element.
    pub size: usize,
    /// The predefined type every byte belongs to, if one does.
    pub base: Option<Datatype>,
    /// How many `base` elements one element holds.
    pub per: usize,
    /// Its bytes are one run starting at the element's address, and
    /// elements follow each other without gaps: the C buffer can be used
    /// as it is, no packing.
    pub contiguous: bool,
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

/// Alignment of a predefined datatype (for struct extents).
fn predefined_align(dt: Datatype, size: usize) -> usize {
    match dt {
        MPI_FLOAT_INT | MPI_SHORT_INT | MPI_2INT => 4,
        MPI_DOUBLE_INT | MPI_LONG_INT => 8,
        MPI_LONG_DOUBLE_INT => 16,
        _ => size.clamp(1, 16),
    }
}

/// The layout of datatype `dt` (predefined or derived).
pub(crate) fn layout(dt: Datatype) -> Option<DerivedType> {
    if let Some(size) = predefined_size(dt) {
        return Some(DerivedType {
            blocks: vec![(0, size)],
            lb: 0,
            extent: size as isize,
            base: Some(dt),
            per: 1,
            align: predefined_align(dt, size),
        });
    }
    let i = slot_of(dt, USER_TYPE_KIND)?;
    STATE.with(|s| s.borrow().types.get(i).cloned().flatten())
}

/// What handle `dt` stands for.
pub(crate) fn info(dt: Datatype) -> Option<TypeInfo> {
    let l = layout(dt)?;
    let size: usize = l.blocks.iter().map(|b| b.1).sum();
    Some(TypeInfo {
        size,
        base: l.base,
        per: l.per,
        contiguous: l.lb == 0
            && l.extent == size as isize
            && (l.blocks.is_empty() || l.blocks == [(0, size)]),
    })
}

/// Builds a derived datatype from copies of others placed at byte
/// displacements.
#[derive(Default)]
pub(crate) struct Builder {
    blocks: Vec<(isize, usize)>,
    bounds: Option<(isize, isize)>,
    base: Option<Option<Datatype>>,
    per: usize,
    align: usize,
}

impl Builder {
    /// One element of `old` at byte displacement `disp`.
    pub(crate) fn place(&mut self, old: &DerivedType, disp: isize) {
        for &(off, len) in &old.blocks {
            let at = disp + off;
            match self.blocks.last_mut() {
                Some((o, l)) if *o + *l as isize == at => *l += len,
                _ => self.blocks.push((at, len)),
            }
        }
        let (lo, hi) = (disp + old.lb, disp + old.lb + old.extent);
        self.bounds = Some(match self.bounds {
            Some((a, b)) => (a.min(lo), b.max(hi)),
            None => (lo, hi),
        });
        self.base = Some(match self.base {
            None => old.base,
            Some(b) if b == old.base => b,
            Some(_) => None,
        });
        self.per += old.per;
        self.align = self.align.max(old.align);
    }

    /// The datatype; `pad` rounds the extent up to the alignment of the
    /// largest type inside (as C pads a struct).
    pub(crate) fn build(self, pad: bool) -> DerivedType {
        let (lb, ub) = self.bounds.unwrap_or((0, 0));
        let mut extent = ub - lb;
        if pad && self.align > 1 {
            let a = self.align as isize;
            extent = (extent + a - 1) / a * a;
        }
        DerivedType {
            blocks: self.blocks,
            lb,
            extent,
            base: self.base.flatten(),
            per: self.per,
            align: self.align.max(1),
        }
    }
}

/// `count` elements of `t` at `buf`, packed into one run of bytes.
///
/// # Safety
/// `buf` holds `count` elements of `t` (the C caller's contract).
pub(crate) unsafe fn pack(buf: *const u8, count: usize, t: &DerivedType) -> Vec<u8> {
    let size: usize = t.blocks.iter().map(|b| b.1).sum();
    let mut out = Vec::with_capacity(size * count);
    for i in 0..count {
        let elem = buf.wrapping_offset(i as isize * t.extent);
        for &(off, len) in &t.blocks {
            // SAFETY: caller contract: the element's bytes are readable.
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts(elem.wrapping_offset(off), len)
            });
        }
    }
    out
}

/// Spread packed `data` over elements of `t` at `buf` (as far as it goes).
///
/// # Safety
/// `buf` holds enough elements of `t` for `data` (the C caller's contract).
pub(crate) unsafe fn unpack(data: &[u8], buf: *mut u8, t: &DerivedType) {
    if t.blocks.iter().all(|b| b.1 == 0) {
        return;
    }
    let mut at = 0;
    let mut i = 0isize;
    while at < data.len() {
        let elem = buf.wrapping_offset(i * t.extent);
        for &(off, len) in &t.blocks {
            let n = len.min(data.len() - at);
            // SAFETY: caller contract: the element's bytes are writable.
            unsafe {
                std::ptr::copy_nonoverlapping(data[at..].as_ptr(), elem.wrapping_offset(off), n)
            };
            at += n;
            if at == data.len() {
                return;
            }
        }
        i += 1;
    }
}

/// Bytes of `count` elements of `dt`.
pub(crate) fn span(count: c_int, dt: Datatype) -> Result<usize, (c_int, &'static str)> {
    let t = info(dt).ok_or((MPI_ERR_TYPE, "invalid datatype"))?;
    let n = usize::try_from(count).map_err(|_| (MPI_ERR_COUNT, "negative count"))?;
    n.checked_mul(t.size)
        .ok_or((MPI_ERR_COUNT, "count too large"))
}

/// A message buffer: the C buffer itself for a contiguous datatype, else
/// a packed staging copy (unpacked into the C buffer when a receive
/// completes).
pub(crate) enum Message {
    /// The C buffer.
    Direct { ptr: *mut u8, len: usize },
    /// A staging buffer for `count` elements of `layout` at `user`.
    Staged {
        data: Box<[u8]>,
        user: *mut u8,
        layout: DerivedType,
    },
}

impl Message {
    /// The buffer for `count` elements of `dt` at `buf`; packed now when
    /// `send`.
    ///
    /// # Safety
    /// `buf` holds `count` elements of `dt` (the C caller's contract).
    pub(crate) unsafe fn new(
        buf: *const c_void,
        count: c_int,
        dt: Datatype,
        send: bool,
    ) -> Result<Message, (c_int, &'static str)> {
        let len = span(count, dt)?;
        let t = info(dt).ok_or((MPI_ERR_TYPE, "invalid datatype"))?;
        if t.contiguous || len == 0 {
            if len > 0 && buf.is_null() {
                return Err((MPI_ERR_BUFFER, "null buffer"));
            }
            return Ok(Message::Direct {
                ptr: buf as *mut u8,
                len,
            });
        }
        let layout = layout(dt).ok_or((MPI_ERR_TYPE, "invalid datatype"))?;
        let n = usize::try_from(count).unwrap_or(0);
        let data = if send {
            // SAFETY: caller contract.
            unsafe { pack(buf as *const u8, n, &layout) }.into_boxed_slice()
        } else {
            vec![0u8; len].into_boxed_slice()
        };
        Ok(Message::Staged {
            data,
            user: buf as *mut u8,
            layout,
        })
    }

    /// Where the transfer reads or writes, and how many bytes.
    pub(crate) fn target(&mut self) -> (*mut u8, usize) {
        match self {
            Message::Direct { ptr, len } => (*ptr, *len),
            Message::Staged { data, .. } => (data.as_mut_ptr(), data.len()),
        }
    }

    /// The bytes the transfer reads or writes (for a call that completes
    /// before it returns).
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        match self {
            Message::Direct { len: 0, .. } => &mut [],
            // SAFETY: the C buffer holds `len` bytes for the duration of
            // the call that made this message (the C caller's contract).
            Message::Direct { ptr, len } => unsafe { std::slice::from_raw_parts_mut(*ptr, *len) },
            Message::Staged { data, .. } => data,
        }
    }

    /// A transfer into this buffer completed with `received` bytes (all of
    /// them when `None`): move them into the C buffer if they were staged.
    pub(crate) fn finish(&self, received: Option<usize>) {
        if let Message::Staged { data, user, layout } = self {
            let n = received.map_or(data.len(), |r| r.min(data.len()));
            // SAFETY: `user` holds the elements (the contract of the call
            // that made this message).
            unsafe { unpack(&data[..n], *user, layout) };
        }
    }
}

/// A reduction operation as the C program named it.
#[derive(Clone, Copy)]
pub(crate) struct CombineOp {
    op: Op,
    user: Option<UserFn>,
}

impl CombineOp {
    /// The operation `op` over elements of `dt`, if it applies to them.
    pub(crate) fn new(op: Op, dt: Datatype) -> Result<CombineOp, (c_int, &'static str)> {
        if let Some(i) = slot_of(op, USER_OP_KIND) {
            let f = STATE.with(|s| s.borrow().ops.get(i).copied().flatten());
            return match f {
                Some(f) => Ok(CombineOp { op, user: Some(f) }),
                None => Err((MPI_ERR_OP, "invalid operation")),
            };
        }
        let base = info(dt)
            .ok_or((MPI_ERR_TYPE, "invalid datatype"))?
            .base
            .ok_or((
                MPI_ERR_TYPE,
                "reductions need a datatype of one predefined type",
            ))?;
        let float = matches!(base, MPI_FLOAT | MPI_DOUBLE | MPI_LONG_DOUBLE);
        let complex = matches!(
            base,
            MPI_C_FLOAT_COMPLEX
                | MPI_C_DOUBLE_COMPLEX
                | MPI_CXX_FLOAT_COMPLEX
                | MPI_CXX_DOUBLE_COMPLEX
                | MPI_C_LONG_DOUBLE_COMPLEX
                | MPI_CXX_LONG_DOUBLE_COMPLEX
        );
        let pair = matches!(
            base,
            MPI_2INT | MPI_FLOAT_INT | MPI_DOUBLE_INT | MPI_LONG_INT
        );
        let ok = match op {
            MPI_SUM | MPI_PROD => !pair,
            MPI_MAX | MPI_MIN => !pair && !complex,
            MPI_LAND | MPI_LOR | MPI_LXOR | MPI_BAND | MPI_BOR | MPI_BXOR => {
                !pair && !float && !complex
            }
            MPI_MINLOC | MPI_MAXLOC => pair,
            MPI_REPLACE | MPI_NO_OP => true,
            _ => return Err((MPI_ERR_OP, "invalid operation")),
        };
        if !ok {
            return Err((MPI_ERR_OP, "operation not defined for this datatype"));
        }
        Ok(CombineOp { op, user: None })
    }
}

/// Element types reductions run on.
pub(crate) trait Element: vpml::Pod + PartialOrd {
    fn combine(op: Op, a: Self, b: Self) -> Self;
}

/// `MAX`, `MIN`, `NO_OP` and `REPLACE`, the same for every type
/// (`MAX`/`MIN` keep the first operand when the two are unordered).
fn select<T: PartialOrd>(op: Op, a: T, b: T) -> T {
    match op {
        MPI_MAX if b > a => b,
        MPI_MIN if b < a => b,
        MPI_MAX | MPI_MIN | MPI_NO_OP => a,
        _ => b, // MPI_REPLACE
    }
}

macro_rules! int_element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    MPI_SUM => a.wrapping_add(b),
                    MPI_PROD => a.wrapping_mul(b),
                    MPI_LAND => ((a != 0) && (b != 0)) as $t,
                    MPI_LOR => ((a != 0) || (b != 0)) as $t,
                    MPI_LXOR => ((a != 0) != (b != 0)) as $t,
                    MPI_BAND => a & b,
                    MPI_BOR => a | b,
                    MPI_BXOR => a ^ b,
                    _ => select(op, a, b),
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
                    MPI_SUM => a + b,
                    MPI_PROD => a * b,
                    _ => select(op, a, b),
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

/// A C complex number (`float _Complex`, `double _Complex`).
macro_rules! complex_element {
    ($($name:ident($t:ty)),*) => {$(
        #[repr(C)]
        #[derive(Clone, Copy, PartialEq, Default)]
        pub(crate) struct $name {
            re: $t,
            im: $t,
        }
        // SAFETY: two floats, no padding: every bit pattern is valid.
        unsafe impl bytemuck::Zeroable for $name {}
        // SAFETY: as above.
        unsafe impl bytemuck::Pod for $name {}
        impl PartialOrd for $name {
            // Complex numbers are not ordered (MAX/MIN are refused).
            fn partial_cmp(&self, _: &Self) -> Option<std::cmp::Ordering> {
                None
            }
        }
        impl Element for $name {
            fn combine(op: Op, a: Self, b: Self) -> Self {
                match op {
                    MPI_SUM => $name { re: a.re + b.re, im: a.im + b.im },
                    MPI_PROD => $name {
                        re: a.re * b.re - a.im * b.im,
                        im: a.re * b.im + a.im * b.re,
                    },
                    _ => select(op, a, b),
                }
            }
        }
    )*};
}
complex_element!(ComplexF32(f32), ComplexF64(f64));

/// C's `long double` on x86-64: the x87 80-bit format in 16 bytes. Rust
/// has no such type, so its arithmetic runs on the x87 unit (small asm
/// blocks that push their operands, compute, and leave the x87 stack
/// empty as the ABI requires).
#[cfg(target_arch = "x86_64")]
mod long_double {
    use std::arch::asm;

    /// One `long double`.
    #[repr(C, align(16))]
    #[derive(Clone, Copy, Default, PartialEq)]
    pub(crate) struct LongDouble(pub [u8; 16]);

    // SAFETY: 16 plain bytes, no padding: every bit pattern is a valid
    // value of this type (the x87 unit takes any as an operand).
    unsafe impl bytemuck::Zeroable for LongDouble {}
    // SAFETY: as above.
    unsafe impl bytemuck::Pod for LongDouble {}

    /// `a + b`, `a - b` or `a * b`.
    #[derive(Clone, Copy)]
    pub(crate) enum Arith {
        Add,
        Sub,
        Mul,
    }

    impl LongDouble {
        pub(crate) fn arith(self, op: Arith, b: LongDouble) -> LongDouble {
            let mut out = LongDouble::default();
            let (pa, pb, po) = (self.0.as_ptr(), b.0.as_ptr(), out.0.as_mut_ptr());
            // SAFETY: each block loads two 10-byte values from `pa` and
            // `pb` (16 valid bytes each), stores one to `po` (16 writable
            // bytes), and pops everything it pushed; the clobbered x87
            // registers are declared.
            unsafe {
                match op {
                    Arith::Add => asm!(
                        "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]",
                        "faddp st(1), st", "fstp tbyte ptr [{o}]",
                        a = in(reg) pa, b = in(reg) pb, o = in(reg) po,
                        out("st(0)") _, out("st(1)") _, options(nostack)
                    ),
                    Arith::Sub => asm!(
                        "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]",
                        "fsubp st(1), st", "fstp tbyte ptr [{o}]",
                        a = in(reg) pa, b = in(reg) pb, o = in(reg) po,
                        out("st(0)") _, out("st(1)") _, options(nostack)
                    ),
                    Arith::Mul => asm!(
                        "fld tbyte ptr [{a}]", "fld tbyte ptr [{b}]",
                        "fmulp st(1), st", "fstp tbyte ptr [{o}]",
                        a = in(reg) pa, b = in(reg) pb, o = in(reg) po,
                        out("st(0)") _, out("st(1)") _, options(nostack)
                    ),
                }
            }
            out
        }

        /// `self < b` (false when unordered: NaN).
        pub(crate) fn less(self, b: LongDouble) -> bool {
            let (below, unordered): (u8, u8);
            // SAFETY: loads two values as above, compares and pops both;
            // only flags and the two output registers change.
            unsafe {
                asm!(
                    "fld tbyte ptr [{b}]", "fld tbyte ptr [{a}]",
                    "fucomip st, st(1)", "fstp st(0)",
                    "setb {lt}", "setp {un}",
                    a = in(reg) self.0.as_ptr(), b = in(reg) b.0.as_ptr(),
                    lt = out(reg_byte) below, un = out(reg_byte) unordered,
                    out("st(0)") _, out("st(1)") _, options(nostack)
                )
            };
            below == 1 && unordered == 0
        }
    }

    impl PartialOrd for LongDouble {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            if self.less(*other) {
                Some(std::cmp::Ordering::Less)
            } else if other.less(*self) {
                Some(std::cmp::Ordering::Greater)
            } else {
                None
            }
        }
    }

    /// `long double _Complex`.
    #[repr(C)]
    #[derive(Clone, Copy, Default, PartialEq)]
    pub(crate) struct ComplexLongDouble {
        pub re: LongDouble,
        pub im: LongDouble,
    }
    // SAFETY: two `LongDouble`s, no padding.
    unsafe impl bytemuck::Zeroable for ComplexLongDouble {}
    // SAFETY: as above.
    unsafe impl bytemuck::Pod for ComplexLongDouble {}
    impl PartialOrd for ComplexLongDouble {
        // Not ordered (MAX/MIN are refused).
        fn partial_cmp(&self, _: &Self) -> Option<std::cmp::Ordering> {
            None
        }
    }
}

#[cfg(target_arch = "x86_64")]
use long_double::{Arith, ComplexLongDouble, LongDouble};

#[cfg(target_arch = "x86_64")]
impl Element for LongDouble {
    fn combine(op: Op, a: Self, b: Self) -> Self {
        match op {
            MPI_SUM => a.arith(Arith::Add, b),
            MPI_PROD => a.arith(Arith::Mul, b),
            _ => select(op, a, b),
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Element for ComplexLongDouble {
    fn combine(op: Op, a: Self, b: Self) -> Self {
        let mul = |x: LongDouble, y: LongDouble| x.arith(Arith::Mul, y);
        match op {
            MPI_SUM => ComplexLongDouble {
                re: a.re.arith(Arith::Add, b.re),
                im: a.im.arith(Arith::Add, b.im),
            },
            MPI_PROD => ComplexLongDouble {
                re: mul(a.re, b.re).arith(Arith::Sub, mul(a.im, b.im)),
                im: mul(a.re, b.im).arith(Arith::Add, mul(a.im, b.re)),
            },
            _ => select(op, a, b),
        }
    }
}

impl<T: Element> vpml::Op<T> for CombineOp {
    fn apply(&self, a: T, b: T) -> T {
        // User operations never get here (see `reduce`).
        T::combine(self.op, a, b)
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

/// Run reduction `kind` over `count` elements of `dt`, packed in `send`;
/// `recv` (packed too) gets the result (for `ScatterBlock`, this rank's
/// block of it).
pub(crate) fn reduce(
    comm: &vpml::Comm,
    kind: Reduction,
    send: &[u8],
    recv: &mut [u8],
    op: CombineOp,
    dt: Datatype,
    count: usize,
) -> Result<(), (c_int, String)> {
    if let Some(f) = op.user {
        return user_reduce(comm, kind, send, recv, f, dt, count)
            .map_err(|e| (crate::state::class_of(&e), e.to_string()));
    }
    let t = info(dt).ok_or((MPI_ERR_TYPE, "invalid datatype".to_string()))?;
    let Some(base) = t.base else {
        return Err((
            MPI_ERR_TYPE,
            "reductions need a datatype of one predefined type".into(),
        ));
    };
    macro_rules! go {
        ($t:ty) => {
            run::<$t>(comm, kind, send, recv, op)
        };
    }
    let r = match base {
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
        MPI_C_FLOAT_COMPLEX | MPI_CXX_FLOAT_COMPLEX => go!(ComplexF32),
        MPI_C_DOUBLE_COMPLEX | MPI_CXX_DOUBLE_COMPLEX => go!(ComplexF64),
        #[cfg(target_arch = "x86_64")]
        MPI_LONG_DOUBLE => go!(LongDouble),
        #[cfg(target_arch = "x86_64")]
        MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX => go!(ComplexLongDouble),
        _ => {
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
    f: UserFn,
    dt: Datatype,
    count: usize,
) -> vpml::Result<()> {
    let (n, r) = (comm.size(), comm.rank());
    let mut all = vec![0u8; send.len() * n];
    comm.allgather(send, &mut all)?;
    let Some(t) = layout(dt) else {
        return Err(vpml::Error::RequestState("invalid datatype"));
    };
    let block = |i: usize| &all[i * send.len()..(i + 1) * send.len()];
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
    let fold = |ranks: std::ops::Range<usize>| -> Vec<u8> {
        let scratch = |data: &[u8]| {
            let mut v = vec![0u8; (hi - lo) as usize];
            let at = v.as_mut_ptr().wrapping_offset(-lo);
            // SAFETY: `v` covers every byte `count` elements of `t` touch
            // from `at` (computed above).
            unsafe { unpack(data, at, &t) };
            v
        };
        let mut acc = scratch(block(ranks.start));
        for i in ranks.start + 1..ranks.end {
            let mut next = scratch(block(i));
            let mut len = count as c_int;
            let mut d = dt;
            // SAFETY: the program's function, on two buffers of `count`
            // elements of `dt` (MPI's contract for user operations).
            unsafe {
                f(
                    acc.as_mut_ptr().wrapping_offset(-lo) as *mut c_void,
                    next.as_mut_ptr().wrapping_offset(-lo) as *mut c_void,
                    &mut len,
                    &mut d,
                )
            };
            acc = next;
        }
        // SAFETY: as for `scratch`.
        unsafe { pack(acc.as_ptr().wrapping_offset(-lo), count, &t) }
    };
    let result = match kind {
        Reduction::All => Some(fold(0..n)),
        Reduction::To(root) => (r == root).then(|| fold(0..n)),
        Reduction::Scan => Some(fold(0..r + 1)),
        Reduction::Exscan => (r > 0).then(|| fold(0..r)),
        Reduction::ScatterBlock => {
            let whole = fold(0..n);
            let b = recv.len();
            Some(whole[r * b..(r + 1) * b].to_vec())
        }
    };
    if let Some(v) = result {
        let m = v.len().min(recv.len());
        recv[..m].copy_from_slice(&v[..m]);
    }
    Ok(())
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

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::long_double::{Arith, LongDouble};

    /// An x87 extended value from its mantissa and sign+exponent.
    fn ld(mantissa: u64, sign_exp: u16) -> LongDouble {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&mantissa.to_le_bytes());
        b[8..10].copy_from_slice(&sign_exp.to_le_bytes());
        LongDouble(b)
    }

    #[test]
    fn long_double_arithmetic_and_order_run_on_the_x87_unit() {
        let a = ld(0xC000_0000_0000_0000, 0x3FFF); // 1.5
        let b = ld(0x9000_0000_0000_0000, 0x4000); // 2.25
        assert!(a.arith(Arith::Add, b) == ld(0xF000_0000_0000_0000, 0x4000)); // 3.75
        assert!(a.arith(Arith::Mul, b) == ld(0xD800_0000_0000_0000, 0x4000)); // 3.375
        assert!(a.arith(Arith::Sub, b) == ld(0xC000_0000_0000_0000, 0xBFFE)); // -0.75
        assert!(a.less(b) && !b.less(a) && !a.less(a));
        let nan = ld(0xC000_0000_0000_0000, 0x7FFF);
        assert!(!nan.less(a) && !a.less(nan));
    }
}
