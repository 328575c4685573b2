//! The large-count nonblocking collectives (`MPI_Ibcast_c` …), as the
//! blocking ones ([`super::coll`]).

use std::ffi::{c_int, c_void};

use super::{group_len, ints_of, local_len, narrow, narrow_for_op, narrow_send, neighbor_lens};
use crate::consts::*;

// The int twins, through their profiling names (a tool that intercepts
// `MPI_Bcast` must not see `MPI_Bcast_c` twice).
unsafe extern "C" {
    fn PMPI_Iallgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Iallgatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Iallreduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ialltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ialltoallv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ialltoallw(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtypes: *const Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtypes: *const Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Iexscan(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Igather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Igatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ineighbor_allgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ineighbor_allgatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ineighbor_alltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ineighbor_alltoallv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ineighbor_alltoallw(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const Aint,
        sendtypes: *const Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const Aint,
        recvtypes: *const Datatype,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ireduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        root: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ireduce_scatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ireduce_scatter_block(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcount: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Iscan(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Iscatter(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Iscatterv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        displs: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
}

export! {
    fn MPI_Iallgather_c / PMPI_Iallgather_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Iallgather_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Iallgather(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Iallgatherv_c / PMPI_Iallgatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Iallgatherv_c";
        let run = || -> Result<c_int, c_int> {
            let len = group_len(func, comm)?;
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Iallgatherv(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Iallreduce_c / PMPI_Iallreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Iallreduce_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Iallreduce(sendbuf, recvbuf, count.count, count.dt, op, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ialltoall_c / PMPI_Ialltoall_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ialltoall_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ialltoall(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ialltoallv_c / PMPI_Ialltoallv_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ialltoallv_c";
        let run = || -> Result<c_int, c_int> {
            let len = group_len(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sdispls = unsafe { ints_of(func, sdispls, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let rdispls = unsafe { ints_of(func, rdispls, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ialltoallv(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtype, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtype, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ialltoallw_c / PMPI_Ialltoallw_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ialltoallw_c";
        let run = || -> Result<c_int, c_int> {
            let len = group_len(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sdispls = unsafe { ints_of(func, sdispls, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let rdispls = unsafe { ints_of(func, rdispls, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ialltoallw(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtypes, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtypes, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Iexscan_c / PMPI_Iexscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Iexscan_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Iexscan(sendbuf, recvbuf, count.count, count.dt, op, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Igather_c / PMPI_Igather_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Igather_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Igather(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, root, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Igatherv_c / PMPI_Igatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, root: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Igatherv_c";
        let run = || -> Result<c_int, c_int> {
            let len = group_len(func, comm)?;
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Igatherv(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, root, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ineighbor_allgather_c / PMPI_Ineighbor_allgather_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ineighbor_allgather_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ineighbor_allgather(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ineighbor_allgatherv_c";
        let run = || -> Result<c_int, c_int> {
            let nb = neighbor_lens(func, comm)?;
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, nb.0) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, nb.0) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ineighbor_allgatherv(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ineighbor_alltoall_c / PMPI_Ineighbor_alltoall_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ineighbor_alltoall_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ineighbor_alltoall(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ineighbor_alltoallv_c";
        let run = || -> Result<c_int, c_int> {
            let nb = neighbor_lens(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, nb.1) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sdispls = unsafe { ints_of(func, sdispls, nb.1) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, nb.0) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let rdispls = unsafe { ints_of(func, rdispls, nb.0) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ineighbor_alltoallv(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtype, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtype, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ineighbor_alltoallw_c";
        let run = || -> Result<c_int, c_int> {
            let nb = neighbor_lens(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, nb.1) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, nb.0) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ineighbor_alltoallw(sendbuf, sendcounts.ptr(), sdispls, sendtypes, recvbuf, recvcounts.ptr(), rdispls, recvtypes, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ireduce_c / PMPI_Ireduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, root: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ireduce_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ireduce(sendbuf, recvbuf, count.count, count.dt, op, root, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ireduce_scatter_c / PMPI_Ireduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ireduce_scatter_c";
        let run = || -> Result<c_int, c_int> {
            let len = local_len(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts.ptr(), datatype, op, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ireduce_scatter_block_c / PMPI_Ireduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ireduce_scatter_block_c";
        let run = || -> Result<c_int, c_int> {
            let recvcount = narrow_for_op(func, recvcount, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount.count, recvcount.dt, op, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Iscan_c / PMPI_Iscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Iscan_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Iscan(sendbuf, recvbuf, count.count, count.dt, op, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Iscatter_c / PMPI_Iscatter_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Iscatter_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Iscatter(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, root, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Iscatterv_c / PMPI_Iscatterv_c(sendbuf: *const c_void, sendcounts: *const Count, displs: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Iscatterv_c";
        let run = || -> Result<c_int, c_int> {
            let len = group_len(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Iscatterv(sendbuf, sendcounts.ptr(), displs.ptr(), sendtype, recvbuf, recvcount.count, recvcount.dt, root, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }
}
