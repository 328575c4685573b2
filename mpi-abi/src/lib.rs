//! # vpml-mpi-abi — unmodified MPI C programs on vpml (first slice)
//!
//! A `cdylib` with MPICH's ABI (`libmpich.so.12`): a C program compiled
//! against MPICH (`mpicc.mpich`) runs on vpml when this library comes first
//! on its loader path (`vpml run --mpi-abi`), and so gets message logging
//! and single-rank recovery from `vpml run --protocol pessimist`.
//!
//! ABI facts (handle values, `MPI_Status` layout) are those of MPICH's
//! `mpi.h`: `MPI_COMM_WORLD` is `0x44000000`; a predefined datatype
//! `0x4c00SSxx` has size `SS` bytes; `MPI_Op`s are `0x580000xx`.
//!
//! This first slice covers the environment (`Init`, `Init_thread`,
//! `Initialized`, `Finalize`, `Finalized`, `Abort`, `Wtime`, `Wtick`,
//! `Get_processor_name`), `Comm_rank`/`Comm_size` on `MPI_COMM_WORLD`,
//! blocking `Send`/`Recv` (with `MPI_ANY_SOURCE`, `MPI_ANY_TAG`,
//! `MPI_PROC_NULL`, `MPI_STATUS_IGNORE`), `Get_count`, `Barrier` and
//! `Allreduce` (sum, max, min, product of int, long, float, double, with
//! `MPI_IN_PLACE`). Every function is also exported as `PMPI_*`. Errors
//! follow `MPI_ERRORS_ARE_FATAL`: one line naming the function, then the
//! job stops.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};

type Comm = c_int;
type Datatype = c_int;
type Op = c_int;

const MPI_SUCCESS: c_int = 0;
const MPI_ERR_COMM: c_int = 5;
const MPI_ERR_TYPE: c_int = 3;
const MPI_ERR_OP: c_int = 9;
const MPI_ERR_OTHER: c_int = 15;
const MPI_COMM_WORLD: Comm = 0x4400_0000;
const MPI_ANY_SOURCE: c_int = -2;
const MPI_ANY_TAG: c_int = -1;
const MPI_PROC_NULL: c_int = -1;
const MPI_INT: Datatype = 0x4c00_0405;
const MPI_LONG: Datatype = 0x4c00_0807;
const MPI_FLOAT: Datatype = 0x4c00_040a;
const MPI_DOUBLE: Datatype = 0x4c00_080b;
const MPI_MAX: Op = 0x5800_0001;
const MPI_MIN: Op = 0x5800_0002;
const MPI_SUM: Op = 0x5800_0003;
const MPI_PROD: Op = 0x5800_0004;
const MPI_THREAD_FUNNELED: c_int = 1;
const MPI_MAX_PROCESSOR_NAME: usize = 128;

/// MPICH's `MPI_Status`.
#[repr(C)]
pub struct MpiStatus {
    count_lo: c_int,
    count_hi_and_cancelled: c_int,
    source: c_int,
    tag: c_int,
    error: c_int,
}

thread_local! {
    static WORLD: RefCell<Option<vpml::World>> = const { RefCell::new(None) };
    static FINALIZED: RefCell<bool> = const { RefCell::new(false) };
}

/// MPI_ERRORS_ARE_FATAL: one line naming the function, then the job stops.
fn fatal(func: &str, code: c_int, why: &str) -> c_int {
    eprintln!("vpml libmpi: {func}: {why} (MPI error {code})");
    WORLD.with(|w| {
        if let Ok(world) = w.try_borrow()
            && let Some(world) = world.as_ref()
        {
            world.abort(code.max(1));
        }
    });
    std::process::exit(code.max(1))
}

fn with_world<T>(
    func: &str,
    comm: Comm,
    f: impl FnOnce(&vpml::World) -> vpml::Result<T>,
) -> Result<T, c_int> {
    if comm != MPI_COMM_WORLD {
        return Err(fatal(
            func,
            MPI_ERR_COMM,
            "only MPI_COMM_WORLD is supported so far",
        ));
    }
    WORLD.with(|w| match w.borrow().as_ref() {
        Some(world) => f(world).map_err(|e| fatal(func, MPI_ERR_OTHER, &e.to_string())),
        None => Err(fatal(func, MPI_ERR_OTHER, "called before MPI_Init")),
    })
}

/// Size in bytes of a predefined datatype (MPICH encodes it in the handle).
fn type_size(dt: Datatype) -> Option<usize> {
    ((dt as u32) >> 24 == 0x4c).then_some(((dt as u32 >> 8) & 0xff) as usize)
}

/// The bytes of `count` elements of `dt` at `buf`.
///
/// # Safety
/// `buf` points to `count` elements of `dt` (the C caller's contract).
unsafe fn bytes<'a>(buf: *const c_void, count: c_int, dt: Datatype) -> Option<&'a mut [u8]> {
    let n = type_size(dt)?.checked_mul(usize::try_from(count).ok()?)?;
    if n == 0 {
        return Some(&mut []);
    }
    // SAFETY: caller contract.
    Some(unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, n) })
}

macro_rules! export {
    ($(fn $name:ident / $pname:ident ($($arg:ident : $ty:ty),*) -> c_int $body:block)*) => {
        $(
            /// MPI binding (see the crate docs).
            ///
            /// # Safety
            /// The pointers follow the MPI standard's contract for this call.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int $body

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
}

fn init(func: &str) -> c_int {
    if WORLD.with(|w| w.borrow().is_some()) {
        return fatal(func, MPI_ERR_OTHER, "called twice");
    }
    match vpml::init() {
        Ok(world) => {
            WORLD.with(|w| *w.borrow_mut() = Some(world));
            MPI_SUCCESS
        }
        Err(e) => fatal(func, MPI_ERR_OTHER, &e.to_string()),
    }
}

fn reduce_as<T: vpml::Pod>(
    world: &vpml::World,
    send: Option<&[u8]>,
    recv: &mut [u8],
    op: Op,
) -> vpml::Result<()>
where
    vpml::Sum: vpml::Op<T>,
    vpml::Max: vpml::Op<T>,
    vpml::Min: vpml::Op<T>,
    vpml::Prod: vpml::Op<T>,
{
    // The C buffers hold `T`s, suitably aligned (the caller's contract):
    // copy through owned vectors so no alignment is assumed here.
    let n = recv.len() / std::mem::size_of::<T>();
    let mut acc: Vec<T> = vec![<T as bytemuck::Zeroable>::zeroed(); n];
    bytemuck::cast_slice_mut::<T, u8>(&mut acc).copy_from_slice(send.unwrap_or(recv));
    match op {
        MPI_SUM => world.allreduce_in_place(&mut acc, &vpml::Sum)?,
        MPI_MAX => world.allreduce_in_place(&mut acc, &vpml::Max)?,
        MPI_MIN => world.allreduce_in_place(&mut acc, &vpml::Min)?,
        _ => world.allreduce_in_place(&mut acc, &vpml::Prod)?,
    }
    recv.copy_from_slice(bytemuck::cast_slice::<T, u8>(&acc));
    Ok(())
}

export! {
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
        init("MPI_Init")
    }

    fn MPI_Init_thread / PMPI_Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) -> c_int {
        let r = init("MPI_Init_thread");
        if !provided.is_null() {
            // SAFETY: the caller passes a valid int pointer.
            unsafe { *provided = required.min(MPI_THREAD_FUNNELED) };
        }
        r
    }

    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) -> c_int {
        let v = WORLD.with(|w| w.borrow().is_some()) || FINALIZED.with(|f| *f.borrow());
        // SAFETY: valid int pointer (caller contract).
        unsafe { *flag = c_int::from(v) };
        MPI_SUCCESS
    }

    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) -> c_int {
        // SAFETY: valid int pointer (caller contract).
        unsafe { *flag = c_int::from(FINALIZED.with(|f| *f.borrow())) };
        MPI_SUCCESS
    }

    fn MPI_Finalize / PMPI_Finalize() -> c_int {
        let Some(world) = WORLD.with(|w| w.borrow_mut().take()) else {
            return fatal("MPI_Finalize", MPI_ERR_OTHER, "called before MPI_Init");
        };
        FINALIZED.with(|f| *f.borrow_mut() = true);
        match world.finalize() {
            Ok(()) => MPI_SUCCESS,
            Err(e) => fatal("MPI_Finalize", MPI_ERR_OTHER, &e.to_string()),
        }
    }

    fn MPI_Abort / PMPI_Abort(_comm: Comm, code: c_int) -> c_int {
        let code = if code == 0 { 1 } else { code };
        WORLD.with(|w| {
            if let Ok(world) = w.try_borrow()
                && let Some(world) = world.as_ref()
            {
                world.abort(code);
            }
        });
        std::process::exit(code)
    }

    fn MPI_Comm_rank / PMPI_Comm_rank(comm: Comm, rank: *mut c_int) -> c_int {
        match with_world("MPI_Comm_rank", comm, |w| Ok(w.rank())) {
            Ok(r) => {
                // SAFETY: valid int pointer (caller contract).
                unsafe { *rank = r as c_int };
                MPI_SUCCESS
            }
            Err(c) => c,
        }
    }

    fn MPI_Comm_size / PMPI_Comm_size(comm: Comm, size: *mut c_int) -> c_int {
        match with_world("MPI_Comm_size", comm, |w| Ok(w.size())) {
            Ok(s) => {
                // SAFETY: valid int pointer (caller contract).
                unsafe { *size = s as c_int };
                MPI_SUCCESS
            }
            Err(c) => c,
        }
    }

    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        if dest == MPI_PROC_NULL {
            return MPI_SUCCESS;
        }
        // SAFETY: the caller's buffer holds `count` elements of `dt`.
        let Some(data) = (unsafe { bytes(buf, count, dt) }) else {
            return fatal("MPI_Send", MPI_ERR_TYPE, "unsupported datatype or count");
        };
        let dest = usize::try_from(dest).unwrap_or(usize::MAX);
        match with_world("MPI_Send", comm, |w| w.send(dest, tag, &*data)) {
            Ok(()) => MPI_SUCCESS,
            Err(c) => c,
        }
    }

    fn MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, dt: Datatype, source: c_int, tag: c_int, comm: Comm, status: *mut MpiStatus) -> c_int {
        let fill = |st: &mut MpiStatus, src: c_int, tg: c_int, n: usize| {
            st.count_lo = n as c_int;
            st.count_hi_and_cancelled = 0;
            st.source = src;
            st.tag = tg;
            st.error = MPI_SUCCESS;
        };
        let status_out = (status as usize > 1).then_some(status);
        if source == MPI_PROC_NULL {
            if let Some(st) = status_out {
                // SAFETY: a valid status pointer (not MPI_STATUS_IGNORE).
                fill(unsafe { &mut *st }, MPI_PROC_NULL, MPI_ANY_TAG, 0);
            }
            return MPI_SUCCESS;
        }
        // SAFETY: the caller's buffer holds `count` elements of `dt`.
        let Some(data) = (unsafe { bytes(buf, count, dt) }) else {
            return fatal("MPI_Recv", MPI_ERR_TYPE, "unsupported datatype or count");
        };
        let from: vpml::Source = if source == MPI_ANY_SOURCE {
            vpml::ANY_SOURCE
        } else {
            usize::try_from(source).unwrap_or(usize::MAX).into()
        };
        let tag = if tag == MPI_ANY_TAG { vpml::ANY_TAG } else { tag };
        match with_world("MPI_Recv", comm, |w| w.recv(from, tag, data)) {
            Ok(st) => {
                if let Some(out) = status_out {
                    // SAFETY: a valid status pointer (not MPI_STATUS_IGNORE).
                    fill(unsafe { &mut *out }, st.source() as c_int, st.tag(), st.len());
                }
                MPI_SUCCESS
            }
            Err(c) => c,
        }
    }

    fn MPI_Get_count / PMPI_Get_count(status: *const MpiStatus, dt: Datatype, count: *mut c_int) -> c_int {
        let Some(size) = type_size(dt).filter(|&s| s > 0) else {
            return fatal("MPI_Get_count", MPI_ERR_TYPE, "unsupported datatype");
        };
        // SAFETY: valid status and int pointers (caller contract).
        unsafe {
            let n = (*status).count_lo as usize;
            *count = if n.is_multiple_of(size) { (n / size) as c_int } else { -1 };
        }
        MPI_SUCCESS
    }

    fn MPI_Barrier / PMPI_Barrier(comm: Comm) -> c_int {
        match with_world("MPI_Barrier", comm, |w| w.barrier()) {
            Ok(()) => MPI_SUCCESS,
            Err(c) => c,
        }
    }

    fn MPI_Allreduce / PMPI_Allreduce(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, comm: Comm) -> c_int {
        if !matches!(op, MPI_SUM | MPI_MAX | MPI_MIN | MPI_PROD) {
            return fatal("MPI_Allreduce", MPI_ERR_OP, "unsupported operation");
        }
        // SAFETY: the caller's buffers hold `count` elements of `dt`
        // (MPI_IN_PLACE, address -1, means the data is in `recv`).
        let (Some(out), input) = (unsafe { bytes(recv, count, dt) }, (send as isize != -1).then(|| unsafe { bytes(send, count, dt) }).flatten()) else {
            return fatal("MPI_Allreduce", MPI_ERR_TYPE, "unsupported datatype or count");
        };
        let input = input.map(|b| b.to_vec());
        let r = with_world("MPI_Allreduce", comm, |w| match dt {
            MPI_INT => reduce_as::<i32>(w, input.as_deref(), out, op),
            MPI_LONG => reduce_as::<i64>(w, input.as_deref(), out, op),
            MPI_FLOAT => reduce_as::<f32>(w, input.as_deref(), out, op),
            MPI_DOUBLE => reduce_as::<f64>(w, input.as_deref(), out, op),
            _ => Err(vpml::Error::RequestState("unsupported datatype for a reduction")),
        });
        match r {
            Ok(()) => MPI_SUCCESS,
            Err(c) => c,
        }
    }

    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, len: *mut c_int) -> c_int {
        let mut buf = [0u8; MPI_MAX_PROCESSOR_NAME];
        // SAFETY: gethostname writes at most buf.len() bytes.
        unsafe { libc::gethostname(buf.as_mut_ptr() as *mut c_char, buf.len() - 1) };
        let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len() - 1);
        // SAFETY: `name` holds MPI_MAX_PROCESSOR_NAME chars (caller contract).
        unsafe {
            std::ptr::copy_nonoverlapping(buf.as_ptr() as *const c_char, name, n + 1);
            *len = n as c_int;
        }
        MPI_SUCCESS
    }
}

/// `MPI_Wtime`: seconds since an arbitrary point.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Wtime() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Profiling entry point of `MPI_Wtime`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Wtime() -> f64 {
    MPI_Wtime()
}

/// `MPI_Wtick`: resolution of `MPI_Wtime`.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Wtick() -> f64 {
    1e-9
}

/// Profiling entry point of `MPI_Wtick`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Wtick() -> f64 {
    MPI_Wtick()
}
