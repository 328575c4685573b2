//! User error handlers and user error classes, codes and strings:
//! `MPI_Comm_create_errhandler`, `MPI_Comm_call_errhandler`,
//! `MPI_Add_error_class/code/string` (and MPICH's
//! `MPIX_Delete_error_class/code/string`).
//!
//! A user handler is a C function called with the communicator and the
//! error code, after which the failing call returns the code. User error
//! classes and codes are numbered from `FIRST_USER_CODE` up, above every
//! predefined class.

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int};

use crate::consts::*;
use crate::state::{STATE, comm_slot, error, handle_of, insert, put, slot_of};

/// MPI's `MPI_Comm_errhandler_function`: `void f(MPI_Comm *, int *, ...)`.
pub(crate) type CommErrhandlerFn = unsafe extern "C" fn(*mut Comm, *mut c_int, ...);

/// The first number given to a user error class or code.
pub(crate) const FIRST_USER_CODE: c_int = 1 << 10;

/// User error classes and codes: each code's class (a class is its own)
/// and the strings given to them.
pub(crate) struct UserErrors {
    class_of: BTreeMap<c_int, c_int>,
    strings: BTreeMap<c_int, String>,
    next: c_int,
}

impl UserErrors {
    pub(crate) const fn new() -> UserErrors {
        UserErrors {
            class_of: BTreeMap::new(),
            strings: BTreeMap::new(),
            next: FIRST_USER_CODE,
        }
    }

    fn add(&mut self, class: Option<c_int>) -> Option<c_int> {
        let code = self.next;
        self.next = code.checked_add(1)?;
        self.class_of.insert(code, class.unwrap_or(code));
        Some(code)
    }
}

/// The largest error class or code in use (`MPI_LASTUSEDCODE`).
pub(crate) fn last_used_code() -> c_int {
    STATE.with(|s| {
        let s = s.borrow();
        s.user_errors
            .class_of
            .keys()
            .next_back()
            .copied()
            .unwrap_or(FIRST_USER_CODE - 1)
    })
}

/// The class of `code`, if it is a user class or code.
pub(crate) fn user_class(code: c_int) -> Option<c_int> {
    STATE.with(|s| {
        s.try_borrow()
            .ok()?
            .user_errors
            .class_of
            .get(&code)
            .copied()
    })
}

/// The string of user class or code `code` (empty if none was given).
pub(crate) fn user_string(code: c_int) -> Option<String> {
    STATE.with(|s| {
        let s = s.try_borrow().ok()?;
        s.user_errors.class_of.get(&code)?;
        Some(
            s.user_errors
                .strings
                .get(&code)
                .cloned()
                .unwrap_or_default(),
        )
    })
}

/// The function of user error handler `h`.
pub(crate) fn handler_fn(h: Errhandler) -> Option<CommErrhandlerFn> {
    let i = slot_of(h, USER_ERRHANDLER_KIND)?;
    STATE.with(|s| *s.try_borrow().ok()?.errhandlers.get(i)?)
}

/// Is `h` an error handler a communicator may take?
pub(crate) fn is_handler(h: Errhandler) -> bool {
    matches!(
        h,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN | MPI_ERRORS_ABORT
    ) || handler_fn(h).is_some()
}

/// Call user handler `f` for `code` on communicator `comm`.
pub(crate) fn call_user(f: CommErrhandlerFn, comm: Comm, code: c_int) {
    let (mut comm, mut code) = (comm, code);
    // SAFETY: a handler the program registered with the signature MPI
    // gives it; both pointers are to live locals.
    unsafe { f(&mut comm, &mut code) };
}

/// A user class or code argument of `func`, checked.
fn user_code(func: &str, code: c_int) -> Result<(), c_int> {
    match user_class(code) {
        Some(_) => Ok(()),
        None => Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_ARG,
            &format!("{code} is not a user error class or code"),
        )),
    }
}

export! {
    fn MPI_Errhandler_set / PMPI_Errhandler_set(h: Comm, handler: Errhandler) -> c_int {
        // MPI-1's name of MPI_Comm_set_errhandler.
        // SAFETY: the same contract.
        unsafe { crate::comm::MPI_Comm_set_errhandler(h, handler) }
    }

    fn MPI_Errhandler_get / PMPI_Errhandler_get(h: Comm, handler: *mut Errhandler) -> c_int {
        // MPI-1's name of MPI_Comm_get_errhandler.
        // SAFETY: the same contract.
        unsafe { crate::comm::MPI_Comm_get_errhandler(h, handler) }
    }

    fn MPI_Pcontrol / PMPI_Pcontrol(_level: c_int) -> c_int {
        // Profiling control: vpml has no profiling levels to change (a
        // variadic C call reaches this fixed-argument function safely on
        // the platforms vpml runs on: the extra arguments are ignored).
        MPI_SUCCESS
    }

    fn MPI_Errhandler_create / PMPI_Errhandler_create(f: Option<CommErrhandlerFn>, out: *mut Errhandler) -> c_int {
        // MPI-1's name of MPI_Comm_create_errhandler.
        // SAFETY: the same contract.
        unsafe { MPI_Comm_create_errhandler(f, out) }
    }

    fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(f: Option<CommErrhandlerFn>, out: *mut Errhandler) -> c_int {
        let Some(f) = f else {
            return error(MPI_COMM_WORLD, "MPI_Comm_create_errhandler", MPI_ERR_ARG, "null function");
        };
        let i = STATE.with(|s| insert(&mut s.borrow_mut().errhandlers, 0, f));
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(out, handle_of(USER_ERRHANDLER_KIND, i)) };
        MPI_SUCCESS
    }

    fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(h: Comm, code: c_int) -> c_int {
        let func = "MPI_Comm_call_errhandler";
        let handler = STATE.with(|s| {
            let s = s.borrow();
            s.comms.get(comm_slot(h)?)?.as_ref().map(|e| e.errhandler)
        });
        let Some(handler) = handler else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_COMM, "invalid communicator");
        };
        match handler {
            MPI_ERRORS_RETURN => {}
            MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => {
                error(h, func, code, "called by the program");
            }
            other => {
                if let Some(f) = handler_fn(other) {
                    call_user(f, h, code);
                }
            }
        }
        MPI_SUCCESS
    }

    fn MPI_Add_error_class / PMPI_Add_error_class(class: *mut c_int) -> c_int {
        match STATE.with(|s| s.borrow_mut().user_errors.add(None)) {
            Some(c) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(class, c) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Add_error_class", MPI_ERR_OTHER, "no error class left"),
        }
    }

    fn MPI_Add_error_code / PMPI_Add_error_code(class: c_int, code: *mut c_int) -> c_int {
        let func = "MPI_Add_error_code";
        let predefined = (0..FIRST_USER_CODE).contains(&class);
        // A code belongs to a class: a predefined one or a user class
        // (not a user code).
        if !predefined && user_class(class) != Some(class) {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, &format!("{class} is not an error class"));
        }
        match STATE.with(|s| s.borrow_mut().user_errors.add(Some(class))) {
            Some(c) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(code, c) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, func, MPI_ERR_OTHER, "no error code left"),
        }
    }

    fn MPI_Add_error_string / PMPI_Add_error_string(code: c_int, text: *const c_char) -> c_int {
        let func = "MPI_Add_error_string";
        if let Err(e) = user_code(func, code) {
            return e;
        }
        if text.is_null() {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null string");
        }
        // SAFETY: a NUL-terminated string (caller contract).
        let t = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        let t: String = t.chars().take(MPI_MAX_ERROR_STRING - 1).collect();
        STATE.with(|s| s.borrow_mut().user_errors.strings.insert(code, t));
        MPI_SUCCESS
    }

    fn MPIX_Delete_error_string / PMPIX_Delete_error_string(code: c_int) -> c_int {
        if let Err(e) = user_code("MPIX_Delete_error_string", code) {
            return e;
        }
        STATE.with(|s| s.borrow_mut().user_errors.strings.remove(&code));
        MPI_SUCCESS
    }

    fn MPIX_Delete_error_code / PMPIX_Delete_error_code(code: c_int) -> c_int {
        let func = "MPIX_Delete_error_code";
        if user_class(code).is_none_or(|c| c == code) {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, &format!("{code} is not a user error code"));
        }
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.user_errors.class_of.remove(&code);
            s.user_errors.strings.remove(&code);
        });
        MPI_SUCCESS
    }

    fn MPIX_Delete_error_class / PMPIX_Delete_error_class(class: c_int) -> c_int {
        let func = "MPIX_Delete_error_class";
        if user_class(class) != Some(class) {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, &format!("{class} is not a user error class"));
        }
        let codes_left = STATE.with(|s| s.borrow().user_errors.class_of.iter().any(|(&k, &c)| c == class && k != class));
        if codes_left {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, &format!("class {class} still has codes"));
        }
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.user_errors.class_of.remove(&class);
            s.user_errors.strings.remove(&class);
        });
        MPI_SUCCESS
    }
}
