//! Attributes: keyvals (`MPI_Comm_create_keyval`, `MPI_Type_create_keyval`
//! and MPI-1's `MPI_Keyval_create`), values cached on communicators and
//! datatypes, copied by the keyval's copy function when the object is
//! duplicated and passed to its delete function when the attribute goes
//! (deleted, replaced, or its object freed; `MPI_Finalize` deletes
//! `MPI_COMM_SELF`'s first, as MPI says). The predefined attributes
//! (`MPI_TAG_UB`, `MPI_HOST`, `MPI_IO`, `MPI_WTIME_IS_GLOBAL`,
//! `MPI_UNIVERSE_SIZE`, `MPI_LASTUSEDCODE`, `MPI_APPNUM`) answer on every
//! communicator.
//!
//! The program's callbacks may call MPI: they run with the library's
//! tables released.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::consts::*;
use crate::state::{STATE, comm_slot, error, handle_of, insert, put, slot_of};

/// What a keyval's objects are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Object {
    Comm,
    Type,
    Win,
}

/// `MPI_Comm_copy_attr_function` (and the datatype one: both handles are
/// ints in MPICH's ABI).
pub(crate) type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `MPI_Comm_delete_attr_function` (and the datatype one).
pub(crate) type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;

/// A keyval.
#[derive(Clone, Copy)]
pub(crate) struct Keyval {
    object: Object,
    /// Freed by the program: attributes set with it keep its delete
    /// function, the handle is no longer valid.
    freed: bool,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    extra: usize,
}

/// The predefined attributes (MPICH's values for their keyvals) and the
/// ints they point to.
const MPI_TAG_UB: c_int = 0x6440_0001;
const MPI_HOST: c_int = 0x6440_0003;
const MPI_IO: c_int = 0x6440_0005;
const MPI_WTIME_IS_GLOBAL: c_int = 0x6440_0007;
const MPI_UNIVERSE_SIZE: c_int = 0x6440_0009;
const MPI_LASTUSEDCODE: c_int = 0x6440_000b;
const MPI_APPNUM: c_int = 0x6440_000d;
/// `MPI_KEYVAL_INVALID`.
const MPI_KEYVAL_INVALID: c_int = 0x2400_0000;

static TAG_UB: AtomicI32 = AtomicI32::new(i32::MAX);
static HOST: AtomicI32 = AtomicI32::new(MPI_PROC_NULL);
static IO: AtomicI32 = AtomicI32::new(MPI_ANY_SOURCE);
static WTIME_IS_GLOBAL: AtomicI32 = AtomicI32::new(0);
static UNIVERSE_SIZE: AtomicI32 = AtomicI32::new(1);
static LASTUSEDCODE: AtomicI32 = AtomicI32::new(0);
static APPNUM: AtomicI32 = AtomicI32::new(0);

/// The int a predefined attribute points to, if `keyval` is one.
fn predefined(keyval: c_int) -> Option<&'static AtomicI32> {
    Some(match keyval {
        MPI_TAG_UB => &TAG_UB,
        MPI_HOST => &HOST,
        MPI_IO => &IO,
        MPI_WTIME_IS_GLOBAL => &WTIME_IS_GLOBAL,
        MPI_UNIVERSE_SIZE => &UNIVERSE_SIZE,
        MPI_LASTUSEDCODE => &LASTUSEDCODE,
        MPI_APPNUM => &APPNUM,
        _ => return None,
    })
}

/// The keyval behind handle `k`, if it is one of `object`'s.
fn keyval(k: c_int, object: Object) -> Option<Keyval> {
    let i = slot_of(k, USER_KEYVAL_KIND)?;
    STATE
        .with(|s| s.borrow().keyvals.get(i).copied().flatten())
        .filter(|kv| kv.object == object && !kv.freed)
}

/// The attributes cached on `obj` (a communicator or datatype handle).
fn attributes(object: Object, obj: c_int) -> Vec<(c_int, usize)> {
    STATE.with(|s| {
        let s = s.borrow();
        match object {
            Object::Comm => comm_slot(obj)
                .and_then(|i| s.comms.get(i)?.as_ref())
                .map(|e| e.attrs.clone())
                .unwrap_or_default(),
            Object::Type => s.type_attrs.get(&obj).cloned().unwrap_or_default(),
            Object::Win => s.win_attrs.get(&obj).cloned().unwrap_or_default(),
        }
    })
}

/// Change the attributes cached on `obj` with `f`; false if the object
/// does not exist.
fn with_attributes(object: Object, obj: c_int, f: impl FnOnce(&mut Vec<(c_int, usize)>)) -> bool {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        match object {
            Object::Comm => match comm_slot(obj).and_then(|i| s.comms.get_mut(i)?.as_mut()) {
                Some(e) => {
                    f(&mut e.attrs);
                    true
                }
                None => false,
            },
            Object::Type => {
                f(s.type_attrs.entry(obj).or_default());
                true
            }
            Object::Win => {
                f(s.win_attrs.entry(obj).or_default());
                true
            }
        }
    })
}

/// Run keyval `k`'s delete function on value `v` of `obj`.
fn run_delete(obj: c_int, k: c_int, v: usize) -> c_int {
    let Some(kv) = STATE.with(|s| {
        s.borrow()
            .keyvals
            .get(slot_of(k, USER_KEYVAL_KIND)?)
            .copied()
            .flatten()
    }) else {
        return MPI_SUCCESS;
    };
    match kv.delete {
        // SAFETY: the program's delete function, called as MPI defines it.
        Some(f) => unsafe { f(obj, k, v as *mut c_void, kv.extra as *mut c_void) },
        None => MPI_SUCCESS,
    }
}

/// Delete every attribute of `obj` (it is being freed): the first delete
/// function's error, if one fails.
pub(crate) fn delete_all(object: Object, obj: c_int) -> c_int {
    // One at a time, latest first, each taken off the object before its
    // delete function runs (which may delete or set others).
    let mut rc = MPI_SUCCESS;
    loop {
        let mut next = None;
        with_attributes(object, obj, |a| next = a.pop());
        let Some((k, v)) = next else {
            break;
        };
        let r = run_delete(obj, k, v);
        if rc == MPI_SUCCESS {
            rc = r;
        }
    }
    match object {
        Object::Type => STATE.with(|s| s.borrow_mut().type_attrs.remove(&obj)),
        Object::Win => STATE.with(|s| s.borrow_mut().win_attrs.remove(&obj)),
        Object::Comm => None,
    };
    rc
}

/// Copy the attributes of `old` to its duplicate `new` as their keyvals'
/// copy functions say: the first copy function's error, if one fails.
pub(crate) fn copy_all(object: Object, old: c_int, new: c_int) -> c_int {
    for (k, v) in attributes(object, old) {
        let Some(kv) = STATE.with(|s| {
            s.borrow()
                .keyvals
                .get(slot_of(k, USER_KEYVAL_KIND)?)
                .copied()
                .flatten()
        }) else {
            continue;
        };
        let Some(copy) = kv.copy else {
            continue;
        };
        let mut out: *mut c_void = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: the program's copy function, called as MPI defines it.
        let rc = unsafe {
            copy(
                old,
                k,
                kv.extra as *mut c_void,
                v as *mut c_void,
                (&mut out as *mut *mut c_void).cast(),
                &mut flag,
            )
        };
        if rc != MPI_SUCCESS {
            return rc;
        }
        if flag != 0 {
            with_attributes(object, new, |a| a.push((k, out as usize)));
        }
    }
    MPI_SUCCESS
}

/// `MPI_*_create_keyval`.
pub(crate) fn create(
    func: &str,
    object: Object,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    out: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    if out.is_null() {
        return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null keyval pointer");
    }
    let kv = Keyval {
        object,
        freed: false,
        copy,
        delete,
        extra: extra as usize,
    };
    let i = STATE.with(|s| insert(&mut s.borrow_mut().keyvals, 0, kv));
    // SAFETY: an int pointer (caller contract, checked non-null).
    unsafe { put(out, handle_of(USER_KEYVAL_KIND, i)) };
    MPI_SUCCESS
}

/// `MPI_*_free_keyval`: the keyval goes; attributes set with it stay
/// until deleted (their delete function is kept for them).
pub(crate) fn free(func: &str, object: Object, k: *mut c_int) -> c_int {
    // SAFETY: an int pointer (caller contract).
    let h = unsafe { k.as_ref().copied() }.unwrap_or(MPI_KEYVAL_INVALID);
    if keyval(h, object).is_none() {
        return error(MPI_COMM_WORLD, func, MPI_ERR_KEYVAL, "invalid keyval");
    }
    // The entry stays for the attributes still set with it (their delete
    // function); the program's handle is invalidated.
    if let Some(i) = slot_of(h, USER_KEYVAL_KIND) {
        STATE.with(|s| {
            if let Some(Some(kv)) = s.borrow_mut().keyvals.get_mut(i) {
                kv.freed = true;
            }
        });
    }
    // SAFETY: as above.
    unsafe { put(k, MPI_KEYVAL_INVALID) };
    MPI_SUCCESS
}

/// `MPI_*_set_attr`.
pub(crate) fn set(func: &str, object: Object, obj: c_int, k: c_int, v: *mut c_void) -> c_int {
    if keyval(k, object).is_none() {
        return error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_KEYVAL,
            "invalid keyval (or a predefined attribute)",
        );
    }
    // A value already set is deleted first.
    let old = attributes(object, obj)
        .into_iter()
        .find(|&(key, _)| key == k);
    if let Some((_, v0)) = old {
        let rc = run_delete(obj, k, v0);
        if rc != MPI_SUCCESS {
            return rc;
        }
    }
    let ok = with_attributes(object, obj, |a| {
        a.retain(|&(key, _)| key != k);
        a.push((k, v as usize));
    });
    if !ok {
        return error(MPI_COMM_WORLD, func, MPI_ERR_COMM, "invalid communicator");
    }
    MPI_SUCCESS
}

/// `MPI_*_get_attr`.
pub(crate) fn get(
    func: &str,
    object: Object,
    obj: c_int,
    k: c_int,
    out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    if out.is_null() || flag.is_null() {
        return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null argument");
    }
    let found = match (object, predefined(k)) {
        (Object::Comm, Some(cell)) => {
            refresh(k);
            Some(cell.as_ptr() as usize)
        }
        _ => {
            if keyval(k, object).is_none() {
                return error(MPI_COMM_WORLD, func, MPI_ERR_KEYVAL, "invalid keyval");
            }
            attributes(object, obj)
                .into_iter()
                .find(|&(key, _)| key == k)
                .map(|(_, v)| v)
        }
    };
    // SAFETY: `out` is a `void **`, `flag` an int pointer (caller
    // contract).
    unsafe {
        if let Some(v) = found {
            put(out as *mut *mut c_void, v as *mut c_void);
        }
        put(flag, c_int::from(found.is_some()));
    }
    MPI_SUCCESS
}

/// The predefined attributes that change: the world's size, the last
/// error code the program added.
fn refresh(k: c_int) {
    match k {
        MPI_UNIVERSE_SIZE => {
            if let Some(n) = STATE.with(|s| s.borrow().world.as_ref().map(|w| w.size())) {
                UNIVERSE_SIZE.store(n as i32, Ordering::Relaxed);
            }
        }
        MPI_LASTUSEDCODE => LASTUSEDCODE.store(crate::errhan::last_used_code(), Ordering::Relaxed),
        _ => {}
    }
}

/// `MPI_*_delete_attr`.
pub(crate) fn delete(func: &str, object: Object, obj: c_int, k: c_int) -> c_int {
    if keyval(k, object).is_none() {
        return error(MPI_COMM_WORLD, func, MPI_ERR_KEYVAL, "invalid keyval");
    }
    let Some((_, v)) = attributes(object, obj)
        .into_iter()
        .find(|&(key, _)| key == k)
    else {
        return error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_KEYVAL,
            "no attribute for this keyval",
        );
    };
    let rc = run_delete(obj, k, v);
    if rc != MPI_SUCCESS {
        return rc;
    }
    with_attributes(object, obj, |a| a.retain(|&(key, _)| key != k));
    MPI_SUCCESS
}

/// The copy function `MPI_COMM_DUP_FN`, `MPI_TYPE_DUP_FN` and MPI-1's
/// `MPI_DUP_FN` name in MPICH's header: the duplicate gets the value.
///
/// # Safety
/// `out` is a `void **`, `flag` an int pointer (MPI's contract for copy
/// functions).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPIR_Dup_fn(
    _old: c_int,
    _keyval: c_int,
    _extra: *mut c_void,
    val_in: *mut c_void,
    out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        put(out as *mut *mut c_void, val_in);
        put(flag, 1);
    }
    MPI_SUCCESS
}

export! {
    fn MPI_DUP_FN / PMPI_DUP_FN(old: c_int, keyval: c_int, extra: *mut c_void, val_in: *mut c_void, out: *mut c_void, flag: *mut c_int) -> c_int {
        // SAFETY: the same contract.
        unsafe { MPIR_Dup_fn(old, keyval, extra, val_in, out, flag) }
    }

    fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(copy: Option<CopyFn>, delete: Option<DeleteFn>, keyval: *mut c_int, extra: *mut c_void) -> c_int {
        create("MPI_Comm_create_keyval", Object::Comm, copy, delete, keyval, extra)
    }

    fn MPI_Keyval_create / PMPI_Keyval_create(copy: Option<CopyFn>, delete: Option<DeleteFn>, keyval: *mut c_int, extra: *mut c_void) -> c_int {
        create("MPI_Keyval_create", Object::Comm, copy, delete, keyval, extra)
    }

    fn MPI_Type_create_keyval / PMPI_Type_create_keyval(copy: Option<CopyFn>, delete: Option<DeleteFn>, keyval: *mut c_int, extra: *mut c_void) -> c_int {
        create("MPI_Type_create_keyval", Object::Type, copy, delete, keyval, extra)
    }

    fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(keyval: *mut c_int) -> c_int {
        free("MPI_Comm_free_keyval", Object::Comm, keyval)
    }

    fn MPI_Keyval_free / PMPI_Keyval_free(keyval: *mut c_int) -> c_int {
        free("MPI_Keyval_free", Object::Comm, keyval)
    }

    fn MPI_Type_free_keyval / PMPI_Type_free_keyval(keyval: *mut c_int) -> c_int {
        free("MPI_Type_free_keyval", Object::Type, keyval)
    }

    fn MPI_Comm_set_attr / PMPI_Comm_set_attr(h: Comm, keyval: c_int, val: *mut c_void) -> c_int {
        set("MPI_Comm_set_attr", Object::Comm, h, keyval, val)
    }

    fn MPI_Attr_put / PMPI_Attr_put(h: Comm, keyval: c_int, val: *mut c_void) -> c_int {
        set("MPI_Attr_put", Object::Comm, h, keyval, val)
    }

    fn MPI_Type_set_attr / PMPI_Type_set_attr(dt: Datatype, keyval: c_int, val: *mut c_void) -> c_int {
        if crate::types::info(dt).is_none() {
            return error(MPI_COMM_WORLD, "MPI_Type_set_attr", MPI_ERR_TYPE, "invalid datatype");
        }
        set("MPI_Type_set_attr", Object::Type, dt, keyval, val)
    }

    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(h: Comm, keyval: c_int, val: *mut c_void, flag: *mut c_int) -> c_int {
        if let Err(code) = crate::state::comm("MPI_Comm_get_attr", h) {
            return code;
        }
        get("MPI_Comm_get_attr", Object::Comm, h, keyval, val, flag)
    }

    fn MPI_Attr_get / PMPI_Attr_get(h: Comm, keyval: c_int, val: *mut c_void, flag: *mut c_int) -> c_int {
        if let Err(code) = crate::state::comm("MPI_Attr_get", h) {
            return code;
        }
        get("MPI_Attr_get", Object::Comm, h, keyval, val, flag)
    }

    fn MPI_Type_get_attr / PMPI_Type_get_attr(dt: Datatype, keyval: c_int, val: *mut c_void, flag: *mut c_int) -> c_int {
        if crate::types::info(dt).is_none() {
            return error(MPI_COMM_WORLD, "MPI_Type_get_attr", MPI_ERR_TYPE, "invalid datatype");
        }
        get("MPI_Type_get_attr", Object::Type, dt, keyval, val, flag)
    }

    fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(h: Comm, keyval: c_int) -> c_int {
        delete("MPI_Comm_delete_attr", Object::Comm, h, keyval)
    }

    fn MPI_Attr_delete / PMPI_Attr_delete(h: Comm, keyval: c_int) -> c_int {
        delete("MPI_Attr_delete", Object::Comm, h, keyval)
    }

    fn MPI_Type_delete_attr / PMPI_Type_delete_attr(dt: Datatype, keyval: c_int) -> c_int {
        delete("MPI_Type_delete_attr", Object::Type, dt, keyval)
    }
}
