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
    MPI_T_category_changed / PMPI_T_category_changed,
    MPI_T_category_get_categories / PMPI_T_category_get_categories,
    MPI_T_category_get_cvars / PMPI_T_category_get_cvars,
    MPI_T_category_get_events / PMPI_T_category_get_events,
    MPI_T_category_get_info / PMPI_T_category_get_info,
    MPI_T_category_get_pvars / PMPI_T_category_get_pvars,
    MPI_T_cvar_get_info / PMPI_T_cvar_get_info,
    MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc,
    MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free,
    MPI_T_cvar_read / PMPI_T_cvar_read,
    MPI_T_cvar_write / PMPI_T_cvar_write,
    MPI_T_enum_get_info / PMPI_T_enum_get_info,
    MPI_T_enum_get_item / PMPI_T_enum_get_item,
    MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info,
    MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info,
    MPI_T_event_copy / PMPI_T_event_copy,
    MPI_T_event_get_index / PMPI_T_event_get_index,
    MPI_T_event_get_info / PMPI_T_event_get_info,
    MPI_T_event_get_source / PMPI_T_event_get_source,
    MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp,
    MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc,
    MPI_T_event_handle_free / PMPI_T_event_handle_free,
    MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info,
    MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info,
    MPI_T_event_read / PMPI_T_event_read,
    MPI_T_event_register_callback / PMPI_T_event_register_callback,
    MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler,
    MPI_T_pvar_get_info / PMPI_T_pvar_get_info,
    MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc,
    MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free,
    MPI_T_pvar_read / PMPI_T_pvar_read,
    MPI_T_pvar_readreset / PMPI_T_pvar_readreset,
    MPI_T_pvar_reset / PMPI_T_pvar_reset,
    MPI_T_pvar_start / PMPI_T_pvar_start,
    MPI_T_pvar_stop / PMPI_T_pvar_stop,
    MPI_T_pvar_write / PMPI_T_pvar_write,
    MPI_T_source_get_info / PMPI_T_source_get_info,
    MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp,
    MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex,
    MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer,
    MPI_Type_create_f90_real / PMPI_Type_create_f90_real,
    MPI_Unpublish_name / PMPI_Unpublish_name,
}
