//! MPI 4.0's sessions: `MPI_Session_init`/`finalize`, the process sets
//! `mpi://WORLD` and `mpi://SELF`, `MPI_Group_from_session_pset` and
//! `MPI_Comm_create_from_group`.
//!
//! The first session joins the job, as `MPI_Init` does (a program may use
//! both); the last one to end, if `MPI_Init` was never called, leaves it.
//! vpml cannot join a job twice: a session started after that fails with
//! a one-line error. A communicator made from a group agrees on its
//! context among the group's members alone, over the world's channels
//! (as `MPI_Comm_create_group`): the string tag is not used, so two such
//! calls whose groups overlap must come in the same order at every
//! common member (MPI lets the tag tell them apart; vpml does not yet).

use std::ffi::{CStr, c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::consts::*;
use crate::state::{
    INITIALIZED, STATE, THREAD_LEVEL, error, handle_of, insert, put, slot_of, vpml_error,
};

/// `MPI_Session`.
pub type Session = c_int;
/// `MPI_SESSION_NULL`.
pub const MPI_SESSION_NULL: Session = 0x3800_0000;
/// Kind bits of the sessions this library creates.
const USER_SESSION_KIND: u32 = 0xb800_0000;

/// The process sets every session has.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// A session the program holds a handle to.
pub(crate) struct SessionEntry {
    /// Its error handler (kept for `MPI_Session_get_errhandler`).
    errhandler: Errhandler,
}

/// Set once vpml left the job (after `MPI_Finalize`, or the last
/// session's end without `MPI_Init`).
static ENDED: AtomicBool = AtomicBool::new(false);

/// Has vpml left the job?
pub(crate) fn ended() -> bool {
    ENDED.load(Ordering::Acquire)
}

/// vpml left the job.
pub(crate) fn end() {
    ENDED.store(true, Ordering::Release);
}

/// The thread level a session's info asks for (`thread_level`), or
/// `MPI_THREAD_SINGLE`.
fn asked_level(info: Info) -> c_int {
    let value = crate::info::value_of(info, "thread_level");
    match value.as_deref() {
        Some("MPI_THREAD_MULTIPLE") => MPI_THREAD_MULTIPLE,
        Some("MPI_THREAD_SERIALIZED") => MPI_THREAD_SERIALIZED,
        Some("MPI_THREAD_FUNNELED") => MPI_THREAD_FUNNELED,
        _ => MPI_THREAD_SINGLE,
    }
}

fn level_name(level: c_int) -> &'static str {
    match level {
        MPI_THREAD_MULTIPLE => "MPI_THREAD_MULTIPLE",
        MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        _ => "MPI_THREAD_SINGLE",
    }
}

/// Report an error of a call on session `h`: returned as is under the
/// session's `MPI_ERRORS_RETURN`, otherwise as any error (the world's
/// handler: fatal by default).
fn session_error(h: Session, func: &str, class: c_int, why: &str) -> c_int {
    let handler = STATE.with(|s| {
        let s = s.borrow();
        slot_of(h, USER_SESSION_KIND)
            .and_then(|i| s.sessions.get(i)?.as_ref())
            .map(|e| e.errhandler)
    });
    if handler == Some(MPI_ERRORS_RETURN) {
        return class;
    }
    error(MPI_COMM_WORLD, func, class, why)
}

/// Is `h` a session this library made (and not finalized)?
fn valid(h: Session) -> bool {
    STATE.with(|s| {
        let s = s.borrow();
        slot_of(h, USER_SESSION_KIND)
            .is_some_and(|i| s.sessions.get(i).is_some_and(Option::is_some))
    })
}

/// A C string argument, or `None` if null or not UTF-8.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: caller contract.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

export! {
    fn MPI_Session_init / PMPI_Session_init(info: Info, errhandler: Errhandler, out: *mut Session) -> c_int {
        let func = "MPI_Session_init";
        // Sessions may start from several threads at once, before any
        // call lock exists: one starts MPI.
        static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let starting = STARTING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if STATE.with(|s| s.borrow().world.is_none()) {
            let rc = crate::env::start(func, asked_level(info));
            if rc != MPI_SUCCESS {
                return rc;
            }
        }
        drop(starting);
        let i = STATE.with(|s| insert(&mut s.borrow_mut().sessions, 0, SessionEntry { errhandler }));
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(out, handle_of(USER_SESSION_KIND, i)) };
        MPI_SUCCESS
    }

    fn MPI_Session_finalize / PMPI_Session_finalize(h: *mut Session) -> c_int {
        let func = "MPI_Session_finalize";
        // SAFETY: a handle pointer (caller contract).
        let session = unsafe { h.as_ref().copied() }.unwrap_or(MPI_SESSION_NULL);
        let last = STATE.with(|s| {
            let mut s = s.borrow_mut();
            if !crate::state::release(&mut s.sessions, session, USER_SESSION_KIND) {
                return None;
            }
            Some(s.sessions.iter().all(Option::is_none))
        });
        let Some(last) = last else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "invalid session");
        };
        // SAFETY: as above.
        unsafe { put(h, MPI_SESSION_NULL) };
        if last && !INITIALIZED.load(Ordering::Acquire) {
            // Without MPI_Init, the last session leaves the job.
            let world = STATE.with(|s| {
                let mut s = s.borrow_mut();
                s.comms.clear();
                s.world.take()
            });
            end();
            if let Some(world) = world
                && let Err(e) = world.finalize()
            {
                return error(MPI_COMM_WORLD, func, MPI_ERR_OTHER, &e.to_string());
            }
        }
        MPI_SUCCESS
    }

    fn MPI_Session_get_info / PMPI_Session_get_info(h: Session, out: *mut Info) -> c_int {
        if !valid(h) {
            return error(MPI_COMM_WORLD, "MPI_Session_get_info", MPI_ERR_ARG, "invalid session");
        }
        let level = THREAD_LEVEL.load(Ordering::Acquire);
        let info = crate::info::new_info(vec![("thread_level".into(), level_name(level).into())]);
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(out, info) };
        MPI_SUCCESS
    }

    fn MPI_Session_get_num_psets / PMPI_Session_get_num_psets(h: Session, _info: Info, n: *mut c_int) -> c_int {
        if !valid(h) {
            return error(MPI_COMM_WORLD, "MPI_Session_get_num_psets", MPI_ERR_ARG, "invalid session");
        }
        // SAFETY: an int pointer (caller contract).
        unsafe { put(n, PSETS.len() as c_int) };
        MPI_SUCCESS
    }

    fn MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(h: Session, _info: Info, n: c_int, len: *mut c_int, name: *mut c_char) -> c_int {
        let func = "MPI_Session_get_nth_pset";
        if !valid(h) {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "invalid session");
        }
        let Some(pset) = usize::try_from(n).ok().and_then(|n| PSETS.get(n)) else {
            return session_error(h, func, MPI_ERR_ARG, "no such process set");
        };
        // SAFETY: an int pointer (caller contract).
        let Some(room) = (unsafe { len.as_ref().copied() }) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "null length");
        };
        // The length it needs, its NUL included, always.
        // SAFETY: as above.
        unsafe { put(len, pset.len() as c_int + 1) };
        if room <= 0 {
            return MPI_SUCCESS;
        }
        let copied = pset.len().min(room as usize - 1);
        if !name.is_null() {
            // SAFETY: `name` holds `room` bytes (caller contract); `copied`
            // + 1 fit.
            unsafe {
                std::ptr::copy_nonoverlapping(pset.as_ptr().cast::<c_char>(), name, copied);
                *name.add(copied) = 0;
            }
        }
        MPI_SUCCESS
    }

    fn MPI_Session_get_pset_info / PMPI_Session_get_pset_info(h: Session, pset: *const c_char, out: *mut Info) -> c_int {
        let func = "MPI_Session_get_pset_info";
        if !valid(h) {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "invalid session");
        }
        let size = match members(pset) {
            Ok(m) => m.len(),
            Err(why) => return session_error(h, func, MPI_ERR_ARG, why),
        };
        let info = crate::info::new_info(vec![("mpi_size".into(), size.to_string())]);
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(out, info) };
        MPI_SUCCESS
    }

    fn MPI_Group_from_session_pset / PMPI_Group_from_session_pset(h: Session, pset: *const c_char, out: *mut Group) -> c_int {
        let func = "MPI_Group_from_session_pset";
        if !valid(h) {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "invalid session");
        }
        match members(pset) {
            Ok(m) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(out, crate::group::new_group(m)) };
                MPI_SUCCESS
            }
            Err(why) => session_error(h, func, MPI_ERR_ARG, why),
        }
    }

    fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(g: Group, _tag: *const c_char, _info: Info, errhandler: Errhandler, out: *mut Comm) -> c_int {
        let func = "MPI_Comm_create_from_group";
        let Some(m) = crate::group::members(g) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_GROUP, "invalid group");
        };
        let world = crate::state::world_comm();
        let Some(world) = world else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_OTHER, "no session or MPI_Init started MPI");
        };
        let made = crate::agreement::exclusive(|| world.create_group(&m));
        // SAFETY: a handle pointer (caller contract).
        unsafe { hand_out(func, made, errhandler, out, "this process is not in the group") }
    }

    fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(local_group: Group, local_leader: c_int, remote_group: Group, remote_leader: c_int, tag: *const c_char, _info: Info, errhandler: Errhandler, out: *mut Comm) -> c_int {
        let func = "MPI_Intercomm_create_from_groups";
        let (Some(local), Some(remote)) = (crate::group::members(local_group), crate::group::members(remote_group)) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_GROUP, "invalid group");
        };
        let Some(&remote_world) = usize::try_from(remote_leader).ok().and_then(|r| remote.get(r)) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_RANK, &format!("invalid remote leader {remote_leader}"));
        };
        let Ok(local_leader) = usize::try_from(local_leader) else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_RANK, &format!("invalid local leader {local_leader}"));
        };
        let world = crate::state::world_comm();
        let Some(world) = world else {
            return error(MPI_COMM_WORLD, func, MPI_ERR_OTHER, "no session or MPI_Init started MPI");
        };
        // The two leaders meet on the world's channels under a tag drawn
        // from the string tag, which both groups pass alike.
        // SAFETY: a C string (caller contract).
        let tag_text = unsafe { text(tag) }.unwrap_or("");
        let tag = (crate::comm::fnv1a(tag_text.as_bytes()) & 0x3fff_ffff) as c_int;
        let made = crate::agreement::exclusive(|| {
            // The local group's own communicator first, then the
            // intercommunicator over it.
            let Some(local_comm) = world.create_group(&local)? else {
                return Ok(None);
            };
            let inter = local_comm.intercomm_create(local_leader, Some(&world), remote_world, tag);
            local_comm.free();
            inter.map(Some)
        });
        // SAFETY: a handle pointer (caller contract).
        unsafe { hand_out(func, made, errhandler, out, "this process is not in the local group") }
    }

    fn MPI_Session_set_errhandler / PMPI_Session_set_errhandler(h: Session, errhandler: Errhandler) -> c_int {
        let set = STATE.with(|s| {
            let mut s = s.borrow_mut();
            let e = slot_of(h, USER_SESSION_KIND).and_then(|i| s.sessions.get_mut(i)?.as_mut())?;
            e.errhandler = errhandler;
            Some(())
        });
        match set {
            Some(()) => MPI_SUCCESS,
            None => error(MPI_COMM_WORLD, "MPI_Session_set_errhandler", MPI_ERR_ARG, "invalid session"),
        }
    }

    fn MPI_Session_get_errhandler / PMPI_Session_get_errhandler(h: Session, out: *mut Errhandler) -> c_int {
        let got = STATE.with(|s| {
            let s = s.borrow();
            slot_of(h, USER_SESSION_KIND).and_then(|i| s.sessions.get(i)?.as_ref()).map(|e| e.errhandler)
        });
        match got {
            Some(e) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(out, e) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Session_get_errhandler", MPI_ERR_ARG, "invalid session"),
        }
    }

    fn MPI_Session_create_errhandler / PMPI_Session_create_errhandler(f: Option<crate::errhan::CommErrhandlerFn>, out: *mut Errhandler) -> c_int {
        // SAFETY: the same contract (session handlers take the same
        // arguments, a session handle where a communicator's would be).
        unsafe { crate::errhan::MPI_Comm_create_errhandler(f, out) }
    }

    fn MPI_Session_call_errhandler / PMPI_Session_call_errhandler(h: Session, code: c_int) -> c_int {
        let func = "MPI_Session_call_errhandler";
        let handler = STATE.with(|s| {
            let s = s.borrow();
            slot_of(h, USER_SESSION_KIND).and_then(|i| s.sessions.get(i)?.as_ref()).map(|e| e.errhandler)
        });
        match handler {
            None => return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "invalid session"),
            Some(MPI_ERRORS_RETURN) => {}
            Some(MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT) => {
                error(MPI_COMM_WORLD, func, code, "called by the program");
            }
            Some(other) => {
                if let Some(f) = crate::errhan::handler_fn(other) {
                    crate::errhan::call_user(f, h, code);
                }
            }
        }
        MPI_SUCCESS
    }
}

/// Give the program the communicator a from-group call `made` (`None`:
/// this process is not a member, for which `not_member` says why), with
/// `errhandler` set on it.
///
/// # Safety
/// `out` is a communicator handle pointer.
unsafe fn hand_out(
    func: &str,
    made: vpml::Result<Option<vpml::Comm>>,
    errhandler: Errhandler,
    out: *mut Comm,
    not_member: &str,
) -> c_int {
    match made {
        Ok(Some(c)) => {
            let h = crate::comm::register(MPI_COMM_WORLD, c);
            if errhandler != MPI_ERRHANDLER_NULL {
                // SAFETY: a handle this call made.
                unsafe { crate::comm::MPI_Comm_set_errhandler(h, errhandler) };
            }
            // SAFETY: caller contract.
            unsafe { put(out, h) };
            MPI_SUCCESS
        }
        Ok(None) => error(MPI_COMM_WORLD, func, MPI_ERR_GROUP, not_member),
        Err(e) => vpml_error(MPI_COMM_WORLD, func, &e),
    }
}

/// The world ranks of process set `pset`, or why there are none.
fn members(pset: *const c_char) -> Result<Vec<usize>, &'static str> {
    // SAFETY: a C string (caller contract).
    let name = unsafe { text(pset) };
    let world = STATE.with(|s| s.borrow().world.as_ref().map(|w| (w.size(), w.rank())));
    let Some((size, me)) = world else {
        return Err("MPI is not started");
    };
    // (Names compare without case, as MPICH's do.)
    match name {
        Some(n) if n.eq_ignore_ascii_case("mpi://WORLD") => Ok((0..size).collect()),
        Some(n) if n.eq_ignore_ascii_case("mpi://SELF") => Ok(vec![me]),
        _ => Err("no such process set (vpml has mpi://WORLD and mpi://SELF)"),
    }
}
