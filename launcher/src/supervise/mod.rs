//! The supervisor: watches the ranks of a running job, restarts crashed
//! ones (with a protocol), injects the failures asked for, and decides the
//! job's exit code. It acts on the job through [`SupervisedJob`]
//! (`job.rs`): real processes under `vpml run`, threads in the simulator.

mod job;

pub(crate) use job::LaunchedJob;
pub use job::SupervisedJob;

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use rustix::process::Signal;

use crate::event::Event;
use crate::inject::{self, ArmedPoint, Clock, Injection, Target};
use crate::process::reap;

/// Say `format!(…)` to the user through the supervised job.
macro_rules! notice {
    ($self:ident, $($arg:tt)*) => {
        $self.job.notice(&format!($($arg)*))
    };
}

// After the macro, which it uses.
mod rollback;

pub use rollback::CopyStores;

/// Exit code when `--timeout` ends the job (as `timeout(1)`).
pub const TIMEOUT_EXIT: u8 = 124;
/// How long ranks get between SIGTERM and SIGKILL when the job is stopped.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// Signals a user stops a job with: a rank they kill is not restarted.
const USER_STOP_SIGNALS: [i32; 4] = [
    Signal::INT.as_raw(),
    Signal::TERM.as_raw(),
    Signal::HUP.as_raw(),
    Signal::QUIT.as_raw(),
];

/// How a rank's process ended, as the supervisor sees it.
enum Death {
    Signal(i32),
    Lost(String),
}

/// The state of a running job as the launcher sees it, and what it does
/// about each input: a rank exited, joined, finalized or aborted, a timer
/// fired, an agent or an event logger died, a signal arrived. Each input
/// is one method, so that the loop in `Supervisor::run` (`vpml run`'s) is only the
/// waiting.
pub struct Supervisor<J: SupervisedJob> {
    job: J,
    /// Crashed ranks are restarted (a protocol is on).
    restartable: bool,
    /// A failure restarts every rank from the last global checkpoint
    /// (`coordinated`), not the crashed rank alone.
    rollback: bool,
    /// The rollback under way: every rank is being stopped.
    rolling_back: Option<rollback::Rollback>,
    /// Global checkpoints asked for and not yet complete.
    requests: Vec<rollback::CheckpointRequest>,
    /// `--checkpoint-interval`, and when it next asks.
    checkpoint_interval: Option<Duration>,
    next_interval_request: Option<Instant>,
    log_dir: Option<PathBuf>,
    /// [`Policy::copy_stores`].
    copy_stores: Option<CopyStores>,
    /// `--timeout`, for the message.
    timeout: Option<Duration>,
    max_restarts: u32,
    start: Instant,
    /// How each rank's last process ended (for a recording's manifest).
    ended: Vec<String>,
    finalized: Vec<bool>,
    joined: Vec<bool>,
    all_finalized: bool,
    alive: Vec<bool>,
    incarnation: Vec<u32>,
    /// Timed kills counted from the start.
    from_start: Timed,
    /// Timed kills counted from `all_joined_at`.
    from_join: Timed,
    /// When the last rank joined the job.
    all_joined_at: Option<Instant>,
    /// Kills that wait for a restart of their rank, in order, and those armed.
    on_restart: Vec<VecDeque<Duration>>,
    armed: Vec<(Instant, usize)>,
    killed_at: Vec<Option<Instant>>,
    corrupt_before_restart: Vec<bool>,
    /// Files removed when the rank dies next (`…:lose-files`): a rank's
    /// point kills its first process, or the process a restart armed.
    lose_files_before_restart: Vec<bool>,
    lose_files_at: Vec<(usize, u32)>,
    /// Processes (rank, incarnation) whose death at their fault point
    /// damages the rank's newest checkpoint (`…:corrupt-checkpoint`).
    corrupt_at: Vec<(usize, u32)>,
    /// The other ranks' sender logs are damaged before the rank restarts
    /// (`…:corrupt-sender-log`): after a timed kill, or the death of a
    /// process (rank, incarnation) at its fault point.
    corrupt_logs_before_restart: Vec<bool>,
    corrupt_logs_at: Vec<(usize, u32)>,
    /// Hosts whose files go with them (`agent:H@T:lose-files`).
    files_lost_with: Vec<usize>,
    restarts_done: u32,
    /// The job's exit code, once it is decided.
    failure: Option<u8>,
    /// The first non-zero status a rank exited with after finalizing: the
    /// job's when nothing failed.
    exit_status: Option<u8>,
    /// When the ranks still alive get SIGKILL.
    kill_at: Option<Instant>,
    deadline: Option<Instant>,
}

/// How a job is supervised.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Ranks in the job.
    pub ranks: usize,
    /// Crashed ranks are restarted (a protocol is on).
    pub restartable: bool,
    /// A failure restarts every rank from the last global checkpoint
    /// (`coordinated`).
    pub rollback: bool,
    /// Ask for a global checkpoint this often (`--checkpoint-interval`).
    pub checkpoint_interval: Option<Duration>,
    /// Restarts allowed, of ranks and loggers together (`--max-restarts`).
    pub max_restarts: u32,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// The job's log directory (where injected file damage happens).
    pub log_dir: Option<PathBuf>,
    /// Where the copies of the global checkpoints are (`coordinated`
    /// across hosts): a restart looks there, not in the log directory.
    pub copy_stores: Option<CopyStores>,
}

/// Timed kills on one clock, in time order, and the next one due.
struct Timed {
    kills: Vec<Injection>,
    next: usize,
}

impl Timed {
    /// When the next kill is due, on a clock that started at `base` (not
    /// yet started: `None`).
    fn next_at(&self, base: Option<Instant>) -> Option<Instant> {
        Some(base? + self.kills.get(self.next)?.after)
    }

    /// The next kill, if it is due at `now`.
    fn take_due(&mut self, base: Option<Instant>, now: Instant) -> Option<Injection> {
        let inj = *self.kills.get(self.next)?;
        if base? + inj.after > now {
            return None;
        }
        self.next += 1;
        Some(inj)
    }
}

impl<J: SupervisedJob> Supervisor<J> {
    /// A supervisor of `job`, whose ranks are all started; the clock of
    /// `--timeout` starts now.
    pub fn new(policy: Policy, job: J) -> Self {
        Supervisor::with_plan(policy, job, &inject::Plan::default())
    }

    /// [`Supervisor::new`] with the failures of `plan` to inject (timed
    /// from now, from when every rank has joined, or from a restart, as
    /// each says).
    pub(crate) fn with_plan(policy: Policy, job: J, plan: &inject::Plan) -> Self {
        let n = policy.ranks;
        let start = Instant::now();
        let timed_on = |clock| Timed {
            kills: plan
                .kills
                .iter()
                .filter(|i| i.clock == clock)
                .copied()
                .collect(),
            next: 0,
        };
        let (from_start, from_join) = (timed_on(Clock::Start), timed_on(Clock::Join));
        let relative = plan.kills.iter().filter(|i| i.clock == Clock::Restart);
        let mut on_restart: Vec<VecDeque<Duration>> = vec![Default::default(); n];
        for i in relative {
            if let Target::Rank(r) = i.target
                && let Some(q) = on_restart.get_mut(r)
            {
                q.push_back(i.after);
            }
        }
        // The processes whose death at a fault point damages their files.
        let points_where = |damage: fn(&ArmedPoint) -> bool| -> Vec<(usize, u32)> {
            plan.points
                .iter()
                .filter(|p| damage(p))
                .filter_map(|p| match p.target {
                    Target::Rank(r) => Some((r, p.incarnation)),
                    _ => None,
                })
                .collect()
        };
        let lose_files_at = points_where(|p| p.lose_files);
        let corrupt_at = points_where(|p| p.corrupt_checkpoint);
        let corrupt_logs_at = points_where(|p| p.corrupt_sender_logs);
        Supervisor {
            job,
            restartable: policy.restartable,
            rollback: policy.rollback,
            rolling_back: None,
            requests: Vec::new(),
            checkpoint_interval: policy.checkpoint_interval,
            next_interval_request: policy.checkpoint_interval.map(|i| start + i),
            log_dir: policy.log_dir,
            copy_stores: policy.copy_stores,
            timeout: policy.timeout,
            max_restarts: policy.max_restarts,
            start,
            ended: vec!["still running when the job ended".to_string(); n],
            finalized: vec![false; n],
            joined: vec![false; n],
            all_finalized: false,
            alive: vec![true; n],
            incarnation: vec![0; n],
            from_start,
            from_join,
            all_joined_at: None,
            on_restart,
            armed: Vec::new(),
            killed_at: vec![None; n],
            corrupt_before_restart: vec![false; n],
            lose_files_before_restart: vec![false; n],
            lose_files_at,
            corrupt_at,
            corrupt_logs_before_restart: vec![false; n],
            corrupt_logs_at,
            files_lost_with: Vec::new(),
            restarts_done: 0,
            failure: None,
            exit_status: None,
            kill_at: None,
            deadline: policy.timeout.map(|t| start + t),
        }
    }

    /// The main loop: returns the job's exit code once every rank has
    /// exited, and how each rank's last process ended.
    pub(crate) fn run(mut self, rx: &Receiver<Event>) -> (u8, Vec<String>) {
        while self.alive.iter().any(|&a| a) {
            let ev = match self.next_wake() {
                Some(t) => match rx.recv_deadline(t) {
                    Ok(ev) => Some(ev),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                },
                None => match rx.recv() {
                    Ok(ev) => Some(ev),
                    Err(_) => break,
                },
            };
            match ev {
                None => self.on_timer(Instant::now()),
                Some(ev) => self.on_event(ev),
            }
        }
        self.finish()
    }

    /// The job's exit code (0 unless it was decided otherwise) and how
    /// each rank's last process ended.
    pub fn finish(mut self) -> (u8, Vec<String>) {
        self.refuse_pending_checkpoints();
        (self.failure.or(self.exit_status).unwrap_or(0), self.ended)
    }

    /// The job it supervises.
    pub fn job(&self) -> &J {
        &self.job
    }

    /// The job it supervises, to change.
    pub fn job_mut(&mut self) -> &mut J {
        &mut self.job
    }

    /// The job's exit code, once it is decided.
    pub fn failure(&self) -> Option<u8> {
        self.failure
    }

    /// Is rank `rank`'s current process running (started and not exited)?
    pub fn alive(&self, rank: usize) -> bool {
        self.alive[rank]
    }

    /// `rank`'s first process finished start-up: from now on it is
    /// restarted when it dies.
    pub fn on_joined(&mut self, rank: usize) {
        self.joined[rank] = true;
        if self.all_joined_at.is_none() && self.joined.iter().all(|&j| j) {
            let now = Instant::now();
            self.all_joined_at = Some(now);
            if !self.from_join.kills.is_empty() {
                notice!(
                    self,
                    "every rank joined the job at {:.3} s: random failures count from now",
                    now.duration_since(self.start).as_secs_f64()
                );
            }
        }
    }

    /// When [`Supervisor::on_timer`] has something to do next, if ever.
    pub fn next_wake(&self) -> Option<Instant> {
        let injection_at = self
            .from_start
            .next_at(Some(self.start))
            .into_iter()
            .chain(self.from_join.next_at(self.all_joined_at))
            .chain(self.armed.iter().map(|(t, _)| *t))
            .min();
        [
            self.deadline,
            self.kill_at,
            injection_at.filter(|_| self.failure.is_none()),
            self.checkpoint_wake(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// One input from the launcher's threads.
    pub(crate) fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Joined { rank } => self.on_joined(rank),
            // What a process said before it was replaced (or while every
            // rank is being stopped) is not its successor's.
            Event::Finalized { rank, incarnation }
            | Event::Abort {
                rank, incarnation, ..
            } if incarnation != self.incarnation[rank] || self.rolling_back.is_some() => {}
            Event::Finalized { rank, .. } => self.on_finalized(rank),
            Event::AgentLost { host, name, why } => self.on_agent_lost(host, &name, &why),
            Event::Exited {
                rank,
                pid,
                incarnation,
                status,
            } => self.on_exited(rank, pid, incarnation, status),
            Event::Abort {
                rank,
                code,
                message,
                ..
            } => self.on_abort(rank, code, &message),
            Event::LoggerExited { index, pid, status } => self.on_logger_exited(index, pid, status),
            Event::Signal(sig) if sig == Signal::USR1.as_raw() => {
                self.on_checkpoint_request("SIGUSR1", None)
            }
            Event::Signal(sig) => self.on_signal(sig),
            Event::CheckpointRequest { by, reply } => self.on_checkpoint_request(&by, reply),
        }
    }

    /// Timers: injected kills due, the end of the grace period after
    /// SIGTERM, `--timeout`.
    pub fn on_timer(&mut self, now: Instant) {
        let armed = std::mem::take(&mut self.armed);
        for (t, rank) in armed {
            if t > now {
                self.armed.push((t, rank));
                continue;
            }
            if self.failure.is_none() && !self.all_finalized && self.alive[rank] {
                notice!(
                    self,
                    "injecting a failure: SIGKILL to rank {rank} ({}) during its recovery, at {:.3} s",
                    self.job.describe(rank),
                    now.duration_since(self.start).as_secs_f64()
                );
                self.killed_at[rank] = Some(now);
                self.job.signal(rank, Signal::KILL);
            }
        }
        while let Some(inj) = self
            .from_start
            .take_due(Some(self.start), now)
            .or_else(|| self.from_join.take_due(self.all_joined_at, now))
        {
            if self.failure.is_some() || self.all_finalized {
                continue;
            }
            self.inject(&inj, now);
        }
        self.checkpoint_timers(now);
        if self.kill_at.is_some_and(|t| now >= t) {
            self.signal_all(&self.live(), Signal::KILL);
            self.kill_at = None;
        }
        if self.deadline.is_some_and(|t| now >= t) && self.failure.is_none() {
            let targets = self.live();
            notice!(
                self,
                "job timed out after {} s; stopping {} rank(s)",
                self.timeout.unwrap_or_default().as_secs_f64(),
                targets.len()
            );
            self.failure = Some(TIMEOUT_EXIT);
            self.signal_all(&targets, Signal::KILL);
        }
        if self.deadline.is_some_and(|t| now >= t) {
            self.deadline = None;
        }
    }

    /// Carry out a timed kill that is due.
    fn inject(&mut self, inj: &Injection, now: Instant) {
        let at = now.duration_since(self.start).as_secs_f64();
        match inj.target {
            Target::Agent(host) => {
                notice!(
                    self,
                    "injecting a failure: SIGKILL to the agent of host {host} at {at:.3} s"
                );
                if inj.lose_files {
                    self.files_lost_with.push(host);
                }
                self.job.kill_agent(host);
            }
            Target::Logger(i) => {
                notice!(
                    self,
                    "injecting a failure: SIGKILL to event logger {i} at {at:.3} s"
                );
                self.job.kill_logger(i);
            }
            Target::Rank(rank) if self.alive[rank] => {
                notice!(
                    self,
                    "injecting a failure: SIGKILL to rank {rank} ({}) at {at:.3} s",
                    self.job.describe(rank),
                );
                self.killed_at[rank] = Some(now);
                self.corrupt_before_restart[rank] |= inj.corrupt_checkpoint;
                self.lose_files_before_restart[rank] |= inj.lose_files;
                self.corrupt_logs_before_restart[rank] |= inj.corrupt_sender_logs;
                self.job.signal(rank, Signal::KILL);
            }
            Target::Rank(_) => {}
        }
    }

    /// `rank` finalized.
    pub fn on_finalized(&mut self, rank: usize) {
        self.finalized[rank] = true;
        if !self.all_finalized && self.finalized.iter().all(|&f| f) {
            self.all_finalized = true;
            if self.restartable {
                // Ranks wait for this before exiting: until now a
                // crashed rank could still need their logs.
                self.job.announce_all_finalized();
            }
        }
    }

    /// The agent of `host` (named `name`) is gone, and its ranks with it.
    pub fn on_agent_lost(&mut self, host: usize, name: &str, why: &str) {
        let lost = self.job.host_lost(host);
        if self.files_lost_with.contains(&host)
            && let Some(dir) = &self.log_dir
        {
            // As if the machine were gone: its ranks' files too.
            for &r in &lost {
                inject::remove_rank_files(dir, r, &format!("with host {name}"));
            }
        }
        let mut deaths = Vec::new();
        for r in lost {
            if self.alive[r] {
                self.alive[r] = false;
                deaths.push((r, Death::Lost(format!("host {name} was lost ({why})"))));
            }
        }
        for (rank, death) in deaths {
            self.on_death(rank, death);
        }
    }

    /// Process `incarnation` of `rank` exited (`pid`: a child of this
    /// launcher, to reap).
    pub fn on_exited(
        &mut self,
        rank: usize,
        pid: Option<i32>,
        incarnation: u32,
        status: ExitStatus,
    ) {
        if let Some(pid) = pid {
            reap(pid);
        }
        if incarnation != self.incarnation[rank] || !self.alive[rank] {
            return;
        }
        self.alive[rank] = false;
        self.ended[rank] = match (status.code(), status.signal()) {
            (Some(c), _) => format!("exit {c}"),
            (_, Some(sig)) => format!("signal {sig}"),
            _ => "unknown".into(),
        };
        if self.rolling_back.is_some() {
            // Stopped for the rollback (or it ended on its own meanwhile).
            self.rollback_if_stopped();
            return;
        }
        if let Some(sig) = status.signal() {
            self.on_death(rank, Death::Signal(sig));
        } else if let Some(code) = status.code().filter(|c| *c != 0) {
            if self.finalized[rank] {
                // The program's own exit status after a clean finish: the
                // job's once every rank is done, with no line; the others
                // finish undisturbed (a failure of theirs still speaks).
                self.exit_status.get_or_insert(code as u8);
            } else {
                self.fail(code as u8, format!("rank {rank} exited with status {code}"));
            }
        } else if !self.finalized[rank] {
            self.fail(
                1,
                format!(
                    "rank {rank} exited without finalizing (status 0, but vpml was not finalized)"
                ),
            );
        }
    }

    /// `rank` called abort.
    pub fn on_abort(&mut self, rank: usize, code: i32, message: &str) {
        let code = u8::try_from(code).ok().filter(|&c| c != 0).unwrap_or(1);
        self.fail(
            code,
            format!("rank {rank} aborted the job (code {code}): {message}"),
        );
    }

    /// Process `pid` of event logger `index` exited.
    pub fn on_logger_exited(&mut self, index: usize, pid: u32, status: ExitStatus) {
        if self.failure.is_some() || self.all_finalized {
            return;
        }
        if let Some(sig) = status.signal().filter(|s| USER_STOP_SIGNALS.contains(s)) {
            // Ctrl-C reaches the loggers too: the user's stop.
            self.fail(
                128 + sig as u8,
                format!(
                    "event logger {index} was stopped by {}: ending the job",
                    signal_name(sig)
                ),
            );
        } else if self.restarts_done >= self.max_restarts {
            self.fail(
                1,
                format!(
                    "event logger {index} died; no restarts left (--max-restarts {})",
                    self.max_restarts
                ),
            );
        } else {
            match self.job.restart_logger(index, pid, status) {
                Ok(Some(line)) => {
                    self.restarts_done += 1;
                    notice!(self, "{line}");
                }
                Ok(None) => {}
                Err(why) => self.fail(1, why),
            }
        }
    }

    /// The launcher received `sig` (forwarded to the ranks).
    pub fn on_signal(&mut self, sig: i32) {
        let targets = self.live();
        if self.failure.is_none() {
            notice!(
                self,
                "received {}; forwarding it to {} rank(s)",
                signal_name(sig),
                targets.len()
            );
            self.failure = Some(128 + sig as u8);
            // The handler watches named signals only (INT, TERM, HUP).
            self.signal_all(
                &targets,
                Signal::from_named_raw(sig).unwrap_or(Signal::TERM),
            );
            self.kill_at = Some(Instant::now() + TERM_GRACE);
        } else {
            self.signal_all(&targets, Signal::KILL);
        }
    }

    /// `rank`'s process died (it is marked dead): restart it, or end the job.
    fn on_death(&mut self, rank: usize, death: Death) {
        let (why, code) = match &death {
            Death::Signal(sig) => (
                format!(
                    "rank {rank} was killed by signal {sig} ({})",
                    signal_name(*sig)
                ),
                128 + *sig as u8,
            ),
            Death::Lost(why) => (
                format!("rank {rank} died: {why}"),
                128 + Signal::KILL.as_raw() as u8,
            ),
        };
        if self.restartable && self.all_finalized && self.finalized[rank] {
            // Its work is done and nobody can need it any more.
            return;
        }
        if self.failure.is_some() {
            return;
        }
        if !self.restartable {
            self.fail(code, why);
            return;
        }
        if !self.joined[rank] {
            // The others wait for it in a start-up fence: nothing to
            // recover, and a new process cannot take its place there.
            self.fail(
                code,
                format!(
                    "{why} during start-up, before the job was joined: only ranks past start-up are restarted (run the job again)"
                ),
            );
            return;
        }
        if matches!(death, Death::Signal(s) if USER_STOP_SIGNALS.contains(&s)) {
            // Ctrl-C reaches the whole process group, ranks included,
            // often before the launcher hears it: the user's stop, not
            // a crash to recover from.
            self.fail(
                code,
                format!(
                    "{why}: ending the job (a rank stopped by SIGINT, SIGTERM, SIGHUP or SIGQUIT is not restarted)"
                ),
            );
            return;
        }
        if self.restarts_done >= self.max_restarts {
            self.fail(
                code,
                format!(
                    "{why}; no restarts left (--max-restarts {})",
                    self.max_restarts
                ),
            );
            return;
        }
        if self.rollback {
            self.start_rollback(rank, why, code);
        } else {
            self.restart(rank, &why, code);
        }
    }

    /// Restart `rank` (its death described by `why`), damaging or removing
    /// its files first if a test asked for it.
    fn restart(&mut self, rank: usize, why: &str, code: u8) {
        self.restarts_done += 1;
        if self.lose_files_at.contains(&(rank, self.incarnation[rank])) {
            self.lose_files_before_restart[rank] = true;
        }
        if self.corrupt_at.contains(&(rank, self.incarnation[rank])) {
            self.corrupt_before_restart[rank] = true;
        }
        if std::mem::take(&mut self.corrupt_before_restart[rank])
            && let Some(dir) = &self.log_dir
        {
            match inject::corrupt_newest_checkpoint(dir, rank) {
                Ok(p) => notice!(
                    self,
                    "damaged {} before restarting rank {rank}",
                    p.display()
                ),
                Err(e) => notice!(self, "could not damage a checkpoint: {e}"),
            }
        }
        if self
            .corrupt_logs_at
            .contains(&(rank, self.incarnation[rank]))
        {
            self.corrupt_logs_before_restart[rank] = true;
        }
        if std::mem::take(&mut self.corrupt_logs_before_restart[rank]) {
            self.corrupt_sender_logs_for(rank);
        }
        if std::mem::take(&mut self.lose_files_before_restart[rank])
            && let Some(dir) = &self.log_dir
        {
            // As if the rank had run on a machine now gone.
            inject::remove_rank_files(dir, rank, &format!("before restarting rank {rank}"));
        }
        let t0 = Instant::now();
        let inc = self.job.announce_restart(rank);
        self.incarnation[rank] = inc;
        self.finalized[rank] = false;
        match self.job.respawn(rank, inc) {
            Ok(()) => {
                self.alive[rank] = true;
                self.job.wake_all();
                if let Some(after) = self.on_restart[rank].pop_front() {
                    self.armed.push((Instant::now() + after, rank));
                }
                let detected = self.killed_at[rank]
                    .take()
                    .map(|k| {
                        format!(
                            ", detected {:.1} ms after the kill",
                            t0.duration_since(k).as_secs_f64() * 1e3
                        )
                    })
                    .unwrap_or_default();
                notice!(
                    self,
                    "{why}; restarted it as incarnation {inc} on {} (restart {} of at most {}{detected}, spawned in {:.1} ms)",
                    self.job.describe(rank),
                    self.restarts_done,
                    self.max_restarts,
                    t0.elapsed().as_secs_f64() * 1e3
                );
            }
            Err(e) => self.fail(code, format!("{why}; cannot restart it: {e}")),
        }
    }

    /// Damage the newest message every other live rank's sender log keeps
    /// for `rank` (`…:corrupt-sender-log`), each rank stopped meanwhile.
    fn corrupt_sender_logs_for(&mut self, rank: usize) {
        let Some(dir) = self.log_dir.clone() else {
            notice!(self, "no sender logs to damage: they are in memory");
            return;
        };
        for from in (0..self.alive.len()).filter(|&r| r != rank && self.alive[r]) {
            self.job.signal(from, Signal::STOP);
            let damaged = inject::corrupt_newest_record_to(&dir, from, rank);
            self.job.signal(from, Signal::CONT);
            match damaged {
                Ok(Some((file, offset))) => notice!(
                    self,
                    "damaged the newest message rank {from} keeps for rank {rank}: the record at offset {offset} of {}",
                    file.display()
                ),
                Ok(None) => notice!(self, "rank {from} keeps no message for rank {rank}"),
                Err(e) => notice!(self, "could not damage rank {from}'s sender log: {e}"),
            }
        }
    }

    /// End the job with `code` (unless its end is already decided): say
    /// why, SIGTERM to the ranks alive, SIGKILL after [`TERM_GRACE`].
    fn fail(&mut self, code: u8, msg: impl std::fmt::Display) {
        if self.failure.is_none() {
            notice!(self, "{msg}");
            self.failure = Some(code);
            self.signal_all(&self.live(), Signal::TERM);
            self.kill_at = Some(Instant::now() + TERM_GRACE);
        }
    }

    /// The ranks whose current process is alive.
    fn live(&self) -> Vec<usize> {
        (0..self.alive.len()).filter(|&r| self.alive[r]).collect()
    }

    fn signal_all(&self, ranks: &[usize], sig: Signal) {
        for &r in ranks {
            self.job.signal(r, sig);
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match Signal::from_named_raw(sig) {
        Some(Signal::HUP) => "SIGHUP",
        Some(Signal::INT) => "SIGINT",
        Some(Signal::QUIT) => "SIGQUIT",
        Some(Signal::ILL) => "SIGILL",
        Some(Signal::ABORT) => "SIGABRT",
        Some(Signal::BUS) => "SIGBUS",
        Some(Signal::FPE) => "SIGFPE",
        Some(Signal::KILL) => "SIGKILL",
        Some(Signal::SEGV) => "SIGSEGV",
        Some(Signal::PIPE) => "SIGPIPE",
        Some(Signal::TERM) => "SIGTERM",
        _ => "signal",
    }
}
