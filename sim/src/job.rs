//! One simulated job: its ranks' threads, their crashes and restarts.
//!
//! `vpml run`'s supervision is the launcher's own [`Supervisor`] (see
//! [`crate::supervision`]): each rank's start-up, finalize, crash and exit
//! reach it, and it decides whether a crashed rank gets a new incarnation
//! (bumped on the job page, announced to the survivors) or the job ends.
//! The loggers keep what they had of a crashed rank's events, and its next
//! process starts from its files. The job is finalized once every rank's
//! current process has finalized.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::rc::Rc;
use std::sync::{Arc, Mutex, Once};

use vpml_launcher::{Policy, Supervisor};
use vpml_pml::recovery::JobPage;
use vpml_pml::sim::{SimHooks, SimNet};
use vpml_vprotocol::pessimist::{Config, Pessimist};

use crate::check::Checker;
use crate::loggers::{SimClient, SimLoggers};
use crate::program::{self, Plan, RankEnv};
use crate::sched::{Crash, Sched, Stop};
use crate::supervision::SimJob;
use crate::{Options, Outcome, Protocol};

/// The wait status of a process killed by SIGKILL.
const KILLED: i32 = rustix::process::Signal::KILL.as_raw();

/// Odds of a crash at each chance (fault point or hand-over): one in this.
const CRASH_ONE_IN: u32 = 150;

/// Everything the ranks of one job share.
struct Job {
    opts: Options,
    plan: Plan,
    net: SimNet,
    loggers: Arc<SimLoggers>,
    sched: Arc<Sched>,
    checker: Arc<Checker>,
    /// The job page (restartable jobs: under a protocol).
    page: Option<(OwnedFd, Arc<JobPage>)>,
    /// `vpml run`'s supervisor, acting on the rank threads.
    supervisor: Mutex<Supervisor<SimJob>>,
    /// Each rank's answer, once a process of it has computed it (before
    /// finalize).
    answers: Mutex<Vec<Option<u64>>>,
    /// Which ranks' current processes have finalized.
    finalized: Mutex<Vec<bool>>,
    /// Ranks whose first process joined (the start-up fences).
    joined: Mutex<usize>,
    /// The ranks' sender logs live in memory (spilled at checkpoints)
    /// rather than in files.
    log_in_memory: bool,
    /// Checkpoints are copied to the loggers, and a crash may take the
    /// rank's files with it (its host was lost): its next process starts
    /// from the copy.
    copies: bool,
    /// The ranks' sender logs hold at most two one-page segments in
    /// memory: nearly every record moves to disk (`rank-R/spilled/`) and
    /// is re-sent from there.
    bounded: bool,
    dir: PathBuf,
}

/// The engine's hooks for one simulated rank.
struct RankHooks {
    me: usize,
    job: Arc<Job>,
}

impl SimHooks for RankHooks {
    fn idle(&self) {
        self.job.sched.yield_now(self.me);
    }

    fn frame_written(&self, from: usize, to: usize, message: Option<(u32, u64)>) {
        // The programs send on the world's context (0) only: the checker
        // follows those messages (they are numbered per context).
        if let Some((0, seq)) = message {
            self.job.checker.message_leaves(from, to, seq);
        }
        // Let the receiver (or a third rank) run before the sender goes
        // on, now and then: other orders of arrival.
        self.job.sched.maybe_yield(self.me, 4);
    }

    fn finalized(&self, rank: usize) {
        let mut done = self.job.finalized.lock().unwrap_or_else(|p| p.into_inner());
        done[rank] = true;
        if done.iter().all(|&d| d) {
            self.job.sched.end_crashes();
        }
        // Once every rank finalized, it tells the ranks on the page.
        self.job.supervise().on_finalized(rank);
    }
}

impl RankEnv for RankHooks {
    fn send_begins(&self, to: usize, seq: u64, digest: u64) {
        self.job.checker.send_begins(self.me, to, seq, digest);
    }
    fn send_ends(&self) {
        self.job.checker.send_ends(self.me);
    }
    fn received(&self, from: usize, seq: u64, digest: u64) {
        self.job.checker.received(from, self.me, seq, digest);
    }
    fn pause(&self) {
        self.job.sched.yield_now(self.me);
    }
}

/// Stop and crash panics are how the scheduler unwinds rank threads: keep
/// them out of the output.
fn quiet_unwinds() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            if p.downcast_ref::<Stop>().is_none() && p.downcast_ref::<Crash>().is_none() {
                previous(info);
            }
        }));
    });
}

/// Mixed into a seed for the draw of bounded sender logs.
const BOUNDED_DRAW: u64 = 0x5e11_b0da_11ed;

/// Run the job of `seed`.
pub fn run(seed: u64, opts: &Options) -> Outcome {
    quiet_unwinds();
    let mut rng = fastrand::Rng::with_seed(seed);
    let plan = Plan::draw(&mut rng, opts.ranks, opts.rounds);
    let net = SimNet::new(opts.ranks, rng.usize(4..=16));
    let log_in_memory = rng.bool();
    let copies = rng.bool();
    // Drawn apart, so that the draws above (and a seed's plan) stay what
    // they were before logs were bounded.
    let bounded = fastrand::Rng::with_seed(seed ^ BOUNDED_DRAW).bool();
    let loggers = Arc::new(SimLoggers::new(opts.ranks));
    let sched = Arc::new(Sched::new(
        opts.ranks,
        rng.fork(),
        opts.max_steps,
        Arc::clone(&loggers),
    ));
    let failed = |why: String| Outcome {
        outputs: vec![None; opts.ranks],
        steps: 0,
        failure: Some(why),
        crashes: Vec::new(),
        files_lost: Vec::new(),
        bounded,
        disk_segments: 0,
    };
    let restartable = opts.protocol != Protocol::None;
    let page = if restartable {
        match JobPage::create(opts.ranks) {
            Ok((fd, page)) => Some((fd, Arc::new(page))),
            Err(e) => return failed(format!("cannot create the job page: {e}")),
        }
    } else {
        None
    };
    let supervisor = Supervisor::new(
        Policy {
            ranks: opts.ranks,
            restartable,
            rollback: false,
            checkpoint_interval: None,
            max_restarts: opts.max_restarts,
            timeout: None,
            log_dir: None,
            copy_stores: None,
        },
        SimJob::new(opts.ranks, page.as_ref().map(|(_, p)| Arc::clone(p))),
    );
    if restartable {
        sched.plan_crashes(opts.max_crashes, CRASH_ONE_IN);
    }
    // Memory-backed when the machine has it: checkpoints are fsynced.
    let shm = std::path::Path::new("/dev/shm");
    let made = if shm.is_dir() {
        tempfile::Builder::new().prefix("vpml-sim-").tempdir_in(shm)
    } else {
        tempfile::Builder::new().prefix("vpml-sim-").tempdir()
    };
    let dir = match made {
        Ok(d) => d,
        Err(e) => return failed(format!("cannot create a temporary directory: {e}")),
    };
    let job = Arc::new(Job {
        opts: opts.clone(),
        plan,
        net,
        checker: Arc::new(Checker::new(Arc::clone(&loggers), Arc::clone(&sched))),
        loggers,
        sched,
        page,
        supervisor: Mutex::new(supervisor),
        answers: Mutex::new(vec![None; opts.ranks]),
        finalized: Mutex::new(vec![false; opts.ranks]),
        joined: Mutex::new(0),
        log_in_memory,
        copies,
        bounded,
        dir: dir.path().to_path_buf(),
    });
    let outputs = std::thread::scope(|s| {
        let threads: Vec<_> = (0..opts.ranks)
            .map(|me| {
                let job = Arc::clone(&job);
                s.spawn(move || job.rank_thread(me))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().ok().flatten())
            .collect()
    });
    // The supervisor heard every rank exit: the job's status is its word.
    let supervised = {
        let sup = job.supervise();
        sup.failure().map(|code| {
            format!(
                "vpml run would end the job with status {code}: {}",
                sup.job().last_notice()
            )
        })
    };
    Outcome {
        outputs,
        steps: job.sched.steps(),
        failure: job.sched.stopped().or(supervised),
        crashes: job.sched.crashes(),
        files_lost: job.sched.files_lost(),
        bounded,
        disk_segments: (0..opts.ranks)
            .map(|r| count_segments(&rank_dir(&job.dir, r).join("spilled")))
            .sum(),
    }
}

/// The segment files in `dir` (none if it does not exist).
fn count_segments(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("seg-"))
            .count()
    })
}

impl Job {
    /// The supervisor (never poisoned for good: a rank thread that
    /// unwinds holds it only inside the supervisor's own calls).
    fn supervise(&self) -> std::sync::MutexGuard<'_, Supervisor<SimJob>> {
        self.supervisor.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The incarnation of `me`'s current process.
    fn incarnation(&self, me: usize) -> u32 {
        self.page.as_ref().map_or(0, |(_, p)| p.incarnation(me))
    }

    /// The thread of rank `me`: its processes, one after the other.
    fn rank_thread(self: Arc<Self>, me: usize) -> Option<u64> {
        let sched = Arc::clone(&self.sched);
        vpml_fault_points::set_thread_hook(Some(Box::new(move |point| {
            sched.maybe_crash(me, point)
        })));
        let out = std::panic::catch_unwind(AssertUnwindSafe(|| self.sched.wait_turn(me)))
            .ok()
            .and_then(|()| self.processes(me));
        vpml_fault_points::set_thread_hook(None);
        self.sched.finish(me);
        out
    }

    /// Start rank `me`'s processes until one finishes (or the run stops).
    fn processes(self: &Arc<Self>, me: usize) -> Option<u64> {
        loop {
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| self.process(me)));
            match result {
                Ok(Ok(out)) => {
                    // The process exits with status 0 (after finalize).
                    let inc = self.incarnation(me);
                    self.supervise()
                        .on_exited(me, None, inc, ExitStatus::from_raw(0));
                    return Some(out);
                }
                Ok(Err(e)) => {
                    self.sched.stop(format!("rank {me}: {e}"));
                    return None;
                }
                Err(p) if p.downcast_ref::<Crash>().is_some() => {
                    // Restart it, as `vpml run` would.
                    self.checker.send_ends(me);
                    self.sched.crash_loggers(me);
                    if self.copies && self.sched.one_in(3) {
                        // Its host was lost, and its files with it.
                        self.sched.lost_files(me);
                        let dir = rank_dir(&self.dir, me);
                        match std::fs::remove_dir_all(&dir) {
                            Ok(()) => {}
                            // It crashed before it made any file.
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                            Err(e) => {
                                self.sched.stop(format!(
                                    "cannot remove {} to lose rank {me}'s files: {e}",
                                    dir.display()
                                ));
                                return None;
                            }
                        }
                    }
                    self.finalized.lock().unwrap_or_else(|p| p.into_inner())[me] = false;
                    // Dead for a while before `vpml run` notices and
                    // announces it: the others run meanwhile, read what it
                    // sent last, wait for it.
                    let dead = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        for _ in 0..self.sched.below(8) {
                            self.sched.pass(me);
                        }
                    }));
                    if dead.is_err() {
                        // The run stopped meanwhile.
                        return None;
                    }
                    // `vpml run` hears of the death (SIGKILL) and decides.
                    let inc = self.incarnation(me);
                    let mut sup = self.supervise();
                    sup.on_exited(me, None, inc, ExitStatus::from_raw(KILLED));
                    if sup.job_mut().take_respawned(me).is_some() {
                        continue;
                    }
                    if sup.failure().is_none() {
                        // Not restarted, and the job goes on: it died
                        // inside finalize once every rank had finalized
                        // (nobody can need it any more), with its answer.
                        drop(sup);
                        return self.answers.lock().unwrap_or_else(|p| p.into_inner())[me];
                    }
                    let why = sup.job().last_notice();
                    drop(sup);
                    self.sched
                        .stop(format!("vpml run would end the job: {why}"));
                    return None;
                }
                Err(p) if p.downcast_ref::<Stop>().is_some() => return None,
                Err(p) => {
                    let what = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    self.sched.stop(format!("rank {me} panicked: {what}"));
                    return None;
                }
            }
        }
    }

    /// One process of rank `me`: join, run the program, finalize.
    fn process(self: &Arc<Self>, me: usize) -> Result<u64, String> {
        let hooks = Rc::new(RankHooks {
            me,
            job: Arc::clone(self),
        });
        let incarnation = self.incarnation(me);
        let protocol: Option<Box<dyn vpml_pml::protocol::Protocol>> = match self.opts.protocol {
            Protocol::None => None,
            Protocol::Pessimist => Some(Box::new(self.pessimist(me, incarnation)?)),
        };
        let shared: Rc<dyn SimHooks> = Rc::clone(&hooks) as Rc<dyn SimHooks>;
        let page = self.page.as_ref().map(|(fd, _)| fd.as_fd());
        let chaos = self.sched.below(usize::MAX) as u64;
        let world = vpml_pml::sim::join(me, &self.net, shared, page, protocol, chaos)
            .map_err(|e| format!("joining (incarnation {incarnation}): {e}"))?;
        if incarnation == 0 {
            self.fences(me);
        }
        let out = program::run(&world, hooks.as_ref(), &self.plan)?;
        self.answers.lock().unwrap_or_else(|p| p.into_inner())[me] = Some(out);
        world.finalize().map_err(|e| format!("finalize: {e}"))?;
        Ok(out)
    }

    /// The start-up fences: a first process goes on once every rank has
    /// joined; from then on, ranks may crash.
    fn fences(&self, me: usize) {
        let count = || *self.joined.lock().unwrap_or_else(|p| p.into_inner());
        *self.joined.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.supervise().on_joined(me);
        if count() == self.opts.ranks {
            self.sched.start_crashes();
        }
        while count() < self.opts.ranks {
            self.sched.yield_now(me);
        }
    }

    fn pessimist(&self, me: usize, incarnation: u32) -> Result<Pessimist, String> {
        let cfg = Config {
            job: "sim".into(),
            rank: me,
            incarnation,
            token: String::new(),
            loggers: Vec::new(),
            replicas: 1,
            log_dir: rank_dir(&self.dir, me),
            segment_size: if self.bounded { 4096 } else { 1 << 20 },
            memory_limit: self.bounded.then_some(2 * 4096),
            spill_dir: rank_dir(&self.dir, me).join("spilled"),
            log_in_memory: self.log_in_memory,
            keep_logs: false,
            send_eagerly: false,
            loggers_restarted: false,
            copies: self.copies,
            notices: false,
        };
        let client = SimClient {
            rank: me,
            loggers: Arc::clone(&self.loggers),
            sched: Arc::clone(&self.sched),
            checker: Arc::clone(&self.checker),
            acknowledge: self.opts.acknowledge,
        };
        Pessimist::start_with(cfg, Box::new(client))
            .map_err(|e| format!("starting the protocol (incarnation {incarnation}): {e}"))
    }
}

fn rank_dir(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank-{rank}"))
}
