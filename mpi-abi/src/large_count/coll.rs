//! The large-count blocking collectives (`MPI_Bcast_c`, `MPI_Allgatherv_c`
//! …): each narrows its counts and displacements ([`super::narrow`],
//! [`super::ints_of`]) and runs its int twin.

use std::ffi::{c_int, c_void};

use super::{
    at_root, group_len, ints_of, local_len, narrow, narrow_for_op, narrow_send, neighbor_lens,
};
use crate::consts::*;

// The int twins, through their profiling names (a tool that intercepts
// `MPI_Bcast` must not see `MPI_Bcast_c` twice).
unsafe extern "C" {
    fn PMPI_Allgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Allgatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Allreduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Alltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Alltoallv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Alltoallw(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtypes: *const Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtypes: *const Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Bcast(
        buffer: *mut c_void,
        count: c_int,
        datatype: Datatype,
        root: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Exscan(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Gather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Gatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Neighbor_allgather(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Neighbor_allgatherv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Neighbor_alltoall(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Neighbor_alltoallv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Neighbor_alltoallw(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const Aint,
        sendtypes: *const Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const Aint,
        recvtypes: *const Datatype,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Reduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        root: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Reduce_local(
        inbuf: *const c_void,
        inoutbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
    ) -> c_int;
    fn PMPI_Reduce_scatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Reduce_scatter_block(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcount: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Scan(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Scatter(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Scatterv(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        displs: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
    ) -> c_int;
}

export! {
    fn MPI_Allgather_c / PMPI_Allgather_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Allgather_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Allgather(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Allgatherv_c / PMPI_Allgatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Allgatherv_c";
        let run = || -> Result<c_int, c_int> {
            let len = group_len(func, comm)?;
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Allgatherv(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Allreduce_c / PMPI_Allreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm) -> c_int {
        let func = "MPI_Allreduce_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Allreduce(sendbuf, recvbuf, count.count, count.dt, op, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Alltoall_c / PMPI_Alltoall_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Alltoall_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Alltoall(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Alltoallv_c / PMPI_Alltoallv_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Alltoallv_c";
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
            Ok(unsafe { PMPI_Alltoallv(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtype, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtype, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Alltoallw_c / PMPI_Alltoallw_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm) -> c_int {
        let func = "MPI_Alltoallw_c";
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
            Ok(unsafe { PMPI_Alltoallw(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtypes, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtypes, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Bcast_c / PMPI_Bcast_c(buffer: *mut c_void, count: Count, datatype: Datatype, root: c_int, comm: Comm) -> c_int {
        let func = "MPI_Bcast_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Bcast(buffer, count.count, count.dt, root, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Exscan_c / PMPI_Exscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm) -> c_int {
        let func = "MPI_Exscan_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Exscan(sendbuf, recvbuf, count.count, count.dt, op, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Gather_c / PMPI_Gather_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm) -> c_int {
        let func = "MPI_Gather_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Gather(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, root, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Gatherv_c / PMPI_Gatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, root: c_int, comm: Comm) -> c_int {
        let func = "MPI_Gatherv_c";
        let run = || -> Result<c_int, c_int> {
            let len = if at_root(func, comm, root)? { group_len(func, comm)? } else { 0 };
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Gatherv(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, root, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_allgather_c / PMPI_Neighbor_allgather_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Neighbor_allgather_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Neighbor_allgather(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Neighbor_allgatherv_c";
        let run = || -> Result<c_int, c_int> {
            let nb = neighbor_lens(func, comm)?;
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, nb.0) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, nb.0) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Neighbor_allgatherv(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_alltoall_c / PMPI_Neighbor_alltoall_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Neighbor_alltoall_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Neighbor_alltoall(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Datatype, comm: Comm) -> c_int {
        let func = "MPI_Neighbor_alltoallv_c";
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
            Ok(unsafe { PMPI_Neighbor_alltoallv(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtype, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtype, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm) -> c_int {
        let func = "MPI_Neighbor_alltoallw_c";
        let run = || -> Result<c_int, c_int> {
            let nb = neighbor_lens(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, nb.1) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, nb.0) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Neighbor_alltoallw(sendbuf, sendcounts.ptr(), sdispls, sendtypes, recvbuf, recvcounts.ptr(), rdispls, recvtypes, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Reduce_c / PMPI_Reduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, root: c_int, comm: Comm) -> c_int {
        let func = "MPI_Reduce_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Reduce(sendbuf, recvbuf, count.count, count.dt, op, root, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Reduce_local_c / PMPI_Reduce_local_c(inbuf: *const c_void, inoutbuf: *mut c_void, count: Count, datatype: Datatype, op: Op) -> c_int {
        let func = "MPI_Reduce_local_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Reduce_local(inbuf, inoutbuf, count.count, count.dt, op) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Reduce_scatter_c / PMPI_Reduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: Datatype, op: Op, comm: Comm) -> c_int {
        let func = "MPI_Reduce_scatter_c";
        let run = || -> Result<c_int, c_int> {
            let len = local_len(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts.ptr(), datatype, op, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Reduce_scatter_block_c / PMPI_Reduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: Datatype, op: Op, comm: Comm) -> c_int {
        let func = "MPI_Reduce_scatter_block_c";
        let run = || -> Result<c_int, c_int> {
            let recvcount = narrow_for_op(func, recvcount, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount.count, recvcount.dt, op, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Scan_c / PMPI_Scan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm) -> c_int {
        let func = "MPI_Scan_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Scan(sendbuf, recvbuf, count.count, count.dt, op, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Scatter_c / PMPI_Scatter_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm) -> c_int {
        let func = "MPI_Scatter_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Scatter(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, root, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Scatterv_c / PMPI_Scatterv_c(sendbuf: *const c_void, sendcounts: *const Count, displs: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm) -> c_int {
        let func = "MPI_Scatterv_c";
        let run = || -> Result<c_int, c_int> {
            let len = if at_root(func, comm, root)? { group_len(func, comm)? } else { 0 };
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Scatterv(sendbuf, sendcounts.ptr(), displs.ptr(), sendtype, recvbuf, recvcount.count, recvcount.dt, root, comm) })
        };
        run().unwrap_or_else(|code| code)
    }
}
