//! Scratch buffers of the collectives, kept between calls.
//!
//! A reduction needs a buffer as large as its vector for what a partner
//! sends. Fresh memory is expensive (the kernel zeroes and maps every
//! page: 0.3–2 µs per KiB on a VM, more than moving the bytes), so each
//! thread keeps the few largest buffers its collectives used and hands
//! them out again. The contents are whatever the last user left: every
//! collective writes a scratch element before it reads it.

use std::cell::RefCell;

use crate::buffer::Pod;

/// Buffers a thread keeps at most.
const KEPT: usize = 4;
/// A thread keeps at most this many bytes of buffers; a buffer that would
/// take it past is freed after use.
const KEEP_MAX: usize = 256 << 20;

/// Buffers of up to this many words live on the stack.
const SMALL: usize = 16;

/// The unit of a kept buffer: its alignment (16) is enough for every
/// element type the collectives move.
type Word = u128;

thread_local! {
    static POOL: RefCell<Vec<Vec<Word>>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` on a scratch buffer of `len` elements of `T`, whose contents
/// are unspecified (any bit pattern is a valid `T`).
pub(super) fn with_scratch<T: Pod, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    let size = std::mem::size_of::<T>();
    let Some(bytes) = len
        .checked_mul(size)
        .filter(|_| size > 0 && std::mem::align_of::<T>() <= std::mem::align_of::<Word>())
    else {
        return f(&mut vec![T::zeroed(); len]);
    };
    let words = bytes.div_ceil(std::mem::size_of::<Word>());
    if words <= SMALL {
        // Small vectors (most reductions of a few values): on the stack.
        let mut small = [0 as Word; SMALL];
        let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut small[..words]);
        return match bytemuck::try_cast_slice_mut::<u8, T>(&mut raw[..bytes]) {
            Ok(elems) => f(elems),
            Err(_) => f(&mut vec![T::zeroed(); len]),
        };
    }
    // The smallest kept buffer that is large enough, else the largest
    // (grown): a nested call gets another one, or a fresh one.
    let mut buf = POOL.with(|p| {
        let mut p = p.borrow_mut();
        let fit = (0..p.len())
            .filter(|&i| p[i].len() >= words)
            .min_by_key(|&i| p[i].len())
            .or_else(|| (0..p.len()).max_by_key(|&i| p[i].len()));
        fit.map(|i| p.swap_remove(i)).unwrap_or_default()
    });
    if buf.len() < words {
        buf.resize(words, 0);
    }
    let out = {
        let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut buf[..words]);
        // The buffer is aligned for `Word`, hence for `T` (checked above),
        // and `bytes` is a multiple of `size`: the cast cannot fail.
        match bytemuck::try_cast_slice_mut::<u8, T>(&mut raw[..bytes]) {
            Ok(elems) => f(elems),
            Err(_) => f(&mut vec![T::zeroed(); len]),
        }
    };
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        p.push(buf);
        // Keep the largest few within the budget.
        p.sort_by_key(|b| std::cmp::Reverse(b.len()));
        p.truncate(KEPT);
        let mut total = 0;
        p.retain(|b| {
            let size = std::mem::size_of_val(b.as_slice());
            let keep = total + size <= KEEP_MAX;
            if keep {
                total += size;
            }
            keep
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_sized() {
        // Small buffers are on the stack, larger ones kept.
        let first = with_scratch::<f64, _>(1000, |b| {
            assert_eq!(b.len(), 1000);
            b.fill(1.5);
            b.as_ptr() as usize
        });
        // The same thread gets the kept buffer back, with its contents.
        let again = with_scratch::<f64, _>(500, |b| {
            assert_eq!(b.len(), 500);
            assert_eq!(b[0], 1.5);
            b.as_ptr() as usize
        });
        assert_eq!(first, again);
        // A nested call gets a buffer of its own.
        with_scratch::<u32, _>(10, |outer| {
            outer.fill(7);
            with_scratch::<u32, _>(10, |inner| {
                assert_ne!(outer.as_ptr(), inner.as_ptr());
                inner.fill(9);
            });
            assert!(outer.iter().all(|&x| x == 7));
        });
    }

    #[test]
    fn odd_sizes_and_empty() {
        with_scratch::<[u8; 3], _>(5, |b| assert_eq!(b.len(), 5));
        with_scratch::<u64, _>(0, |b| assert!(b.is_empty()));
        with_scratch::<(), _>(3, |b| assert_eq!(b.len(), 3));
    }
}
