//! Child processes: set-up between fork and exec, exit watching without
//! reaping, reaping.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};

use crossbeam_channel::Sender;

use crate::event::Event;

/// Runs in the child between fork and exec (raw system calls only).
pub(crate) fn child_setup(launcher_pid: u32, core: Option<usize>) -> std::io::Result<()> {
    use rustix::process::{Pid, Signal, getppid, set_parent_process_death_signal};
    set_parent_process_death_signal(Some(Signal::KILL))?;
    // The launcher may have died before prctl took effect.
    if Pid::as_raw(getppid()) as u32 != launcher_pid {
        // (No allocation between fork and exec: an errno, ESRCH.)
        return Err(rustix::io::Errno::SRCH.into());
    }
    if let Some(core) = core {
        let mut set = rustix::thread::CpuSet::new();
        set.set(core);
        // Binding is an optimisation: ignore failure (e.g. restricted cpusets).
        let _ = rustix::thread::sched_setaffinity(None, &set);
    }
    Ok(())
}

/// `pid` as a process id for rustix; `None` for 0 and negative numbers,
/// which `kill` would take for process groups.
fn pid_of(pid: i32) -> Option<rustix::process::Pid> {
    if pid > 0 {
        rustix::process::Pid::from_raw(pid)
    } else {
        None
    }
}

/// Send `sig` to our child `pid`, alive or a zombie (not yet reaped, so
/// the pid is still its own). Failure is ignored: it may be gone already.
pub(crate) fn signal(pid: i32, sig: rustix::process::Signal) {
    if let Some(pid) = pid_of(pid) {
        let _ = rustix::process::kill_process(pid, sig);
    }
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
    use rustix::process::{WaitId, WaitIdOptions, waitid};
    // Status 1 if it cannot be waited for (not a child of ours).
    let failed = ExitStatus::from_raw(1 << 8);
    let Some(pid) = i32::try_from(pid).ok().and_then(pid_of) else {
        return failed;
    };
    loop {
        // NOWAIT leaves it waitable (a zombie) for `reap`.
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(Some(info)) => {
                return match (info.exit_status(), info.terminating_signal()) {
                    (Some(code), _) => ExitStatus::from_raw((code & 0xff) << 8),
                    (None, Some(sig)) => ExitStatus::from_raw(sig & 0x7f),
                    // Only exits are waited for: not reached.
                    (None, None) => failed,
                };
            }
            Err(rustix::io::Errno::INTR) => {}
            // `Ok(None)` only comes with NOHANG, not asked for.
            Ok(None) | Err(_) => return failed,
        }
    }
}

/// Collect an exited child reported by [`watch_exit`] or
/// [`wait_exit_unreaped`].
pub(crate) fn reap(pid: i32) {
    if let Some(pid) = pid_of(pid) {
        // The child has exited (waitid said so) and nobody else waits for
        // it; a failure leaves nothing to collect.
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    }
}

/// Now, in nanoseconds since the Unix epoch, as a rank's
/// `SPAWNED_AT_NS` (it measures its own start from it).
pub(crate) fn spawned_at_ns() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .to_string()
}
