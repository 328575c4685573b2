//! Communicators: rank and size, dup, split, free, compare, error
//! handlers.

use std::ffi::c_int;

use crate::consts::*;
use crate::state::{
    CommEntry, STATE, comm, comm_handle, comm_slot, error, insert, put, vpml_error,
};

/// Register `c` (inheriting `parent`'s error handler); its handle.
fn register(parent: Comm, c: vpml::Comm) -> Comm {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let errhandler = comm_slot(parent)
            .and_then(|i| s.comms.get(i)?.as_ref())
            .map_or(MPI_ERRORS_ARE_FATAL, |e| e.errhandler);
        comm_handle(insert(
            &mut s.comms,
            2,
            CommEntry {
                comm: c,
                errhandler,
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
        match c.dup() {
            Ok(d) => {
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(new, register(h, d)) };
                MPI_SUCCESS
            }
            Err(e) => vpml_error(h, "MPI_Comm_dup", &e),
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
        match c.split(color, i64::from(key)) {
            Ok(d) => {
                let handle = d.map_or(MPI_COMM_NULL, |d| register(h, d));
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(new, handle) };
                MPI_SUCCESS
            }
            Err(e) => vpml_error(h, "MPI_Comm_split", &e),
        }
    }

    fn MPI_Comm_free / PMPI_Comm_free(h: *mut Comm) -> c_int {
        // SAFETY: a handle pointer (caller contract).
        let handle = unsafe { h.as_ref().copied() }.unwrap_or(MPI_COMM_NULL);
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
        entry.comm.free();
        // SAFETY: as above.
        unsafe { put(h, MPI_COMM_NULL) };
        MPI_SUCCESS
    }

    fn MPI_Comm_compare / PMPI_Comm_compare(a: Comm, b: Comm, result: *mut c_int) -> c_int {
        let (ca, cb) = match (comm("MPI_Comm_compare", a), comm("MPI_Comm_compare", b)) {
            (Ok(x), Ok(y)) => (x, y),
            (Err(code), _) | (_, Err(code)) => return code,
        };
        let (ma, mb) = (ca.world_ranks(), cb.world_ranks());
        let r = if a == b {
            MPI_IDENT
        } else if ma == mb {
            MPI_CONGRUENT
        } else {
            let (mut sa, mut sb) = (ma, mb);
            sa.sort_unstable();
            sb.sort_unstable();
            if sa == sb { MPI_SIMILAR } else { MPI_UNEQUAL }
        };
        // SAFETY: an int pointer (caller contract).
        unsafe { put(result, r) };
        MPI_SUCCESS
    }

    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(h: Comm, handler: Errhandler) -> c_int {
        if !matches!(handler, MPI_ERRORS_ARE_FATAL | MPI_ERRORS_RETURN) {
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
}
