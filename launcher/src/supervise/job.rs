//! [`SupervisedJob`]: what the supervisor acts on — the ranks' processes,
//! the hosts' agents and the event loggers — and [`LaunchedJob`], the one
//! `vpml run` supervises (real processes). The simulator supervises its
//! threads through the same trait, so the decisions (restart or stop,
//! which exit code, when) are the launcher's own in both.

use std::process::ExitStatus;
use std::thread::JoinHandle;

use rustix::process::Signal;

use crate::backend::Backend;
use crate::protocol::ProtocolSetup;

/// What the supervisor acts on.
pub trait SupervisedJob {
    /// How to name rank `rank`'s current process in a message.
    fn describe(&self, rank: usize) -> String;
    /// The host rank `rank`'s current process runs on, in a job across
    /// hosts.
    fn host_name(&self, _rank: usize) -> Option<String> {
        None
    }
    /// Send `sig` to rank `rank`'s current process.
    fn signal(&self, rank: usize, sig: Signal);
    /// Announce a new process of `rank` to the others (the job page);
    /// returns its incarnation.
    fn announce_restart(&mut self, rank: usize) -> u32;
    /// Start process `incarnation` of `rank`.
    fn respawn(&mut self, rank: usize, incarnation: u32) -> Result<(), String>;
    /// Processes started from now on resume from global checkpoint
    /// `index` (coordinated checkpointing; 0: from the beginning).
    fn set_restart_from(&mut self, index: u64);
    /// Ask the ranks for a global checkpoint (the job page): the
    /// request's ticket, answered once [`SupervisedJob::requests_taken`]
    /// reaches it.
    fn request_checkpoint(&self) -> u32;
    /// How many requests complete global checkpoints answered.
    fn requests_taken(&self) -> u32;
    /// The newest complete global checkpoint (the job page; 0: none).
    fn global_checkpoint(&self) -> u32;
    /// Every rank restarts from global checkpoint `index`: the newer ones
    /// are gone.
    fn reset_global_checkpoint(&self, index: u32);
    /// Wake every rank sleeping on its doorbell (they look at the job page).
    fn wake_all(&self);
    /// Tell the ranks that every rank finalized (they may exit).
    fn announce_all_finalized(&self);
    /// Kill the agent of `host` (failure injection).
    fn kill_agent(&mut self, host: usize);
    /// The agent of `host` is gone: the ranks that ran there.
    fn host_lost(&mut self, host: usize) -> Vec<usize>;
    /// Kill event logger `index` (failure injection).
    fn kill_logger(&mut self, index: usize);
    /// Event logger `index` (process `pid`) exited with `status`: start it
    /// again. `Ok(Some(line))` says what was done.
    fn restart_logger(
        &mut self,
        index: usize,
        pid: u32,
        status: ExitStatus,
    ) -> Result<Option<String>, String>;
    /// One line for the user (`vpml run: …` on stderr).
    fn notice(&self, line: &str);
}

/// The job `vpml run` started: ranks on a [`Backend`], loggers of a
/// [`ProtocolSetup`].
pub(crate) struct LaunchedJob<'a, 'b> {
    pub(crate) backend: &'a mut Backend<'b>,
    pub(crate) protocol: &'a mut ProtocolSetup,
    /// The output forwarders of every process started.
    pub(crate) forwarders: &'a mut Vec<JoinHandle<()>>,
}

impl SupervisedJob for LaunchedJob<'_, '_> {
    fn describe(&self, rank: usize) -> String {
        self.backend.describe(rank)
    }
    fn host_name(&self, rank: usize) -> Option<String> {
        self.backend.host_name(rank)
    }
    fn signal(&self, rank: usize, sig: Signal) {
        self.backend.signal(rank, sig);
    }
    fn announce_restart(&mut self, rank: usize) -> u32 {
        self.backend.announce_restart(rank)
    }
    fn respawn(&mut self, rank: usize, incarnation: u32) -> Result<(), String> {
        self.backend
            .respawn(rank, incarnation, self.forwarders)
            .map_err(|e| e.to_string())
    }
    fn set_restart_from(&mut self, index: u64) {
        self.backend.set_restart_from(index);
    }
    fn request_checkpoint(&self) -> u32 {
        self.backend.request_checkpoint()
    }
    fn requests_taken(&self) -> u32 {
        self.backend.requests_taken()
    }
    fn global_checkpoint(&self) -> u32 {
        self.backend.global_checkpoint()
    }
    fn reset_global_checkpoint(&self, index: u32) {
        self.backend.reset_global_checkpoint(index);
    }
    fn wake_all(&self) {
        self.backend.wake_all();
    }
    fn announce_all_finalized(&self) {
        self.backend.announce_all_finalized();
    }
    fn kill_agent(&mut self, host: usize) {
        self.backend.kill_agent(host);
    }
    fn host_lost(&mut self, host: usize) -> Vec<usize> {
        self.backend.host_lost(host)
    }
    fn kill_logger(&mut self, index: usize) {
        self.protocol.kill_logger(index);
    }
    fn restart_logger(
        &mut self,
        index: usize,
        pid: u32,
        status: ExitStatus,
    ) -> Result<Option<String>, String> {
        self.protocol
            .restart_logger(index, pid, status)
            .map_err(|e| e.to_string())
    }
    fn notice(&self, line: &str) {
        eprintln!("vpml run: {line}");
    }
}
