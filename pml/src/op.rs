//! Reduction operations for `reduce`, `allreduce`, `scan` and `exscan`.
//!
//! Every reduction in vpml combines contributions in rank order
//! (`x0 ⊕ x1 ⊕ … ⊕ xn-1`, grouped by a fixed tree that depends only on
//! the number of ranks), so an operation only needs to be associative, and
//! floating-point results are bitwise identical from run to run.

use crate::buffer::Pod;

/// An associative, element-wise operation on `T`.
pub trait Op<T> {
    /// `a ⊕ b` (`a` comes from lower ranks than `b`).
    fn apply(&self, a: T, b: T) -> T;
}

/// Numeric types the built-in operations support. Integer sums and
/// products wrap on overflow (no panic); `Min`/`Max` keep the first operand
/// when the two are unordered (NaN).
pub trait Number: Pod + PartialOrd {
    /// `a + b`.
    fn add(a: Self, b: Self) -> Self;
    /// `a * b`.
    fn mul(a: Self, b: Self) -> Self;
}

macro_rules! int_number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            fn add(a: Self, b: Self) -> Self { a.wrapping_add(b) }
            fn mul(a: Self, b: Self) -> Self { a.wrapping_mul(b) }
        }
    )*};
}
int_number!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

macro_rules! float_number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            fn add(a: Self, b: Self) -> Self { a + b }
            fn mul(a: Self, b: Self) -> Self { a * b }
        }
    )*};
}
float_number!(f32, f64);

/// Sum.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sum;
/// Product.
#[derive(Clone, Copy, Debug, Default)]
pub struct Prod;
/// Minimum.
#[derive(Clone, Copy, Debug, Default)]
pub struct Min;
/// Maximum.
#[derive(Clone, Copy, Debug, Default)]
pub struct Max;

impl<T: Number> Op<T> for Sum {
    fn apply(&self, a: T, b: T) -> T {
        T::add(a, b)
    }
}
impl<T: Number> Op<T> for Prod {
    fn apply(&self, a: T, b: T) -> T {
        T::mul(a, b)
    }
}
impl<T: Number> Op<T> for Min {
    fn apply(&self, a: T, b: T) -> T {
        if b < a { b } else { a }
    }
}
impl<T: Number> Op<T> for Max {
    fn apply(&self, a: T, b: T) -> T {
        if b > a { b } else { a }
    }
}

/// A user-defined operation from a closure: `vpml::op::from_fn(|a, b| …)`.
/// It must be associative; it need not be commutative.
pub struct FnOp<F>(F);

/// Make an operation from an associative closure.
pub fn from_fn<T, F: Fn(T, T) -> T>(f: F) -> FnOp<F> {
    FnOp(f)
}

impl<T, F: Fn(T, T) -> T> Op<T> for FnOp<F> {
    fn apply(&self, a: T, b: T) -> T {
        (self.0)(a, b)
    }
}

/// `acc[i] = acc[i] ⊕ right[i]`.
pub(crate) fn fold_right<T: Copy, O: Op<T> + ?Sized>(op: &O, acc: &mut [T], right: &[T]) {
    wide_vectors(std::mem::size_of_val(acc), || {
        for (a, &b) in acc.iter_mut().zip(right) {
            *a = op.apply(*a, b);
        }
    })
}

/// `acc[i] = left[i] ⊕ acc[i]`.
pub(crate) fn fold_left<T: Copy, O: Op<T> + ?Sized>(op: &O, left: &[T], acc: &mut [T]) {
    wide_vectors(std::mem::size_of_val(acc), || {
        for (a, &l) in acc.iter_mut().zip(left) {
            *a = op.apply(l, *a);
        }
    })
}

/// Run `f`, an element loop over `bytes` bytes, compiled for the CPU's
/// widest vectors (AVX-512, else AVX2) when it has them and the loop is
/// long enough to gain.
///
/// The crate is built for the x86-64 baseline, whose vectors hold two
/// doubles; Open MPI picks AVX-512 reductions at run time, and a 16 KiB
/// `MPI_Accumulate` took vpml 1.7x its time. Each element is combined by
/// the same IEEE operation at any width (Rust never fuses a multiply and
/// an add; min and max compare and select), so results stay
/// bit-identical. The gain rests on the compiler inlining `f` into the
/// functions compiled for the wider vectors, as it does for the short
/// loops given here (checked with `perf annotate`: `zmm` registers).
#[inline(always)]
pub fn wide_vectors<R>(bytes: usize, f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if bytes >= WIDE_FROM {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            return unsafe { with_avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { with_avx2(f) };
        }
    }
    let _ = bytes;
    f()
}

/// Loops shorter than this stay on the baseline code (no gain to win).
#[cfg(target_arch = "x86_64")]
const WIDE_FROM: usize = 256;

/// `f` inlined into a function compiled for AVX-512F.
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `f` inlined into a function compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that tell IEEE operations apart: signed zeros, infinities,
    /// NaNs, subnormals, and sums that round.
    fn awkward(n: usize, seed: u64) -> Vec<f64> {
        let special = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE / 3.0,
            1e308,
            0.1,
        ];
        (0..n as u64)
            .map(|i| {
                let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed;
                if x.is_multiple_of(5) {
                    special[(x >> 8) as usize % special.len()]
                } else {
                    (x >> 11) as f64 * 1e-3 - 1e12
                }
            })
            .collect()
    }

    /// Both folds of `a` and `b` by `op`, element against element (`op`
    /// known at compile time, so that in an optimized build the folds'
    /// loops are vector code), then the right fold compiled for each
    /// vector width this CPU has, called directly.
    fn folds_match_elements<O: Op<f64>>(name: &str, op: &O, a: &[f64], b: &[f64]) {
        let n = a.len();
        let same = |got: &[f64], left: bool, how: &str| {
            for i in 0..n {
                let want = if left {
                    op.apply(b[i], a[i])
                } else {
                    op.apply(a[i], b[i])
                };
                assert_eq!(got[i].to_bits(), want.to_bits(), "{name} {how} {n} {i}");
            }
        };
        let mut right = a.to_vec();
        fold_right(op, &mut right, b);
        same(&right, false, "fold_right");
        let mut left = a.to_vec();
        fold_left(op, b, &mut left);
        same(&left, true, "fold_left");
        #[cfg(target_arch = "x86_64")]
        {
            let plain = |acc: &mut [f64]| {
                for (x, &y) in acc.iter_mut().zip(b) {
                    *x = op.apply(*x, y);
                }
            };
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut acc = a.to_vec();
                // SAFETY: the CPU has AVX2.
                unsafe { with_avx2(|| plain(&mut acc)) };
                same(&acc, false, "avx2");
            } else {
                eprintln!("no AVX2 on this CPU: its fold is not tested");
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                let mut acc = a.to_vec();
                // SAFETY: the CPU has AVX-512F.
                unsafe { with_avx512(|| plain(&mut acc)) };
                same(&acc, false, "avx512");
            } else {
                eprintln!("no AVX-512F on this CPU: its fold is not tested");
            }
        }
    }

    #[test]
    fn wide_folds_give_every_element_the_bits_of_a_scalar_fold() {
        // Lengths around the threshold and the vector widths, so that
        // both code paths and every loop tail run.
        for n in [1, 31, 32, 33, 255, 256, 257, 1000] {
            let (a, b) = (awkward(n, 1), awkward(n, 2));
            folds_match_elements("sum", &Sum, &a, &b);
            folds_match_elements("prod", &Prod, &a, &b);
            folds_match_elements("min", &Min, &a, &b);
            folds_match_elements("max", &Max, &a, &b);
        }
    }
}
