//! The rest of MPICH's ABI: every other `MPI_*` function an MPICH
//! program may link against exists here, so such a program loads, and a
//! call fails with `MPI_ERR_UNSUPPORTED_OPERATION` through the error
//! handler of `MPI_COMM_WORLD`, naming the function (fatal by default).
//!
//! The names are those of MPICH's `mpi_proto.h` that this library does
//! not implement. The stubs take no parameters: on x86-64 the caller
//! passes arguments in registers and cleans up its own stack, so a stub
//! may ignore whatever the real signature carries; each returns `int`,
//! like every function listed.

use std::ffi::c_int;

use crate::consts::{MPI_COMM_WORLD, MPI_ERR_UNSUPPORTED_OPERATION};
use crate::state::error;

fn unsupported(func: &str) -> c_int {
    let _call = crate::threads::enter();
    error(
        MPI_COMM_WORLD,
        func,
        MPI_ERR_UNSUPPORTED_OPERATION,
        "not supported by vpml's MPI library",
    )
}

macro_rules! unsupported {
    ($($name:ident / $pname:ident),* $(,)?) => {$(
        /// Not supported by vpml: fails with `MPI_ERR_UNSUPPORTED_OPERATION`.
        #[unsafe(no_mangle)]
        pub extern "C" fn $name() -> c_int {
            unsupported(stringify!($name))
        }

        /// Profiling entry point of the same stub.
        #[unsafe(no_mangle)]
        pub extern "C" fn $pname() -> c_int {
            unsupported(stringify!($name))
        }
    )*};
}

unsupported! {
    MPI_Close_port / PMPI_Close_port,
    MPI_Comm_accept / PMPI_Comm_accept,
    MPI_Comm_connect / PMPI_Comm_connect,
    MPI_Comm_disconnect / PMPI_Comm_disconnect,
    MPI_Comm_get_parent / PMPI_Comm_get_parent,
    MPI_Comm_join / PMPI_Comm_join,
    MPI_Comm_spawn / PMPI_Comm_spawn,
    MPI_Comm_spawn_multiple / PMPI_Comm_spawn_multiple,
    MPI_File_call_errhandler / PMPI_File_call_errhandler,
    MPI_File_create_errhandler / PMPI_File_create_errhandler,
    MPI_File_get_errhandler / PMPI_File_get_errhandler,
    MPI_File_set_errhandler / PMPI_File_set_errhandler,
    MPI_Lookup_name / PMPI_Lookup_name,
    MPI_Open_port / PMPI_Open_port,
    MPI_Publish_name / PMPI_Publish_name,
    MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex,
    MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer,
    MPI_Type_create_f90_real / PMPI_Type_create_f90_real,
    MPI_Unpublish_name / PMPI_Unpublish_name,
}
