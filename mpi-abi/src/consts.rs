//! MPICH's ABI: handle types and the values of predefined handles and
//! constants (facts of MPICH's `mpi.h`, which `include/mpi.h` repeats).

#![allow(missing_docs)]

use std::ffi::c_int;

pub type Comm = c_int;
pub type Datatype = c_int;
pub type Op = c_int;
pub type Request = c_int;
pub type Errhandler = c_int;
pub type Group = c_int;
pub type Info = c_int;
pub type Win = c_int;
pub type Aint = isize;
/// `MPI_Count`.
pub type Count = i64;

pub const MPI_SUCCESS: c_int = 0;
pub const MPI_ERR_BUFFER: c_int = 1;
pub const MPI_ERR_COUNT: c_int = 2;
pub const MPI_ERR_TYPE: c_int = 3;
pub const MPI_ERR_TAG: c_int = 4;
pub const MPI_ERR_COMM: c_int = 5;
pub const MPI_ERR_RANK: c_int = 6;
pub const MPI_ERR_ROOT: c_int = 7;
pub const MPI_ERR_GROUP: c_int = 8;
pub const MPI_ERR_OP: c_int = 9;
pub const MPI_ERR_TOPOLOGY: c_int = 10;
pub const MPI_ERR_DIMS: c_int = 11;
pub const MPI_ERR_ARG: c_int = 12;
pub const MPI_ERR_UNKNOWN: c_int = 13;
pub const MPI_ERR_TRUNCATE: c_int = 14;
pub const MPI_ERR_OTHER: c_int = 15;
pub const MPI_ERR_INTERN: c_int = 16;
pub const MPI_ERR_IN_STATUS: c_int = 17;
pub const MPI_ERR_PENDING: c_int = 18;
pub const MPI_ERR_REQUEST: c_int = 19;
pub const MPI_ERR_CONVERSION: c_int = 23;
pub const MPI_ERR_INFO: c_int = 28;
pub const MPI_ERR_INFO_KEY: c_int = 29;
pub const MPI_ERR_INFO_VALUE: c_int = 30;
pub const MPI_ERR_INFO_NOKEY: c_int = 31;
pub const MPI_ERR_NO_MEM: c_int = 34;
pub const MPI_ERR_KEYVAL: c_int = 48;
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 44;
pub const MPI_ERR_LASTCODE: c_int = 0x3fff_ffff;
pub const MPI_ERR_WIN: c_int = 45;
pub const MPI_ERR_BASE: c_int = 46;
pub const MPI_ERR_LOCKTYPE: c_int = 47;
pub const MPI_ERR_RMA_CONFLICT: c_int = 49;
pub const MPI_ERR_RMA_SYNC: c_int = 50;
pub const MPI_ERR_SIZE: c_int = 51;
pub const MPI_ERR_DISP: c_int = 52;
pub const MPI_ERR_ASSERT: c_int = 53;
pub const MPI_ERR_RMA_RANGE: c_int = 55;
pub const MPI_ERR_RMA_ATTACH: c_int = 56;
pub const MPI_ERR_RMA_SHARED: c_int = 57;
pub const MPI_ERR_RMA_FLAVOR: c_int = 58;

pub const MPI_COMM_NULL: Comm = 0x0400_0000;
pub const MPI_COMM_WORLD: Comm = 0x4400_0000;
pub const MPI_COMM_SELF: Comm = 0x4400_0001;
/// Kind bits of the communicators this library creates.
pub const USER_COMM_KIND: u32 = 0x8400_0000;
pub const MPI_GROUP_NULL: Group = 0x0800_0000;
pub const MPI_GROUP_EMPTY: Group = 0x4800_0000;
/// Kind bits of the groups this library creates.
pub const USER_GROUP_KIND: u32 = 0x8800_0000;
pub const MPI_INFO_NULL: Info = 0x1c00_0000;
pub const MPI_INFO_ENV: Info = 0x5c00_0001;
/// Kind bits of the info objects this library creates.
pub const USER_INFO_KIND: u32 = 0x9c00_0000;
pub const MPI_COMM_TYPE_SHARED: c_int = 1;
pub const MPI_MAX_OBJECT_NAME: usize = 128;
pub const MPI_REQUEST_NULL: Request = 0x2c00_0000;
/// Kind bits of request handles.
pub const REQUEST_KIND: u32 = 0x2c00_0000;
pub const MPI_DATATYPE_NULL: Datatype = 0x0c00_0000;
/// Kind bits of the derived datatypes this library creates.
pub const USER_TYPE_KIND: u32 = 0xcc00_0000;
pub const MPI_OP_NULL: Op = 0x1800_0000;
/// Kind bits of user operations.
pub const USER_OP_KIND: u32 = 0x9800_0000;
pub const MPI_ERRHANDLER_NULL: Errhandler = 0x1400_0000;
pub const MPI_ERRORS_ARE_FATAL: Errhandler = 0x5400_0000;
pub const MPI_ERRORS_RETURN: Errhandler = 0x5400_0001;
pub const MPI_ERRORS_ABORT: Errhandler = 0x5400_0003;
/// Kind bits of user error handlers.
pub const USER_ERRHANDLER_KIND: u32 = 0x9400_0000;
/// Keyvals made by the program.
pub const USER_KEYVAL_KIND: u32 = 0xa400_0000;
/// Windows (`MPI_Win_create` …).
pub const MPI_WIN_NULL: Win = 0x2000_0000;
pub const USER_WIN_KIND: u32 = 0xa000_0000;
pub const MPI_LOCK_EXCLUSIVE: c_int = 234;
pub const MPI_LOCK_SHARED: c_int = 235;
pub const MPI_MODE_NOCHECK: c_int = 1024;
pub const MPI_WIN_FLAVOR_CREATE: c_int = 1;
pub const MPI_WIN_FLAVOR_ALLOCATE: c_int = 2;
pub const MPI_WIN_FLAVOR_DYNAMIC: c_int = 3;
pub const MPI_WIN_FLAVOR_SHARED: c_int = 4;
pub const MPI_WIN_SEPARATE: c_int = 1;
pub const MPI_WIN_UNIFIED: c_int = 2;
/// Messages taken by matched probes.
pub const MESSAGE_KIND: u32 = 0xac00_0000;

pub const MPI_IDENT: c_int = 0;
pub const MPI_CONGRUENT: c_int = 1;
pub const MPI_SIMILAR: c_int = 2;
pub const MPI_UNEQUAL: c_int = 3;
pub const MPI_UNDEFINED: c_int = -32766;
pub const MPI_GRAPH: c_int = 1;
pub const MPI_CART: c_int = 2;
pub const MPI_DIST_GRAPH: c_int = 3;
pub const MPI_PROC_NULL: c_int = -1;
pub const MPI_ROOT: c_int = -3;
pub const MPI_ANY_SOURCE: c_int = -2;
pub const MPI_ANY_TAG: c_int = -1;
pub const MPI_THREAD_SINGLE: c_int = 0;
pub const MPI_THREAD_FUNNELED: c_int = 1;
pub const MPI_THREAD_SERIALIZED: c_int = 2;
pub const MPI_THREAD_MULTIPLE: c_int = 3;
pub const MPI_MAX_PROCESSOR_NAME: usize = 128;
pub const MPI_MAX_ERROR_STRING: usize = 512;
pub const MPI_MAX_LIBRARY_VERSION_STRING: usize = 8192;
pub const MPI_BSEND_OVERHEAD: c_int = 96;

// Predefined datatypes: 0x4c00SSxx has size SS bytes.
pub const MPI_CHAR: Datatype = 0x4c00_0101;
pub const MPI_SIGNED_CHAR: Datatype = 0x4c00_0118;
pub const MPI_UNSIGNED_CHAR: Datatype = 0x4c00_0102;
pub const MPI_BYTE: Datatype = 0x4c00_010d;
pub const MPI_WCHAR: Datatype = 0x4c00_040e;
pub const MPI_SHORT: Datatype = 0x4c00_0203;
pub const MPI_UNSIGNED_SHORT: Datatype = 0x4c00_0204;
pub const MPI_INT: Datatype = 0x4c00_0405;
pub const MPI_UNSIGNED: Datatype = 0x4c00_0406;
pub const MPI_LONG: Datatype = 0x4c00_0807;
pub const MPI_UNSIGNED_LONG: Datatype = 0x4c00_0808;
pub const MPI_FLOAT: Datatype = 0x4c00_040a;
pub const MPI_DOUBLE: Datatype = 0x4c00_080b;
pub const MPI_LONG_DOUBLE: Datatype = 0x4c00_100c;
pub const MPI_LONG_LONG_INT: Datatype = 0x4c00_0809;
pub const MPI_UNSIGNED_LONG_LONG: Datatype = 0x4c00_0819;
pub const MPI_PACKED: Datatype = 0x4c00_010f;
/// MPI-1's bound markers (removed in MPI 3.0; MPICH keeps them).
pub const MPI_LB: Datatype = 0x4c00_0010;
pub const MPI_UB: Datatype = 0x4c00_0011;
pub const MPI_2INT: Datatype = 0x4c00_0816;
pub const MPI_INT8_T: Datatype = 0x4c00_0137;
pub const MPI_INT16_T: Datatype = 0x4c00_0238;
pub const MPI_INT32_T: Datatype = 0x4c00_0439;
pub const MPI_INT64_T: Datatype = 0x4c00_083a;
pub const MPI_UINT8_T: Datatype = 0x4c00_013b;
pub const MPI_UINT16_T: Datatype = 0x4c00_023c;
pub const MPI_UINT32_T: Datatype = 0x4c00_043d;
pub const MPI_UINT64_T: Datatype = 0x4c00_083e;
pub const MPI_C_BOOL: Datatype = 0x4c00_013f;
pub const MPI_C_FLOAT_COMPLEX: Datatype = 0x4c00_0840;
pub const MPI_C_DOUBLE_COMPLEX: Datatype = 0x4c00_1041;
pub const MPI_CXX_FLOAT_COMPLEX: Datatype = 0x4c00_0834;
pub const MPI_CXX_DOUBLE_COMPLEX: Datatype = 0x4c00_1035;
pub const MPI_C_LONG_DOUBLE_COMPLEX: Datatype = 0x4c00_2042;
pub const MPI_CXX_LONG_DOUBLE_COMPLEX: Datatype = 0x4c00_2036;
pub const MPI_AINT: Datatype = 0x4c00_0843;
pub const MPI_OFFSET: Datatype = 0x4c00_0844;
pub const MPI_COUNT: Datatype = 0x4c00_0845;
pub const MPI_CXX_BOOL: Datatype = 0x4c00_0133;
// Fortran's types, as MPICH's C header names them.
pub const MPI_CHARACTER: Datatype = 0x4c00_011a;
pub const MPI_INTEGER: Datatype = 0x4c00_041b;
pub const MPI_REAL: Datatype = 0x4c00_041c;
pub const MPI_LOGICAL: Datatype = 0x4c00_041d;
pub const MPI_COMPLEX: Datatype = 0x4c00_081e;
pub const MPI_DOUBLE_PRECISION: Datatype = 0x4c00_081f;
pub const MPI_2INTEGER: Datatype = 0x4c00_0820;
pub const MPI_2REAL: Datatype = 0x4c00_0821;
pub const MPI_DOUBLE_COMPLEX: Datatype = 0x4c00_1022;
pub const MPI_2DOUBLE_PRECISION: Datatype = 0x4c00_1023;
pub const MPI_REAL4: Datatype = 0x4c00_0427;
pub const MPI_REAL8: Datatype = 0x4c00_0829;
pub const MPI_COMPLEX8: Datatype = 0x4c00_0828;
pub const MPI_COMPLEX16: Datatype = 0x4c00_102a;
pub const MPI_INTEGER1: Datatype = 0x4c00_012d;
pub const MPI_INTEGER2: Datatype = 0x4c00_022f;
pub const MPI_INTEGER4: Datatype = 0x4c00_0430;
pub const MPI_INTEGER8: Datatype = 0x4c00_0831;
pub const MPI_REAL16: Datatype = 0x4c00_102b;
pub const MPI_COMPLEX32: Datatype = 0x4c00_202c;
pub const MPI_FLOAT_INT: Datatype = 0x8c00_0000u32 as i32;
pub const MPI_DOUBLE_INT: Datatype = 0x8c00_0001u32 as i32;
pub const MPI_LONG_INT: Datatype = 0x8c00_0002u32 as i32;
pub const MPI_SHORT_INT: Datatype = 0x8c00_0003u32 as i32;
pub const MPI_LONG_DOUBLE_INT: Datatype = 0x8c00_0004u32 as i32;

pub const MPI_MAX: Op = 0x5800_0001;
pub const MPI_MIN: Op = 0x5800_0002;
pub const MPI_SUM: Op = 0x5800_0003;
pub const MPI_PROD: Op = 0x5800_0004;
pub const MPI_LAND: Op = 0x5800_0005;
pub const MPI_BAND: Op = 0x5800_0006;
pub const MPI_LOR: Op = 0x5800_0007;
pub const MPI_BOR: Op = 0x5800_0008;
pub const MPI_LXOR: Op = 0x5800_0009;
pub const MPI_BXOR: Op = 0x5800_000a;
pub const MPI_MINLOC: Op = 0x5800_000b;
pub const MPI_MAXLOC: Op = 0x5800_000c;
pub const MPI_REPLACE: Op = 0x5800_000d;
pub const MPI_NO_OP: Op = 0x5800_000e;

/// MPICH's `MPI_Status`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MpiStatus {
    pub count_lo: c_int,
    pub count_hi_and_cancelled: c_int,
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
}

/// `MPI_IN_PLACE`.
pub fn in_place<T>(p: *const T) -> bool {
    p as isize == -1
}

/// `MPI_STATUS_IGNORE` / `MPI_STATUSES_IGNORE` (address 1) or null.
pub fn ignored<T>(p: *const T) -> bool {
    (p as usize) <= 1
}
