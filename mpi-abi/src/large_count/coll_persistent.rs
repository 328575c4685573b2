//! The large-count persistent collectives (`MPI_Bcast_init_c` …), as the
//! blocking ones ([`super::coll`]).

use std::ffi::{c_int, c_void};

use super::{
    at_root, group_len, ints_of, keep_with, local_len, narrow, narrow_for_op, narrow_send,
    neighbor_lens,
};
use crate::consts::*;

// The int twins, through their profiling names (a tool that intercepts
// `MPI_Bcast` must not see `MPI_Bcast_c` twice).
unsafe extern "C" {
    fn PMPI_Allgather_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Allgatherv_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Allreduce_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Alltoall_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Alltoallv_init(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Alltoallw_init(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtypes: *const Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtypes: *const Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Bcast_init(
        buffer: *mut c_void,
        count: c_int,
        datatype: Datatype,
        root: c_int,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Exscan_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Gather_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Gatherv_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Neighbor_allgather_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Neighbor_allgatherv_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Neighbor_alltoall_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Neighbor_alltoallv_init(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Neighbor_alltoallw_init(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const Aint,
        sendtypes: *const Datatype,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const Aint,
        recvtypes: *const Datatype,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Reduce_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        root: c_int,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Reduce_scatter_block_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcount: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Reduce_scatter_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Scan_init(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        op: Op,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Scatter_init(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Scatterv_init(
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        displs: *const c_int,
        sendtype: Datatype,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        root: c_int,
        comm: Comm,
        info: Info,
        request: *mut Request,
    ) -> c_int;
}

export! {
    fn MPI_Allgather_init_c / PMPI_Allgather_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Allgather_init_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Allgather_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Allgatherv_init_c";
        let run = || -> Result<c_int, c_int> {
            let len = group_len(func, comm)?;
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            let rc = unsafe { PMPI_Allgatherv_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![recvcounts, displs]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Allreduce_init_c / PMPI_Allreduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Allreduce_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Allreduce_init(sendbuf, recvbuf, count.count, count.dt, op, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Alltoall_init_c / PMPI_Alltoall_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Alltoall_init_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Alltoall_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Alltoallv_init_c";
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
            let rc = unsafe { PMPI_Alltoallv_init(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtype, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtype, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![sendcounts, sdispls, recvcounts, rdispls]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Alltoallw_init_c";
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
            let rc = unsafe { PMPI_Alltoallw_init(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtypes, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtypes, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![sendcounts, sdispls, recvcounts, rdispls]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Bcast_init_c / PMPI_Bcast_init_c(buffer: *mut c_void, count: Count, datatype: Datatype, root: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Bcast_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Bcast_init(buffer, count.count, count.dt, root, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Exscan_init_c / PMPI_Exscan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Exscan_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Exscan_init(sendbuf, recvbuf, count.count, count.dt, op, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Gather_init_c / PMPI_Gather_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Gather_init_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Gather_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, root, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Gatherv_init_c / PMPI_Gatherv_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, root: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Gatherv_init_c";
        let run = || -> Result<c_int, c_int> {
            let len = if at_root(func, comm, root)? { group_len(func, comm)? } else { 0 };
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            let rc = unsafe { PMPI_Gatherv_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, root, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![recvcounts, displs]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Neighbor_allgather_init_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Neighbor_allgather_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Aint, recvtype: Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Neighbor_allgatherv_init_c";
        let run = || -> Result<c_int, c_int> {
            let nb = neighbor_lens(func, comm)?;
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, nb.0) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, nb.0) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            let rc = unsafe { PMPI_Neighbor_allgatherv_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcounts.ptr(), displs.ptr(), recvtype, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![recvcounts, displs]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Neighbor_alltoall_init_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Neighbor_alltoall_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtype: Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Neighbor_alltoallv_init_c";
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
            let rc = unsafe { PMPI_Neighbor_alltoallv_init(sendbuf, sendcounts.ptr(), sdispls.ptr(), sendtype, recvbuf, recvcounts.ptr(), rdispls.ptr(), recvtype, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![sendcounts, sdispls, recvcounts, rdispls]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Aint, sendtypes: *const Datatype, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Aint, recvtypes: *const Datatype, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Neighbor_alltoallw_init_c";
        let run = || -> Result<c_int, c_int> {
            let nb = neighbor_lens(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, nb.1) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, nb.0) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            let rc = unsafe { PMPI_Neighbor_alltoallw_init(sendbuf, sendcounts.ptr(), sdispls, sendtypes, recvbuf, recvcounts.ptr(), rdispls, recvtypes, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![sendcounts, recvcounts]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Reduce_init_c / PMPI_Reduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, root: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Reduce_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Reduce_init(sendbuf, recvbuf, count.count, count.dt, op, root, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: Datatype, op: Op, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Reduce_scatter_block_init_c";
        let run = || -> Result<c_int, c_int> {
            let recvcount = narrow_for_op(func, recvcount, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Reduce_scatter_block_init(sendbuf, recvbuf, recvcount.count, recvcount.dt, op, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: Datatype, op: Op, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Reduce_scatter_init_c";
        let run = || -> Result<c_int, c_int> {
            let len = local_len(func, comm)?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let recvcounts = unsafe { ints_of(func, recvcounts, len) }?;
            // SAFETY: the caller's arguments, their counts narrowed.
            let rc = unsafe { PMPI_Reduce_scatter_init(sendbuf, recvbuf, recvcounts.ptr(), datatype, op, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![recvcounts]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Scan_init_c / PMPI_Scan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: Datatype, op: Op, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Scan_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow_for_op(func, count, datatype, op)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Scan_init(sendbuf, recvbuf, count.count, count.dt, op, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Scatter_init_c / PMPI_Scatter_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Scatter_init_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow_send(func, sendbuf, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Scatter_init(sendbuf, sendcount.count, sendcount.dt, recvbuf, recvcount.count, recvcount.dt, root, comm, info, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Scatterv_init_c / PMPI_Scatterv_init_c(sendbuf: *const c_void, sendcounts: *const Count, displs: *const Aint, sendtype: Datatype, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, root: c_int, comm: Comm, info: Info, request: *mut Request) -> c_int {
        let func = "MPI_Scatterv_init_c";
        let run = || -> Result<c_int, c_int> {
            let len = if at_root(func, comm, root)? { group_len(func, comm)? } else { 0 };
            // SAFETY: an array of one entry per peer (MPI's contract).
            let sendcounts = unsafe { ints_of(func, sendcounts, len) }?;
            // SAFETY: an array of one entry per peer (MPI's contract).
            let displs = unsafe { ints_of(func, displs, len) }?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            let rc = unsafe { PMPI_Scatterv_init(sendbuf, sendcounts.ptr(), displs.ptr(), sendtype, recvbuf, recvcount.count, recvcount.dt, root, comm, info, request) };
            if rc == MPI_SUCCESS {
                // SAFETY: `request` is the handle pointer the twin wrote.
                unsafe { keep_with(request, vec![sendcounts, displs]) };
            }
            Ok(rc)
        };
        run().unwrap_or_else(|code| code)
    }
}
