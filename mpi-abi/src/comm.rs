//! Communicators: rank and size, dup, split, free, compare, error
//! handlers, and intercommunicators (create, merge, remote group).

use std::ffi::{c_char, c_int};

use crate::consts::*;
use crate::state::{
    CommEntry, STATE, comm, comm_handle, comm_slot, error, insert, intra_comm, put,
};

/// The attributes of `old` copied to its duplicate `new`: the result
/// of `func`.
/// If one fails, the duplicate is freed and `*out` (its handle) set to
/// `MPI_COMM_NULL`.
pub(crate) fn copied_attributes(old: Comm, new: Comm, out: *mut Comm, func: &str) -> c_int {
    match crate::attr::copy_all(crate::attr::Object::Comm, old, new) {
        MPI_SUCCESS => MPI_SUCCESS,
        rc => {
            let mut dup = new;
            // SAFETY: a handle this library made; `out` the caller's.
            unsafe {
                MPI_Comm_free(&mut dup);
                put(out, MPI_COMM_NULL);
            }
            error(old, func, rc, "an attribute's copy function failed")
        }
    }
}

/// Register `c` (inheriting `parent`'s error handler); its handle.
pub(crate) fn register(parent: Comm, c: vpml::Comm) -> Comm {
    register_with(parent, c, None)
}

/// Register `c` with `topology` (inheriting `parent`'s error handler);
/// its handle.
pub(crate) fn register_with(
    parent: Comm,
    c: vpml::Comm,
    topology: Option<crate::topo::Topology>,
) -> Comm {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let errhandler = comm_slot(parent)
            .and_then(|i| s.comms.get(i)?.as_ref())
            .map_or(MPI_ERRORS_ARE_FATAL, |e| e.errhandler);
        comm_handle(insert(
            &mut s.comms,
            2,
            CommEntry {
                comm: std::rc::Rc::new(c),
                errhandler,
                topology,
                name: None,
                persistent_collectives: 0,
                attrs: Vec::new(),
            },
        ))
    })
}

export! {
    fn MPI_Comm_rank / PMPI_Comm_rank(h: Comm, rank: *mut c_int) -> c_int {
        match comm("MPI_Comm_rank", h) {
            Ok(c) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(rank, c.rank() as c_int) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_size / PMPI_Comm_size(h: Comm, size: *mut c_int) -> c_int {
        match comm("MPI_Comm_size", h) {
            Ok(c) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(size, c.size() as c_int) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_dup / PMPI_Comm_dup(h: Comm, new: *mut Comm) -> c_int {
        let c = match comm("MPI_Comm_dup", h) {
            Ok(c) => c,
            Err(code) => return code,
        };
        match crate::agreement::dup("MPI_Comm_dup", h, &c) {
            Ok(d) => {
                // A duplicate keeps the topology, and the attributes the
                // keyvals' copy functions copy.
                let topology = crate::topo::topology_of(h);
                let nh = register_with(h, d, topology);
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(new, nh) };
                copied_attributes(h, nh, new, "MPI_Comm_dup")
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_split / PMPI_Comm_split(h: Comm, color: c_int, key: c_int, new: *mut Comm) -> c_int {
        let c = match comm("MPI_Comm_split", h) {
            Ok(c) => c,
            Err(code) => return code,
        };
        let color = if color == MPI_UNDEFINED {
            None
        } else {
            match u32::try_from(color) {
                Ok(v) => Some(v),
                Err(_) => return error(h, "MPI_Comm_split", MPI_ERR_ARG, "negative color"),
            }
        };
        match crate::agreement::split("MPI_Comm_split", h, &c, color, i64::from(key)) {
            Ok(d) => {
                let handle = d.map_or(MPI_COMM_NULL, |d| register(h, d));
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(new, handle) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(h: Comm, flag: *mut c_int) -> c_int {
        match comm("MPI_Comm_test_inter", h) {
            Ok(c) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(flag, c_int::from(c.is_inter())) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_remote_size / PMPI_Comm_remote_size(h: Comm, size: *mut c_int) -> c_int {
        match comm("MPI_Comm_remote_size", h) {
            Ok(c) if c.is_inter() => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(size, c.remote_size() as c_int) };
                MPI_SUCCESS
            }
            Ok(_) => error(h, "MPI_Comm_remote_size", MPI_ERR_COMM, "not an intercommunicator"),
            Err(code) => code,
        }
    }

    fn MPI_Intercomm_create / PMPI_Intercomm_create(local: Comm, local_leader: c_int, peer: Comm, remote_leader: c_int, tag: c_int, new: *mut Comm) -> c_int {
        let func = "MPI_Intercomm_create";
        let c = match comm(func, local) { Ok(c) => c, Err(code) => return code };
        if c.is_inter() {
            return error(local, func, MPI_ERR_COMM, "the local communicator is an intercommunicator");
        }
        let Ok(local_leader) = usize::try_from(local_leader) else {
            return error(local, func, MPI_ERR_RANK, &format!("invalid local leader {local_leader}"));
        };
        // Only the local leader uses the peer communicator and the remote
        // leader: elsewhere they may be anything (MPI_COMM_NULL, -1). The
        // leader's bad arguments fail the call at every member of its
        // group (vpml's call says so to all), not at the leader alone.
        let leads = c.rank() == local_leader;
        let peer_comm = if leads {
            crate::state::STATE.with(|s| {
                let s = s.borrow();
                crate::state::comm_slot(peer).and_then(|i| s.comms.get(i)?.as_ref()).map(|e| e.comm.clone())
            })
        } else {
            None
        };
        let remote_leader = usize::try_from(remote_leader).unwrap_or(usize::MAX);
        match crate::agreement::intercomm_create(func, local, &c, local_leader, peer, peer_comm.as_deref(), remote_leader, tag) {
            Ok(d) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(new, register(local, d)) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Intercomm_merge / PMPI_Intercomm_merge(h: Comm, high: c_int, new: *mut Comm) -> c_int {
        let c = match comm("MPI_Intercomm_merge", h) { Ok(c) => c, Err(code) => return code };
        match crate::agreement::merge("MPI_Intercomm_merge", h, &c, high != 0) {
            Ok(d) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(new, register(h, d)) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_free / PMPI_Comm_free(h: *mut Comm) -> c_int {
        // SAFETY: a handle pointer (caller contract).
        let handle = unsafe { h.as_ref().copied() }.unwrap_or(MPI_COMM_NULL);
        // Its attributes go first (their delete functions may use it).
        if comm_slot(handle).is_some_and(|i| i >= 2) {
            let rc = crate::attr::delete_all(crate::attr::Object::Comm, handle);
            if rc != MPI_SUCCESS {
                return error(handle, "MPI_Comm_free", rc, "an attribute's delete function failed");
            }
        }
        let freed = STATE.with(|s| {
            let mut s = s.borrow_mut();
            match comm_slot(handle).filter(|&i| i >= 2) {
                Some(i) => s.comms.get_mut(i).and_then(Option::take),
                None => None,
            }
        });
        let Some(entry) = freed else {
            return error(MPI_COMM_WORLD, "MPI_Comm_free", MPI_ERR_COMM, "invalid communicator (or a predefined one)");
        };
        // The protocol hears of it (outside the state's borrow).
        std::rc::Rc::unwrap_or_clone(entry.comm).free();
        // SAFETY: as above.
        unsafe { put(h, MPI_COMM_NULL) };
        MPI_SUCCESS
    }

    fn MPI_Comm_compare / PMPI_Comm_compare(a: Comm, b: Comm, result: *mut c_int) -> c_int {
        let (ca, cb) = match (comm("MPI_Comm_compare", a), comm("MPI_Comm_compare", b)) {
            (Ok(x), Ok(y)) => (x, y),
            (Err(code), _) | (_, Err(code)) => return code,
        };
        // Both groups of an intercommunicator compare (the remote ones
        // are empty for intracommunicators).
        let (ma, mb) = (ca.world_ranks(), cb.world_ranks());
        let (ra, rb) = (ca.remote_world_ranks(), cb.remote_world_ranks());
        let sorted = |mut v: Vec<usize>| {
            v.sort_unstable();
            v
        };
        let r = if a == b {
            MPI_IDENT
        } else if ca.is_inter() != cb.is_inter() {
            MPI_UNEQUAL
        } else if ma == mb && ra == rb {
            MPI_CONGRUENT
        } else if sorted(ma) == sorted(mb) && sorted(ra) == sorted(rb) {
            MPI_SIMILAR
        } else {
            MPI_UNEQUAL
        };
        // SAFETY: an int pointer (caller contract).
        unsafe { put(result, r) };
        MPI_SUCCESS
    }

    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(h: Comm, handler: Errhandler) -> c_int {
        if !crate::errhan::is_handler(handler) {
            return error(h, "MPI_Comm_set_errhandler", MPI_ERR_ARG, "unknown error handler");
        }
        let set = STATE.with(|s| {
            let mut s = s.borrow_mut();
            match comm_slot(h).and_then(|i| s.comms.get_mut(i)?.as_mut()) {
                Some(e) => {
                    e.errhandler = handler;
                    true
                }
                None => false,
            }
        });
        if set { MPI_SUCCESS } else { error(MPI_COMM_WORLD, "MPI_Comm_set_errhandler", MPI_ERR_COMM, "invalid communicator") }
    }

    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(h: Comm, handler: *mut Errhandler) -> c_int {
        let found = STATE.with(|s| {
            let s = s.borrow();
            comm_slot(h).and_then(|i| s.comms.get(i)?.as_ref()).map(|e| e.errhandler)
        });
        match found {
            Some(v) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(handler, v) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Comm_get_errhandler", MPI_ERR_COMM, "invalid communicator"),
        }
    }

    fn MPI_Comm_set_name / PMPI_Comm_set_name(h: Comm, name: *const c_char) -> c_int {
        // SAFETY: null or a NUL-terminated string (caller contract).
        let Some(text) = (unsafe { crate::env::object_name(name) }) else {
            return error(h, "MPI_Comm_set_name", MPI_ERR_ARG, "null name");
        };
        let set = STATE.with(|s| match comm_slot(h).and_then(|i| s.borrow_mut().comms.get_mut(i)?.as_mut().map(|e| e.name = Some(text))) {
            Some(()) => true,
            None => false,
        });
        if set { MPI_SUCCESS } else { error(MPI_COMM_WORLD, "MPI_Comm_set_name", MPI_ERR_COMM, "invalid communicator") }
    }

    fn MPI_Comm_get_name / PMPI_Comm_get_name(h: Comm, name: *mut c_char, len: *mut c_int) -> c_int {
        let found = STATE.with(|s| {
            let s = s.borrow();
            let e = comm_slot(h).and_then(|i| s.comms.get(i)?.as_ref())?;
            Some(match (&e.name, h) {
                (Some(n), _) => n.clone(),
                (None, MPI_COMM_WORLD) => "MPI_COMM_WORLD".to_string(),
                (None, MPI_COMM_SELF) => "MPI_COMM_SELF".to_string(),
                (None, _) => String::new(),
            })
        });
        match found {
            Some(text) => {
                // SAFETY: `name` holds MPI_MAX_OBJECT_NAME chars; `len` an int (caller contract).
                unsafe { crate::env::copy_string(&text, name, len, MPI_MAX_OBJECT_NAME) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Comm_get_name", MPI_ERR_COMM, "invalid communicator"),
        }
    }

    fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(h: Comm, _info: Info, new: *mut Comm) -> c_int {
        // No hint changes what vpml does.
        // SAFETY: a handle pointer (caller contract).
        unsafe { MPI_Comm_dup(h, new) }
    }

    fn MPI_Comm_set_info / PMPI_Comm_set_info(h: Comm, _info: Info) -> c_int {
        match comm("MPI_Comm_set_info", h) {
            Ok(_) => MPI_SUCCESS,
            Err(code) => code,
        }
    }

    fn MPI_Comm_get_info / PMPI_Comm_get_info(h: Comm, info: *mut Info) -> c_int {
        match comm("MPI_Comm_get_info", h) {
            Ok(_) => {
                // No hint is in use: a new, empty info.
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(info, crate::info::new_info(Vec::new())) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_split_type / PMPI_Comm_split_type(h: Comm, split_type: c_int, key: c_int, _info: Info, new: *mut Comm) -> c_int {
        let func = "MPI_Comm_split_type";
        let c = match intra_comm(func, h) { Ok(c) => c, Err(code) => return code };
        // The one type vpml knows is MPI_COMM_TYPE_SHARED (the ranks of
        // one host). MPI_UNDEFINED joins none; so do the hardware types
        // (MPI 4.0's HW_GUIDED/UNGUIDED, which may give MPI_COMM_NULL),
        // which every process passes alike, so no one needs to talk.
        if split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED {
            // SAFETY: a handle pointer (caller contract).
            unsafe { put(new, MPI_COMM_NULL) };
            return MPI_SUCCESS;
        }
        let host = fnv1a(crate::env::hostname().as_bytes());
        let hosts = match crate::agreement::allgather(func, h, &c, &[host]) {
            Ok(all) => all,
            Err(code) => return code,
        };
        // The color of a host: its lowest rank here.
        let color = (split_type != MPI_UNDEFINED)
            .then(|| hosts.iter().position(|&x| x == host).unwrap_or(0) as u32);
        match crate::agreement::split(func, h, &c, color, i64::from(key)) {
            Ok(d) => {
                let handle = d.map_or(MPI_COMM_NULL, |d| register(h, d));
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(new, handle) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }
}

/// A 64-bit FNV-1a hash (host names to compare across ranks).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
