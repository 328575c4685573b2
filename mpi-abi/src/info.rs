//! Info objects (`MPI_Info_*`): ordered key/value lists of strings. vpml
//! reads no hint from them: calls that take one (`MPI_Comm_dup_with_info`,
//! `MPI_Comm_set_info`, …) accept it and carry on, as MPI allows.

use std::ffi::{CStr, c_char, c_int};

use crate::consts::*;
use crate::state::{STATE, error, handle_of, insert, put, slot_of};

/// Longest key and value (MPICH's `MPI_MAX_INFO_KEY`, `MPI_MAX_INFO_VAL`).
const MAX_KEY: usize = 255;
const MAX_VAL: usize = 1024;

/// The key/value pairs of info `h`, in the order they were first set.
pub(crate) fn pairs(h: Info) -> Option<Vec<(String, String)>> {
    if h == MPI_INFO_ENV {
        return Some(environment(None));
    }
    let i = slot_of(h, USER_INFO_KIND)?;
    STATE.with(|s| s.borrow().infos.get(i)?.clone())
}

/// Change the pairs of info `h`; false for an invalid (or predefined) one.
fn update(h: Info, f: impl FnOnce(&mut Vec<(String, String)>)) -> bool {
    let Some(i) = slot_of(h, USER_INFO_KIND) else {
        return false;
    };
    STATE.with(
        |s| match s.borrow_mut().infos.get_mut(i).and_then(Option::as_mut) {
            Some(p) => {
                f(p);
                true
            }
            None => false,
        },
    )
}

/// The value of `key` in info `h` (`None`: not set, or no such info).
pub(crate) fn value_of(h: Info, key: &str) -> Option<String> {
    pairs(h)?
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// What MPI says `MPI_INFO_ENV` and `MPI_Info_create_env` hold: the
/// command and its arguments (`args`, or this process's own), the number
/// of processes (once MPI is initialized), the host, the working
/// directory and the thread level.
fn environment(args: Option<Vec<String>>) -> Vec<(String, String)> {
    let args = args.unwrap_or_else(|| {
        std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    });
    let mut pairs = Vec::new();
    let mut push = |k: &str, v: String| pairs.push((k.to_string(), v));
    if let Some((command, rest)) = args.split_first() {
        push("command", command.clone());
        push("argv", rest.join(" "));
    }
    if let Some(world) = crate::state::world_comm() {
        push("maxprocs", world.size().to_string());
    }
    push("host", crate::env::hostname());
    if let Ok(dir) = std::env::current_dir() {
        push("wdir", dir.display().to_string());
    }
    let level = match crate::state::THREAD_LEVEL.load(std::sync::atomic::Ordering::Relaxed) {
        MPI_THREAD_SINGLE => "MPI_THREAD_SINGLE",
        MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        _ => "MPI_THREAD_MULTIPLE",
    };
    push("thread_level", level.to_string());
    pairs
}

/// A new info handle holding `pairs`.
pub(crate) fn new_info(pairs: Vec<(String, String)>) -> Info {
    STATE.with(|s| handle_of(USER_INFO_KIND, insert(&mut s.borrow_mut().infos, 0, pairs)))
}

/// The C string `p` as text, checked against `max` bytes.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn text(func: &str, p: *const c_char, max: usize, what: &str) -> Result<String, c_int> {
    if p.is_null() {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_ARG,
            &format!("null {what}"),
        ));
    }
    // SAFETY: caller contract.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    if s.is_empty() || s.len() > max {
        let class = if what == "key" {
            MPI_ERR_INFO_KEY
        } else {
            MPI_ERR_INFO_VALUE
        };
        return Err(error(
            MPI_COMM_WORLD,
            func,
            class,
            &format!("{what} of {} bytes (1 to {max})", s.len()),
        ));
    }
    Ok(s)
}

/// Copy `s` into the C buffer `out` of `room` bytes (NUL-terminated,
/// truncated to fit).
///
/// # Safety
/// `out` holds `room` bytes.
pub(crate) unsafe fn put_str(s: &str, out: *mut c_char, room: usize) {
    if out.is_null() || room == 0 {
        return;
    }
    let n = s.len().min(room - 1);
    // SAFETY: caller contract; n + 1 <= room.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, out, n);
        *out.add(n) = 0;
    }
}

/// The invalid-info error of `func`.
fn invalid(func: &str) -> c_int {
    error(MPI_COMM_WORLD, func, MPI_ERR_INFO, "invalid info object")
}

export! {
    fn MPI_Info_create / PMPI_Info_create(out: *mut Info) -> c_int {
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(out, new_info(Vec::new())) };
        MPI_SUCCESS
    }

    fn MPI_Info_create_env / PMPI_Info_create_env(argc: c_int, argv: *const *const c_char, out: *mut Info) -> c_int {
        // The program's arguments if it gives them (MPI allows null).
        let n = usize::try_from(argc).unwrap_or(0);
        let args = (!argv.is_null() && n > 0).then(|| {
            (0..n)
                .map(|i| {
                    // SAFETY: `argv` holds `argc` C strings (caller contract).
                    let a = unsafe { *argv.add(i) };
                    // SAFETY: as above (a null entry is skipped).
                    if a.is_null() { String::new() } else { unsafe { CStr::from_ptr(a) }.to_string_lossy().into_owned() }
                })
                .collect()
        });
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(out, new_info(environment(args))) };
        MPI_SUCCESS
    }

    fn MPI_Info_free / PMPI_Info_free(h: *mut Info) -> c_int {
        // SAFETY: a handle pointer (caller contract).
        let handle = unsafe { h.as_ref().copied() }.unwrap_or(MPI_INFO_NULL);
        if !STATE.with(|s| crate::state::release(&mut s.borrow_mut().infos, handle, USER_INFO_KIND)) {
            return invalid("MPI_Info_free");
        }
        // SAFETY: as above.
        unsafe { put(h, MPI_INFO_NULL) };
        MPI_SUCCESS
    }

    fn MPI_Info_dup / PMPI_Info_dup(h: Info, out: *mut Info) -> c_int {
        match pairs(h) {
            Some(p) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(out, new_info(p)) };
                MPI_SUCCESS
            }
            None => invalid("MPI_Info_dup"),
        }
    }

    fn MPI_Info_set / PMPI_Info_set(h: Info, key: *const c_char, value: *const c_char) -> c_int {
        let func = "MPI_Info_set";
        // SAFETY: NUL-terminated strings (caller contract).
        let (k, v) = match unsafe { (text(func, key, MAX_KEY, "key"), text(func, value, MAX_VAL, "value")) } {
            (Ok(k), Ok(v)) => (k, v),
            (Err(code), _) | (_, Err(code)) => return code,
        };
        let set = update(h, |p| match p.iter_mut().find(|(pk, _)| *pk == k) {
            Some(pair) => pair.1 = v,
            None => p.push((k, v)),
        });
        if set { MPI_SUCCESS } else { invalid(func) }
    }

    fn MPI_Info_delete / PMPI_Info_delete(h: Info, key: *const c_char) -> c_int {
        let func = "MPI_Info_delete";
        // SAFETY: a NUL-terminated string (caller contract).
        let k = match unsafe { text(func, key, MAX_KEY, "key") } { Ok(k) => k, Err(code) => return code };
        let mut found = false;
        if !update(h, |p| {
            let before = p.len();
            p.retain(|(pk, _)| *pk != k);
            found = p.len() != before;
        }) {
            return invalid(func);
        }
        if found { MPI_SUCCESS } else { error(MPI_COMM_WORLD, func, MPI_ERR_INFO_NOKEY, &format!("no key {k:?}")) }
    }

    fn MPI_Info_get / PMPI_Info_get(h: Info, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        let func = "MPI_Info_get";
        // SAFETY: a NUL-terminated string (caller contract).
        let k = match unsafe { text(func, key, MAX_KEY, "key") } { Ok(k) => k, Err(code) => return code };
        let Some(p) = pairs(h) else { return invalid(func) };
        let found = p.iter().find(|(pk, _)| *pk == k);
        // SAFETY: `value` holds valuelen + 1 bytes; `flag` an int (caller contract).
        unsafe {
            if let Some((_, v)) = found {
                put_str(v, value, usize::try_from(valuelen).unwrap_or(0) + 1);
            }
            put(flag, c_int::from(found.is_some()));
        }
        MPI_SUCCESS
    }

    fn MPI_Info_get_string / PMPI_Info_get_string(h: Info, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        let func = "MPI_Info_get_string";
        // SAFETY: a NUL-terminated string (caller contract).
        let k = match unsafe { text(func, key, MAX_KEY, "key") } { Ok(k) => k, Err(code) => return code };
        let Some(p) = pairs(h) else { return invalid(func) };
        let found = p.iter().find(|(pk, _)| *pk == k);
        // SAFETY: `buflen` and `flag` are ints, `value` holds *buflen
        // bytes (caller contract).
        unsafe {
            let room = buflen.as_ref().map_or(0, |&b| usize::try_from(b).unwrap_or(0));
            if let Some((_, v)) = found {
                put_str(v, value, room);
                put(buflen, v.len() as c_int + 1);
            }
            put(flag, c_int::from(found.is_some()));
        }
        MPI_SUCCESS
    }

    fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(h: Info, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) -> c_int {
        let func = "MPI_Info_get_valuelen";
        // SAFETY: a NUL-terminated string (caller contract).
        let k = match unsafe { text(func, key, MAX_KEY, "key") } { Ok(k) => k, Err(code) => return code };
        let Some(p) = pairs(h) else { return invalid(func) };
        let found = p.iter().find(|(pk, _)| *pk == k);
        // SAFETY: int pointers (caller contract).
        unsafe {
            if let Some((_, v)) = found {
                put(valuelen, v.len() as c_int);
            }
            put(flag, c_int::from(found.is_some()));
        }
        MPI_SUCCESS
    }

    fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(h: Info, n: *mut c_int) -> c_int {
        match pairs(h) {
            Some(p) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(n, p.len() as c_int) };
                MPI_SUCCESS
            }
            None => invalid("MPI_Info_get_nkeys"),
        }
    }

    fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(h: Info, n: c_int, key: *mut c_char) -> c_int {
        let func = "MPI_Info_get_nthkey";
        let Some(p) = pairs(h) else { return invalid(func) };
        match usize::try_from(n).ok().and_then(|n| p.get(n)) {
            Some((k, _)) => {
                // SAFETY: `key` holds MPI_MAX_INFO_KEY + 1 bytes (caller contract).
                unsafe { put_str(k, key, MAX_KEY + 1) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, func, MPI_ERR_ARG, &format!("key {n} of {}", p.len())),
        }
    }
}
