//! The large-count one-sided operations (`MPI_Put_c` …): each narrows its
//! counts ([`super::narrow`]) and runs its int twin.

use std::ffi::{c_int, c_void};

use super::narrow;
use crate::consts::*;

// The int twins, through their profiling names (a tool that intercepts
// `MPI_Send` must not see `MPI_Send_c` twice).
unsafe extern "C" {
    fn PMPI_Accumulate(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: Datatype,
        target_rank: c_int,
        target_disp: Aint,
        target_count: c_int,
        target_datatype: Datatype,
        op: Op,
        win: Win,
    ) -> c_int;
    fn PMPI_Get(
        origin_addr: *mut c_void,
        origin_count: c_int,
        origin_datatype: Datatype,
        target_rank: c_int,
        target_disp: Aint,
        target_count: c_int,
        target_datatype: Datatype,
        win: Win,
    ) -> c_int;
    fn PMPI_Get_accumulate(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: Datatype,
        result_addr: *mut c_void,
        result_count: c_int,
        result_datatype: Datatype,
        target_rank: c_int,
        target_disp: Aint,
        target_count: c_int,
        target_datatype: Datatype,
        op: Op,
        win: Win,
    ) -> c_int;
    fn PMPI_Put(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: Datatype,
        target_rank: c_int,
        target_disp: Aint,
        target_count: c_int,
        target_datatype: Datatype,
        win: Win,
    ) -> c_int;
    fn PMPI_Raccumulate(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: Datatype,
        target_rank: c_int,
        target_disp: Aint,
        target_count: c_int,
        target_datatype: Datatype,
        op: Op,
        win: Win,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Rget(
        origin_addr: *mut c_void,
        origin_count: c_int,
        origin_datatype: Datatype,
        target_rank: c_int,
        target_disp: Aint,
        target_count: c_int,
        target_datatype: Datatype,
        win: Win,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Rget_accumulate(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: Datatype,
        result_addr: *mut c_void,
        result_count: c_int,
        result_datatype: Datatype,
        target_rank: c_int,
        target_disp: Aint,
        target_count: c_int,
        target_datatype: Datatype,
        op: Op,
        win: Win,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Rput(
        origin_addr: *const c_void,
        origin_count: c_int,
        origin_datatype: Datatype,
        target_rank: c_int,
        target_disp: Aint,
        target_count: c_int,
        target_datatype: Datatype,
        win: Win,
        request: *mut Request,
    ) -> c_int;
}

export! {
    fn MPI_Accumulate_c / PMPI_Accumulate_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count, target_datatype: Datatype, op: Op, win: Win) -> c_int {
        let func = "MPI_Accumulate_c";
        let run = || -> Result<c_int, c_int> {
            let origin_count = narrow(func, origin_count, origin_datatype)?;
            let target_count = narrow(func, target_count, target_datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Accumulate(origin_addr, origin_count.count, origin_count.dt, target_rank, target_disp, target_count.count, target_count.dt, op, win) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Get_c / PMPI_Get_c(origin_addr: *mut c_void, origin_count: Count, origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count, target_datatype: Datatype, win: Win) -> c_int {
        let func = "MPI_Get_c";
        let run = || -> Result<c_int, c_int> {
            let origin_count = narrow(func, origin_count, origin_datatype)?;
            let target_count = narrow(func, target_count, target_datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Get(origin_addr, origin_count.count, origin_count.dt, target_rank, target_disp, target_count.count, target_count.dt, win) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Get_accumulate_c / PMPI_Get_accumulate_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: Datatype, result_addr: *mut c_void, result_count: Count, result_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count, target_datatype: Datatype, op: Op, win: Win) -> c_int {
        let func = "MPI_Get_accumulate_c";
        let run = || -> Result<c_int, c_int> {
            let origin_count = narrow(func, origin_count, origin_datatype)?;
            let result_count = narrow(func, result_count, result_datatype)?;
            let target_count = narrow(func, target_count, target_datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Get_accumulate(origin_addr, origin_count.count, origin_count.dt, result_addr, result_count.count, result_count.dt, target_rank, target_disp, target_count.count, target_count.dt, op, win) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Put_c / PMPI_Put_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count, target_datatype: Datatype, win: Win) -> c_int {
        let func = "MPI_Put_c";
        let run = || -> Result<c_int, c_int> {
            let origin_count = narrow(func, origin_count, origin_datatype)?;
            let target_count = narrow(func, target_count, target_datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Put(origin_addr, origin_count.count, origin_count.dt, target_rank, target_disp, target_count.count, target_count.dt, win) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Raccumulate_c / PMPI_Raccumulate_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count, target_datatype: Datatype, op: Op, win: Win, request: *mut Request) -> c_int {
        let func = "MPI_Raccumulate_c";
        let run = || -> Result<c_int, c_int> {
            let origin_count = narrow(func, origin_count, origin_datatype)?;
            let target_count = narrow(func, target_count, target_datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Raccumulate(origin_addr, origin_count.count, origin_count.dt, target_rank, target_disp, target_count.count, target_count.dt, op, win, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Rget_c / PMPI_Rget_c(origin_addr: *mut c_void, origin_count: Count, origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count, target_datatype: Datatype, win: Win, request: *mut Request) -> c_int {
        let func = "MPI_Rget_c";
        let run = || -> Result<c_int, c_int> {
            let origin_count = narrow(func, origin_count, origin_datatype)?;
            let target_count = narrow(func, target_count, target_datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Rget(origin_addr, origin_count.count, origin_count.dt, target_rank, target_disp, target_count.count, target_count.dt, win, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: Datatype, result_addr: *mut c_void, result_count: Count, result_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count, target_datatype: Datatype, op: Op, win: Win, request: *mut Request) -> c_int {
        let func = "MPI_Rget_accumulate_c";
        let run = || -> Result<c_int, c_int> {
            let origin_count = narrow(func, origin_count, origin_datatype)?;
            let result_count = narrow(func, result_count, result_datatype)?;
            let target_count = narrow(func, target_count, target_datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Rget_accumulate(origin_addr, origin_count.count, origin_count.dt, result_addr, result_count.count, result_count.dt, target_rank, target_disp, target_count.count, target_count.dt, op, win, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Rput_c / PMPI_Rput_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: Datatype, target_rank: c_int, target_disp: Aint, target_count: Count, target_datatype: Datatype, win: Win, request: *mut Request) -> c_int {
        let func = "MPI_Rput_c";
        let run = || -> Result<c_int, c_int> {
            let origin_count = narrow(func, origin_count, origin_datatype)?;
            let target_count = narrow(func, target_count, target_datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Rput(origin_addr, origin_count.count, origin_count.dt, target_rank, target_disp, target_count.count, target_count.dt, win, request) })
        };
        run().unwrap_or_else(|code| code)
    }
}
