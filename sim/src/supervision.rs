//! The launcher's own [`Supervisor`] supervises a simulated job: it hears
//! of each rank's start-up, finalize, crash and exit, and decides — as
//! under `vpml run` — whether a crashed rank is restarted (announced on the
//! job page) or the job ends, and with which status. [`SimJob`] is what it
//! acts on: the rank threads of [`crate::job`].

use std::cell::RefCell;
use std::sync::Arc;

use rustix::process::Signal;
use vpml_launcher::SupervisedJob;
use vpml_pml::recovery::JobPage;

/// The simulated ranks, as the supervisor sees them.
pub(crate) struct SimJob {
    /// The job page (restartable jobs).
    page: Option<Arc<JobPage>>,
    /// What the supervisor said, in order.
    notices: RefCell<Vec<String>>,
    /// Incarnations the supervisor started and no rank thread took yet.
    respawned: Vec<Option<u32>>,
}

impl SimJob {
    /// The ranks of a job of `ranks` ranks, with `page` if restartable.
    pub(crate) fn new(ranks: usize, page: Option<Arc<JobPage>>) -> SimJob {
        SimJob {
            page,
            notices: RefCell::new(Vec::new()),
            respawned: vec![None; ranks],
        }
    }

    /// The incarnation the supervisor started for `rank`, if it did.
    pub(crate) fn take_respawned(&mut self, rank: usize) -> Option<u32> {
        self.respawned[rank].take()
    }

    /// The supervisor's last word.
    pub(crate) fn last_notice(&self) -> String {
        self.notices.borrow().last().cloned().unwrap_or_default()
    }
}

impl SupervisedJob for SimJob {
    fn describe(&self, rank: usize) -> String {
        format!("thread of rank {rank}")
    }
    /// A rank thread is never signalled: the supervisor signals only to
    /// stop a job it ended, which the simulator then stops itself.
    fn signal(&self, _: usize, _: Signal) {}
    fn announce_restart(&mut self, rank: usize) -> u32 {
        self.page.as_ref().map_or(0, |p| p.restart(rank))
    }
    fn respawn(&mut self, rank: usize, incarnation: u32) -> Result<(), String> {
        self.respawned[rank] = Some(incarnation);
        Ok(())
    }
    /// The simulator runs `none` and `pessimist` only: never a rollback,
    /// nor a global checkpoint.
    fn set_restart_from(&mut self, _: u64) {}
    fn request_checkpoint(&self) -> u32 {
        0
    }
    fn requests_taken(&self) -> u32 {
        0
    }
    fn global_checkpoint(&self) -> u32 {
        0
    }
    fn reset_global_checkpoint(&self, _: u32) {}
    /// Simulated ranks have no doorbells: they look at the page whenever
    /// they run.
    fn wake_all(&self) {}
    fn announce_all_finalized(&self) {
        if let Some(page) = &self.page {
            page.set_all_finalized();
        }
    }
    fn kill_agent(&mut self, _: usize) {}
    fn host_lost(&mut self, _: usize) -> Vec<usize> {
        Vec::new()
    }
    fn kill_logger(&mut self, _: usize) {}
    fn restart_logger(
        &mut self,
        index: usize,
        _: u32,
        _: std::process::ExitStatus,
    ) -> Result<Option<String>, String> {
        Err(format!(
            "the simulator does not restart loggers (logger {index})"
        ))
    }
    fn notice(&self, line: &str) {
        self.notices.borrow_mut().push(line.to_string());
    }
}
