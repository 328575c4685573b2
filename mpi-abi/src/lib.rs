//! # vpml-mpi-abi — unmodified MPI C programs on vpml
//!
//! A `cdylib` with MPICH's ABI (`libmpich.so.12`): a C program compiled
//! against MPICH (`mpicc.mpich`), or against vpml's own `include/mpi.h`
//! (`vpml mpicc`), runs on vpml when this library comes first on its
//! loader path (`vpml run` does that for programs linked against
//! `libmpich.so.12`; `--mpi-abi` forces it), and so gets message logging
//! and single-rank recovery from `vpml run --protocol pessimist`.
//!
//! ABI facts (handle values, `MPI_Status` layout) are those of MPICH's
//! `mpi.h`, listed in [`consts`]. Layers:
//!
//! * [`state`] — the handle tables (communicators, requests, derived
//!   datatypes, user operations) and MPI error handling: with
//!   `MPI_ERRORS_ARE_FATAL` (the default) one line naming the function and
//!   error, then the job stops; with `MPI_ERRORS_RETURN` the code comes
//!   back to the caller;
//! * [`env`](mod@env) — init/finalize, versions, error strings, timers, memory,
//!   datatype and operation handles;
//! * [`comm`] — communicators (`dup`, `split`, `free`, `compare`, error
//!   handlers); `MPI_COMM_SELF` is made at init;
//! * [`p2p`] — blocking, buffered, nonblocking and persistent point to
//!   point, the whole wait/test family on vpml's calls of the same name
//!   (so a logging protocol logs exactly what it would for a Rust program),
//!   probes, cancel;
//! * [`coll`] — barrier, broadcast, reductions (every predefined operation,
//!   user operations, `MINLOC`/`MAXLOC` pairs), gathers, scatters,
//!   all-to-all, with `MPI_IN_PLACE`;
//! * [`types`] — datatype sizes (predefined types and contiguous derived
//!   ones move as bytes) and reductions.
//!
//! * [`rma`] — one-sided communication (windows, put/get/accumulates,
//!   fence, post/start/complete/wait, locks), carried as messages a target
//!   serves whenever it waits in the library, so logging replays it;
//! * [`ext`] — `vpml_ext.h`: `VPMLX_Checkpoint`/`VPMLX_Restarted`, for
//!   programs that want to restart from a checkpoint rather than replay
//!   from the start;
//! * [`agreement`] — how communicators' contexts are agreed while other
//!   threads call MPI;
//! * [`threads`] — the call lock every call takes under
//!   `MPI_THREAD_SERIALIZED` and `MPI_THREAD_MULTIPLE`, and how a blocking
//!   call waits without it;
//! * [`unsupported`] — every other function of MPICH's ABI, failing with
//!   `MPI_ERR_UNSUPPORTED_OPERATION` and its name.
//!
//! Every function is also exported as `PMPI_*`.

use std::ffi::c_int;

/// Export each function as `MPI_x` and its profiling twin `PMPI_x`. Each
/// call holds the call lock (see `threads::enter`), except in a block that
/// starts with `any_thread:` — the calls any thread may make at any time
/// (`MPI_Initialized`, `MPI_Finalized`, `MPI_Query_thread`), which answer
/// even while another thread is inside a blocking call and touch no state
/// but atomics.
macro_rules! export {
    (any_thread: $($fns:tt)*) => {
        export!(@each false; $($fns)*);
    };
    (@each $lock:literal; $(fn $name:ident / $pname:ident ($($arg:ident : $ty:ty),*) -> c_int $body:block)*) => {
        $(
            /// MPI binding (see the crate docs).
            ///
            /// # Safety
            /// The pointers follow the MPI standard's contract for this call.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                let _call = $lock.then(crate::threads::enter);
                $body
            }

            /// Profiling entry point of the same function.
            ///
            /// # Safety
            /// As the `MPI_` function.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $pname($($arg: $ty),*) -> c_int {
                // SAFETY: same contract.
                unsafe { $name($($arg),*) }
            }
        )*
    };
    ($($fns:tt)*) => {
        export!(@each true; $($fns)*);
    };
}

pub mod agreement;
pub mod attr;
pub mod coll;
pub mod comm;
pub mod consts;
pub mod env;
pub mod errhan;
pub mod ext;
pub mod group;
pub mod info;
pub mod large_count;
pub mod p2p;
pub mod pack;
pub mod recipes;
pub mod rma;
pub mod session;
pub mod state;
pub mod threads;
pub mod tools;
pub mod topo;
pub mod typemaps;
pub mod types;
pub mod unsupported;

/// MPICH's `MPI_Status`, for Rust callers of the bindings.
pub use consts::MpiStatus;

/// The error class a call returned (`MPI_SUCCESS` is 0), for Rust callers.
pub type ErrorCode = c_int;
