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
//!
//! By job: datatype handles, layouts and packing (`datatype`), the
//! message buffer of point-to-point calls (`message`), reductions
//! (`reduce`) over the element types of `element` (with `long_double`, C's
//! `long double` on x86-64).

mod datatype;
mod element;
#[cfg(target_arch = "x86_64")]
mod long_double;
mod message;
mod reduce;

pub(crate) use datatype::{
    Builder, info, is_padded_pair, is_pair, layout, pack, padded_pair, predefined_size,
    private_copy, release_copy, span, unpack,
};
pub(crate) use message::Message;
pub(crate) use reduce::{CombineOp, Reduction, fold_into, fold_packed, reduce, reduce_predefined};
