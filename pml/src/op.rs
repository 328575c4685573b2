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
    for (a, &b) in acc.iter_mut().zip(right) {
        *a = op.apply(*a, b);
    }
}

/// `acc[i] = left[i] ⊕ acc[i]`.
pub(crate) fn fold_left<T: Copy, O: Op<T> + ?Sized>(op: &O, left: &[T], acc: &mut [T]) {
    for (a, &l) in acc.iter_mut().zip(left) {
        *a = op.apply(l, *a);
    }
}
