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
    MPI_DUP_FN / PMPI_DUP_FN,
    MPI_File_call_errhandler / PMPI_File_call_errhandler,
    MPI_File_create_errhandler / PMPI_File_create_errhandler,
    MPI_File_get_errhandler / PMPI_File_get_errhandler,
    MPI_File_set_errhandler / PMPI_File_set_errhandler,
    MPI_Info_create_env / PMPI_Info_create_env,
    MPI_Lookup_name / PMPI_Lookup_name,
    MPI_Open_port / PMPI_Open_port,
    MPI_Publish_name / PMPI_Publish_name,
    MPI_Session_call_errhandler / PMPI_Session_call_errhandler,
    MPI_Session_create_errhandler / PMPI_Session_create_errhandler,
    MPI_Status_c2f / PMPI_Status_c2f,
    MPI_Status_c2f08 / PMPI_Status_c2f08,
    MPI_Status_f082c / PMPI_Status_f082c,
    MPI_Status_f082f / PMPI_Status_f082f,
    MPI_Status_f2c / PMPI_Status_f2c,
    MPI_Status_f2f08 / PMPI_Status_f2f08,
    MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex,
    MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer,
    MPI_Type_create_f90_real / PMPI_Type_create_f90_real,
    MPI_Unpublish_name / PMPI_Unpublish_name,
}
