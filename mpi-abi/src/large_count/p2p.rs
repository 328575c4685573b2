//! The large-count point-to-point calls (`MPI_Send_c` …): each narrows its
//! counts ([`super::narrow`]) and runs its int twin.

use std::ffi::{c_int, c_void};

use super::narrow;
use crate::consts::*;

// The int twins, through their profiling names (a tool that intercepts
// `MPI_Send` must not see `MPI_Send_c` twice).
unsafe extern "C" {
    fn PMPI_Ibcast(
        buffer: *mut c_void,
        count: c_int,
        datatype: Datatype,
        root: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Bsend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Bsend_init(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Ibsend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Imrecv(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        message: *mut c_int,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Irecv(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        source: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Irsend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Isend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Isendrecv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Isendrecv_replace(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Issend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Mrecv(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        message: *mut c_int,
        status: *mut MpiStatus,
    ) -> c_int;
    fn PMPI_Recv(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        source: c_int,
        tag: c_int,
        comm: Comm,
        status: *mut MpiStatus,
    ) -> c_int;
    fn PMPI_Recv_init(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        source: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Rsend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Rsend_init(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Send(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Send_init(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
    fn PMPI_Sendrecv(
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Datatype,
        dest: c_int,
        sendtag: c_int,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Datatype,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        status: *mut MpiStatus,
    ) -> c_int;
    fn PMPI_Sendrecv_replace(
        buf: *mut c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        sendtag: c_int,
        source: c_int,
        recvtag: c_int,
        comm: Comm,
        status: *mut MpiStatus,
    ) -> c_int;
    fn PMPI_Ssend(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
    ) -> c_int;
    fn PMPI_Ssend_init(
        buf: *const c_void,
        count: c_int,
        datatype: Datatype,
        dest: c_int,
        tag: c_int,
        comm: Comm,
        request: *mut Request,
    ) -> c_int;
}

export! {
    fn MPI_Ibcast_c / PMPI_Ibcast_c(buffer: *mut c_void, count: Count, datatype: Datatype, root: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ibcast_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ibcast(buffer, count.count, count.dt, root, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Bsend_c / PMPI_Bsend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        let func = "MPI_Bsend_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Bsend(buf, count.count, count.dt, dest, tag, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Bsend_init_c / PMPI_Bsend_init_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Bsend_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Bsend_init(buf, count.count, count.dt, dest, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ibsend_c / PMPI_Ibsend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ibsend_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ibsend(buf, count.count, count.dt, dest, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Imrecv_c / PMPI_Imrecv_c(buf: *mut c_void, count: Count, datatype: Datatype, message: *mut c_int, request: *mut Request) -> c_int {
        let func = "MPI_Imrecv_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Imrecv(buf, count.count, count.dt, message, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Irecv_c / PMPI_Irecv_c(buf: *mut c_void, count: Count, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Irecv_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Irecv(buf, count.count, count.dt, source, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Irsend_c / PMPI_Irsend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Irsend_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Irsend(buf, count.count, count.dt, dest, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Isend_c / PMPI_Isend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Isend_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Isend(buf, count.count, count.dt, dest, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Isendrecv_c / PMPI_Isendrecv_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, source: c_int, recvtag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Isendrecv_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow(func, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Isendrecv(sendbuf, sendcount.count, sendcount.dt, dest, sendtag, recvbuf, recvcount.count, recvcount.dt, source, recvtag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Isendrecv_replace_c / PMPI_Isendrecv_replace_c(buf: *mut c_void, count: Count, datatype: Datatype, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Isendrecv_replace_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Isendrecv_replace(buf, count.count, count.dt, dest, sendtag, source, recvtag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Issend_c / PMPI_Issend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Issend_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Issend(buf, count.count, count.dt, dest, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Mrecv_c / PMPI_Mrecv_c(buf: *mut c_void, count: Count, datatype: Datatype, message: *mut c_int, status: *mut MpiStatus) -> c_int {
        let func = "MPI_Mrecv_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Mrecv(buf, count.count, count.dt, message, status) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Recv_c / PMPI_Recv_c(buf: *mut c_void, count: Count, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, status: *mut MpiStatus) -> c_int {
        let func = "MPI_Recv_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Recv(buf, count.count, count.dt, source, tag, comm, status) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Recv_init_c / PMPI_Recv_init_c(buf: *mut c_void, count: Count, datatype: Datatype, source: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Recv_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Recv_init(buf, count.count, count.dt, source, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Rsend_c / PMPI_Rsend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        let func = "MPI_Rsend_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Rsend(buf, count.count, count.dt, dest, tag, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Rsend_init_c / PMPI_Rsend_init_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Rsend_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Rsend_init(buf, count.count, count.dt, dest, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Send_c / PMPI_Send_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        let func = "MPI_Send_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Send(buf, count.count, count.dt, dest, tag, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Send_init_c / PMPI_Send_init_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Send_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Send_init(buf, count.count, count.dt, dest, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Sendrecv_c / PMPI_Sendrecv_c(sendbuf: *const c_void, sendcount: Count, sendtype: Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: Datatype, source: c_int, recvtag: c_int, comm: Comm, status: *mut MpiStatus) -> c_int {
        let func = "MPI_Sendrecv_c";
        let run = || -> Result<c_int, c_int> {
            let sendcount = narrow(func, sendcount, sendtype)?;
            let recvcount = narrow(func, recvcount, recvtype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Sendrecv(sendbuf, sendcount.count, sendcount.dt, dest, sendtag, recvbuf, recvcount.count, recvcount.dt, source, recvtag, comm, status) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Sendrecv_replace_c / PMPI_Sendrecv_replace_c(buf: *mut c_void, count: Count, datatype: Datatype, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: Comm, status: *mut MpiStatus) -> c_int {
        let func = "MPI_Sendrecv_replace_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Sendrecv_replace(buf, count.count, count.dt, dest, sendtag, source, recvtag, comm, status) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ssend_c / PMPI_Ssend_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm) -> c_int {
        let func = "MPI_Ssend_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ssend(buf, count.count, count.dt, dest, tag, comm) })
        };
        run().unwrap_or_else(|code| code)
    }

    fn MPI_Ssend_init_c / PMPI_Ssend_init_c(buf: *const c_void, count: Count, datatype: Datatype, dest: c_int, tag: c_int, comm: Comm, request: *mut Request) -> c_int {
        let func = "MPI_Ssend_init_c";
        let run = || -> Result<c_int, c_int> {
            let count = narrow(func, count, datatype)?;
            // SAFETY: the caller's arguments, their counts narrowed.
            Ok(unsafe { PMPI_Ssend_init(buf, count.count, count.dt, dest, tag, comm, request) })
        };
        run().unwrap_or_else(|code| code)
    }
}
