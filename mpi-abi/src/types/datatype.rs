//! Datatype handles: sizes of the predefined types, layouts of derived
//! ones and the `Builder` that makes them, packing and unpacking.

use std::ffi::c_int;

use crate::consts::*;
use crate::state::{Bound, DerivedType, STATE, slot_of};

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
#[inline]
pub(crate) fn predefined_size(dt: Datatype) -> Option<usize> {
    let h = dt as u32;
    if h >> 24 == 0x4c {
        return Some(((h >> 8) & 0xff) as usize);
    }
    match dt {
        MPI_FLOAT_INT => Some(8),
        _ => None,
    }
}

/// One of the (value, index) pair types of `MPI_MINLOC`/`MPI_MAXLOC`.
pub(crate) fn is_pair(dt: Datatype) -> bool {
    matches!(
        dt,
        MPI_FLOAT_INT
            | MPI_DOUBLE_INT
            | MPI_LONG_INT
            | MPI_SHORT_INT
            | MPI_2INT
            | MPI_LONG_DOUBLE_INT
            | MPI_2INTEGER
            | MPI_2REAL
            | MPI_2DOUBLE_PRECISION
    )
}

/// Is `dt` a pair type with padding (see [`padded_pair`])? Without
/// building its layout.
#[inline]
pub(crate) fn is_padded_pair(dt: Datatype) -> bool {
    padded_pair_shape(dt).is_some()
}

/// A padded pair's value size, index offset and extent.
#[inline]
fn padded_pair_shape(dt: Datatype) -> Option<(usize, usize, usize)> {
    match dt {
        MPI_DOUBLE_INT | MPI_LONG_INT => Some((8, 8, 16)),
        MPI_SHORT_INT => Some((2, 4, 8)),
        MPI_LONG_DOUBLE_INT => Some((16, 16, 32)),
        _ => None,
    }
}

/// The layout of a pair type with padding between or after its two parts
/// (as C lays the struct out: `MPI_DOUBLE_INT` is 12 bytes of data in 16),
/// if `dt` is one: its data is the value and the index, not the padding.
pub(crate) fn padded_pair(dt: Datatype) -> Option<DerivedType> {
    let (value, index_at, extent) = padded_pair_shape(dt)?;
    let blocks = if value == index_at {
        vec![(0, value + 4)]
    } else {
        vec![(0, value), (index_at as isize, 4)]
    };
    Some(DerivedType {
        blocks,
        lb: 0,
        extent: extent as isize,
        base: Some(dt),
        per: 1,
        align: if dt == MPI_SHORT_INT { 4 } else { extent / 2 },
        bounds: (Bound::Data, Bound::Data),
    })
}

/// Alignment of a predefined datatype (for struct extents).
fn predefined_align(dt: Datatype, size: usize) -> usize {
    match dt {
        MPI_FLOAT_INT | MPI_2INT | MPI_2INTEGER | MPI_2REAL => 4,
        MPI_2DOUBLE_PRECISION => 8,
        // A complex number aligns as its parts.
        MPI_C_FLOAT_COMPLEX
        | MPI_C_DOUBLE_COMPLEX
        | MPI_C_LONG_DOUBLE_COMPLEX
        | MPI_CXX_FLOAT_COMPLEX
        | MPI_CXX_DOUBLE_COMPLEX
        | MPI_CXX_LONG_DOUBLE_COMPLEX
        | MPI_COMPLEX
        | MPI_DOUBLE_COMPLEX
        | MPI_COMPLEX8
        | MPI_COMPLEX16 => size / 2,
        _ => size.clamp(1, 16),
    }
}

/// A private copy of derived datatype `dt`, for a request that outlives
/// the program's handle (MPI lets the program free a type an operation in
/// flight uses): its handle, to release with [`release_copy`]. `None` for
/// a predefined type (nothing to copy) or an invalid one.
pub(crate) fn private_copy(dt: Datatype) -> Option<Datatype> {
    slot_of(dt, USER_TYPE_KIND)?;
    let t = layout(dt)?;
    let i = STATE.with(|s| crate::state::insert(&mut s.borrow_mut().types, 0, t));
    Some(crate::state::handle_of(USER_TYPE_KIND, i))
}

/// Release a copy [`private_copy`] made.
pub(crate) fn release_copy(copy: Datatype) {
    STATE.with(|s| crate::state::release(&mut s.borrow_mut().types, copy, USER_TYPE_KIND));
}

/// The layout of datatype `dt` (predefined or derived).
pub(crate) fn layout(dt: Datatype) -> Option<DerivedType> {
    if let Some(t) = padded_pair(dt) {
        return Some(t);
    }
    if let Some(size) = predefined_size(dt) {
        let bounds = match dt {
            MPI_LB => (Bound::Marker, Bound::Absent),
            MPI_UB => (Bound::Absent, Bound::Marker),
            _ => (Bound::Data, Bound::Data),
        };
        return Some(DerivedType {
            blocks: if size > 0 {
                vec![(0, size)]
            } else {
                Vec::new()
            },
            lb: 0,
            extent: size as isize,
            base: Some(dt),
            per: 1,
            align: predefined_align(dt, size),
            bounds,
        });
    }
    let i = slot_of(dt, USER_TYPE_KIND)?;
    STATE.with(|s| s.borrow().types.get(i).cloned().flatten())
}

/// What handle `dt` stands for.
///
/// Inlined, so that for a predefined type the caller may keep the fields
/// in registers: returned through memory, they are read back with loads
/// wider than the stores that wrote them, which wait for every older store
/// (a send's ring writes among them). (Reductions got 6-10% faster. In
/// `Message::new`, where that load was a third of a scatter root's time,
/// only a path of its own for predefined types kept it out of memory.)
#[inline(always)]
pub(crate) fn info(dt: Datatype) -> Option<TypeInfo> {
    // The predefined types without building their layout.
    if let Some(size) = predefined_size(dt) {
        return Some(TypeInfo {
            size,
            base: Some(dt),
            per: 1,
            contiguous: size > 0,
        });
    }
    derived_info(dt)
}

/// [`info`] for a derived datatype.
#[inline(never)]
fn derived_info(dt: Datatype) -> Option<TypeInfo> {
    let l = layout(dt)?;
    let size: usize = l.blocks.iter().map(|b| b.1).sum();
    Some(TypeInfo {
        size,
        base: l.base,
        per: l.per,
        // One rule with `pack`'s: no bytes at all, or one run filling the
        // extent from the element's start.
        contiguous: l.lb == 0
            && ((l.blocks.is_empty() && l.extent == 0) || contiguous(&l).is_some()),
    })
}

/// Builds a derived datatype from copies of others placed at byte
/// displacements.
#[derive(Default)]
pub(crate) struct Builder {
    blocks: Vec<(isize, usize)>,
    /// The lowest and highest bound of the parts' data, and of their
    /// markers (which win: see [`Bound`]).
    data: (Option<isize>, Option<isize>),
    markers: (Option<isize>, Option<isize>),
    base: Option<Option<Datatype>>,
    per: usize,
    align: usize,
}

impl Builder {
    /// One element of `old` at byte displacement `disp`.
    pub(crate) fn place(&mut self, old: &DerivedType, disp: isize) {
        for &(off, len) in old.blocks.iter().filter(|b| b.1 > 0) {
            let at = disp + off;
            match self.blocks.last_mut() {
                Some((o, l)) if *o + *l as isize == at => *l += len,
                _ => self.blocks.push((at, len)),
            }
        }
        let (lo, hi) = (disp + old.lb, disp + old.lb + old.extent);
        let lowest = |b: &mut Option<isize>| *b = Some(b.map_or(lo, |b| b.min(lo)));
        match old.bounds.0 {
            Bound::Data => lowest(&mut self.data.0),
            Bound::Marker => lowest(&mut self.markers.0),
            Bound::Absent => {}
        }
        let highest = |b: &mut Option<isize>| *b = Some(b.map_or(hi, |b| b.max(hi)));
        match old.bounds.1 {
            Bound::Data => highest(&mut self.data.1),
            Bound::Marker => highest(&mut self.markers.1),
            Bound::Absent => {}
        }
        self.base = Some(match self.base {
            None => old.base,
            Some(b) if b == old.base => b,
            Some(_) => None,
        });
        self.per += old.per;
        self.align = self.align.max(old.align);
    }

    /// `n` elements of `old` back to back from byte displacement `disp`:
    /// `n` calls of [`Builder::place`], in one step when `old`'s elements
    /// are contiguous (a block of 2^31 bytes is one run, not 2^31 calls).
    pub(crate) fn place_run(&mut self, old: &DerivedType, disp: isize, n: usize) {
        let contiguous = matches!(old.blocks[..], [(0, len)] if len as isize == old.extent)
            && old.lb == 0
            && old.bounds == (Bound::Data, Bound::Data);
        let run = old
            .extent
            .checked_mul(n as isize)
            .filter(|_| contiguous && n > 1);
        let Some(extent) = run else {
            for j in 0..n {
                self.place(old, disp + j as isize * old.extent);
            }
            return;
        };
        let whole = DerivedType {
            blocks: vec![(0, extent as usize)],
            lb: 0,
            extent,
            base: old.base,
            per: old.per.saturating_mul(n),
            align: old.align,
            bounds: old.bounds,
        };
        self.place(&whole, disp);
    }

    /// The datatype; `pad` rounds the extent up to the alignment of the
    /// largest type inside (as C pads a struct), unless an upper-bound
    /// marker sets it. A bound with neither markers nor data is 0.
    pub(crate) fn build(self, pad: bool) -> DerivedType {
        let pick = |marker: Option<isize>, data: Option<isize>| match (marker, data) {
            (Some(m), _) => (m, Bound::Marker),
            (None, Some(d)) => (d, Bound::Data),
            (None, None) => (0, Bound::Absent),
        };
        let (lb, lb_kind) = pick(self.markers.0, self.data.0);
        let (ub, ub_kind) = pick(self.markers.1, self.data.1);
        let mut extent = ub - lb;
        if pad && self.align > 1 && ub_kind != Bound::Marker {
            let a = self.align as isize;
            extent = (extent + a - 1).div_euclid(a) * a;
        }
        DerivedType {
            blocks: self.blocks,
            lb,
            extent,
            base: self.base.flatten(),
            per: self.per,
            align: self.align.max(1),
            bounds: (lb_kind, ub_kind),
        }
    }
}

/// The element size of `t` if its elements lie back to back with no hole
/// (one run of bytes from the element's start to its extent).
fn contiguous(t: &DerivedType) -> Option<usize> {
    match t.blocks[..] {
        [(0, len)] if len > 0 && len as isize == t.extent => Some(len),
        _ => None,
    }
}

/// `count` elements of `t` at `buf`, packed into one run of bytes.
///
/// # Safety
/// `buf` holds `count` elements of `t` (the C caller's contract).
pub(crate) unsafe fn pack(buf: *const u8, count: usize, t: &DerivedType) -> Vec<u8> {
    if let Some(len) = contiguous(t) {
        // One run of bytes (every predefined type, and derived types
        // without holes): one copy, not one per element.
        // SAFETY: caller contract: `count` elements, back to back.
        return unsafe { std::slice::from_raw_parts(buf, len * count) }.to_vec();
    }
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
    if contiguous(t).is_some() {
        // SAFETY: caller contract: the elements `data` fills are writable,
        // back to back.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len()) };
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
    span_of(count, &info(dt).ok_or((MPI_ERR_TYPE, "invalid datatype"))?)
}

/// As [`span`], for a type already looked up.
pub(crate) fn span_of(count: c_int, t: &TypeInfo) -> Result<usize, (c_int, &'static str)> {
    bytes_of(count, t.size)
}

/// Bytes of `count` elements of `size` bytes each.
#[inline(always)]
pub(crate) fn bytes_of(count: c_int, size: usize) -> Result<usize, (c_int, &'static str)> {
    let n = usize::try_from(count).map_err(|_| (MPI_ERR_COUNT, "negative count"))?;
    n.checked_mul(size)
        .ok_or((MPI_ERR_COUNT, "count too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derived(blocks: Vec<(isize, usize)>, extent: isize) -> DerivedType {
        DerivedType {
            blocks,
            lb: 0,
            extent,
            base: None,
            per: 1,
            align: 1,
            bounds: (Bound::Data, Bound::Data),
        }
    }

    #[test]
    fn a_run_of_elements_is_the_same_type_as_placing_each() {
        for old in [derived(vec![(0, 8)], 8), derived(vec![(0, 4)], 8)] {
            let (mut one, mut each) = (Builder::default(), Builder::default());
            one.place_run(&old, 16, 5);
            for j in 0..5 {
                each.place(&old, 16 + j * 8);
            }
            let (a, b) = (one.build(false), each.build(false));
            assert_eq!(
                (a.blocks, a.lb, a.extent, a.per),
                (b.blocks, b.lb, b.extent, b.per)
            );
        }
    }

    #[test]
    fn markers_override_the_data_and_a_lone_lb_marker_leaves_ub_at_zero() {
        let lb = layout(MPI_LB).unwrap();
        let ub = layout(MPI_UB).unwrap();
        let int = layout(MPI_INT).unwrap();
        // {(LB,-3), (INT,0), (UB,6)}: lb -3, ub 6, whatever the data.
        let mut b = Builder::default();
        b.place(&lb, -3);
        b.place(&int, 0);
        b.place(&ub, 6);
        let t = b.build(true);
        assert_eq!(
            (t.lb, t.extent, t.bounds),
            (-3, 9, (Bound::Marker, Bound::Marker))
        );
        // {(LB,10)}: no data, no UB: ub is 0, the extent -10 (as MPICH).
        let mut b = Builder::default();
        b.place(&lb, 10);
        let t = b.build(true);
        assert_eq!((t.lb, t.extent), (10, -10));
        // A marker sticks: a type built from `t` keeps its bounds.
        let mut outer = Builder::default();
        outer.place(&t, 0);
        outer.place(&int, 100);
        assert_eq!(outer.build(false).lb, 10);
    }

    #[test]
    fn contiguous_and_strided_elements_pack_and_unpack_the_same_bytes() {
        let src: Vec<u8> = (0..64u8).collect();
        // Contiguous: 4-byte elements, back to back (the one-copy path).
        let t = derived(vec![(0, 4)], 4);
        // SAFETY: `src` holds 16 elements of 4 bytes.
        let packed = unsafe { pack(src.as_ptr(), 16, &t) };
        assert_eq!(packed, src);
        let mut back = vec![0u8; 64];
        // SAFETY: `back` holds 16 elements.
        unsafe { unpack(&packed[..10], back.as_mut_ptr(), &t) };
        assert_eq!(&back[..10], &src[..10]);
        assert!(back[10..].iter().all(|&b| b == 0));
        // Strided: 2 bytes of every 4 (the per-element path).
        let t = derived(vec![(0, 2)], 4);
        // SAFETY: `src` holds 16 elements of extent 4.
        let packed = unsafe { pack(src.as_ptr(), 16, &t) };
        let want: Vec<u8> = src.chunks(4).flat_map(|c| [c[0], c[1]]).collect();
        assert_eq!(packed, want);
        let mut back = vec![0u8; 64];
        // SAFETY: as above.
        unsafe { unpack(&packed, back.as_mut_ptr(), &t) };
        for (i, c) in back.chunks(4).enumerate() {
            assert_eq!(c, [src[4 * i], src[4 * i + 1], 0, 0]);
        }
    }
}
