//! Child processes: set-up between fork and exec, exit watching without
//! reaping, reaping.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};

use crossbeam_channel::Sender;

use crate::event::Event;

/// Runs in the child between fork and exec.
pub(crate) fn child_setup(launcher_pid: u32, core: Option<usize>) -> std::io::Result<()> {
    // SAFETY: prctl/getppid/sched_setaffinity are async-signal-safe and get
    // valid arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The launcher may have died before prctl took effect.
        if libc::getppid() as u32 != launcher_pid {
            return Err(std::io::Error::other("launcher exited during start-up"));
        }
        if let Some(core) = core {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(core, &mut set);
            // Binding is an optimisation: ignore failure (e.g. restricted cpusets).
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
    Ok(())
}

/// Report the exit of `child` without reaping it: the main loop reaps it
/// (see [`reap`]) only after marking it exited, so it never signals a pid
/// the kernel could already have given to another process.
pub(crate) fn watch_exit(rank: usize, incarnation: u32, child: Child, tx: Sender<Event>) {
    std::thread::spawn(move || {
        let pid = child.id();
        let status = wait_exit_unreaped(pid);
        drop(child);
        let _ = tx.send(Event::Exited {
            rank,
            pid: Some(pid as i32),
            incarnation,
            status,
        });
    });
}

/// Block until child `pid` exits and return how; it stays a zombie (its
/// pid cannot be reused, so signalling it stays safe) until [`reap`].
pub(crate) fn wait_exit_unreaped(pid: u32) -> ExitStatus {
    // SAFETY: zeroed siginfo_t is a valid out-parameter for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waitid on our own child with a valid out-pointer;
        // WNOWAIT leaves it waitable (a zombie) for `reap`.
        let rc =
            unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            // SAFETY: waitid succeeded, so the SIGCHLD fields are set.
            let st = unsafe { info.si_status() };
            return if info.si_code == libc::CLD_EXITED {
                ExitStatus::from_raw((st & 0xff) << 8)
            } else {
                ExitStatus::from_raw(st & 0x7f)
            };
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return ExitStatus::from_raw(1 << 8);
        }
    }
}

/// Collect an exited child reported by [`watch_exit`] or
/// [`wait_exit_unreaped`].
pub(crate) fn reap(pid: i32) {
    let mut st = 0;
    // SAFETY: the child has exited (waitid said so) and nobody else waits for it.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

/// Now, in nanoseconds since the Unix epoch, as a rank's
/// `SPAWNED_AT_NS` (it measures its own start from it).
pub(crate) fn spawned_at_ns() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .to_string()
}
