//! # vpml-launcher — `vpml run`
//!
//! Starts the N rank processes of a job on this host and watches them:
//!
//! 1. creates one shared-memory mailbox (memfd) per rank, which every rank
//!    inherits — nothing is ever created under `/dev/shm`, so nothing can be
//!    left behind, however the job ends;
//! 2. serves the bootstrap key/value exchange ([`vpml_pml::bootstrap`]) on
//!    loopback, guarded by a random job token;
//! 3. spawns the ranks with `PR_SET_PDEATHSIG`, so a killed launcher takes
//!    its ranks along, and optionally binds each to a core;
//! 4. forwards their output line by line (`--tag-output` prefixes the rank);
//! 5. ends the job at the first failure (non-zero exit, signal, or exit
//!    without finalize), on `abort`, on Ctrl-C/SIGTERM (forwarded to the
//!    ranks) or at `--timeout`, and exits with the first failure's status —
//!    except that with a fault-tolerance protocol a rank killed by a signal
//!    is restarted alone as its next incarnation (up to `--max-restarts`),
//!    announced to the others on the job page ([`vpml_pml::recovery`]);
//! 6. injects failures on request (`--inject-failure`), for testing.

mod kv;
mod protocol;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use vpml_pml::bootstrap::env;

/// Exit code when `--timeout` ends the job (as `timeout(1)`).
pub const TIMEOUT_EXIT: u8 = 124;
/// How long ranks get between SIGTERM and SIGKILL when the job is stopped.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// Options of `vpml run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Number of ranks to start.
    #[arg(short = 'n', long = "np", value_name = "N")]
    pub ranks: usize,
    /// Prefix every output line with the rank that printed it.
    #[arg(long)]
    pub tag_output: bool,
    /// Stop the job after this many seconds (exit code 124).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Pin each rank to one core: `core`, `none`, or `auto` (pin when
    /// there are no more ranks than cores).
    #[arg(long, value_name = "POLICY", default_value = "auto")]
    pub bind_to: BindPolicy,
    /// How ranks talk: `shm` (shared memory on one host) or `tcp` (every
    /// pair over TCP, also on one host).
    #[arg(long, value_name = "KIND", env = "VPML_TRANSPORT", default_value = "shm", value_parser = ["shm", "tcp"])]
    pub transport: String,
    /// Testing aid: place the ranks on K pseudo-hosts of this machine
    /// (rank i on host i·K/N), so pairs across them talk over TCP as
    /// between real hosts while pairs within one use shared memory.
    #[arg(long, value_name = "K", hide = true)]
    pub simulate_hosts: Option<usize>,
    /// Fault-tolerance protocol: `none` or `pessimist` (default: the
    /// `VPML_PROTOCOL` environment variable, else none).
    #[arg(
        long,
        value_name = "NAME",
        env = "VPML_PROTOCOL",
        default_value = "none"
    )]
    pub protocol: String,
    /// Number of event loggers to start (pessimist).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub event_loggers: usize,
    /// Use these running event loggers instead of starting some
    /// (comma-separated addresses).
    #[arg(long, value_name = "ADDRS")]
    pub event_logger_addrs: Option<String>,
    /// Loggers that must hold an event before it counts as durable.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub replicas: usize,
    /// Keep sender logs (and started loggers' data) here instead of a
    /// temporary directory removed after the job.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Where senders keep their logs: `memory` (fast; the records a peer
    /// may still need are written out with each checkpoint) or `file`
    /// (memory-mapped files under the log directory, kept with
    /// `--log-dir` for reading after the job).
    #[arg(long, value_name = "KIND", env = "VPML_SENDER_LOG", default_value = "memory", value_parser = ["memory", "file"])]
    pub sender_log: String,
    /// Job token from a file in the event logger's format (`* TOKEN`), for
    /// loggers started separately.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Print each rank's counters (engine and protocol) at the end.
    #[arg(long)]
    pub stats: bool,
    /// With a protocol: how many times crashed ranks may be restarted in
    /// all before the job is given up.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_restarts: u32,
    /// Kill a rank for testing: `RANK@SECONDS` (SIGKILL to RANK that many
    /// seconds after the start; repeatable; `RANK@SECONDS:corrupt-checkpoint`
    /// also damages its newest checkpoint before the restart), or
    /// `random:K` / `random:K@SECONDS`
    /// (K kills of random ranks at random instants within SECONDS,
    /// default 2; the seed is printed).
    #[arg(long, value_name = "SPEC")]
    pub inject_failure: Vec<String>,
    /// Seed for `--inject-failure random:…` (default: random, printed).
    #[arg(long, value_name = "N")]
    pub inject_seed: Option<u64>,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    pub command: Vec<OsString>,
}

/// Core binding policy.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindPolicy {
    /// Bind when ranks ≤ cores.
    Auto,
    /// Bind rank i to core i mod cores.
    Core,
    /// Do not bind.
    None,
}

/// What the launcher's threads report to its main loop.
#[derive(Debug)]
pub(crate) enum Event {
    Exited {
        rank: usize,
        pid: i32,
        status: ExitStatus,
    },
    Finalized {
        rank: usize,
    },
    Abort {
        rank: usize,
        code: i32,
        message: String,
    },
    Signal(i32),
}

/// A planned SIGKILL (`--inject-failure`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Injection {
    rank: usize,
    after: Duration,
    /// Damage the rank's newest checkpoint before restarting it (testing
    /// the fall-back to the older one).
    corrupt_checkpoint: bool,
}

/// Parse the `--inject-failure` specs into kills, ordered by time.
fn plan_injections(args: &RunArgs) -> Result<Vec<Injection>, String> {
    let mut out = Vec::new();
    let mut seed = None;
    for spec in &args.inject_failure {
        let bad = |why: &str| format!("--inject-failure {spec:?}: {why}");
        if let Some(rest) = spec.strip_prefix("random:") {
            let (k, window) = match rest.split_once('@') {
                Some((k, w)) => (
                    k,
                    w.parse::<f64>().map_err(|_| bad("bad number of seconds"))?,
                ),
                None => (rest, 2.0),
            };
            let k: usize = k.parse().map_err(|_| bad("expected random:K"))?;
            if !(window.is_finite() && window > 0.0) {
                return Err(bad("the window must be a positive number of seconds"));
            }
            let s = *seed.get_or_insert(match args.inject_seed {
                Some(s) => s,
                None => u64::from_le_bytes(random_bytes::<8>()?),
            });
            let mut x = s ^ (out.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for _ in 0..k {
                x = splitmix(x);
                let rank = (x % args.ranks as u64) as usize;
                x = splitmix(x);
                let frac = (x >> 11) as f64 / (1u64 << 53) as f64;
                out.push(Injection {
                    rank,
                    after: Duration::from_secs_f64(window * frac),
                    corrupt_checkpoint: false,
                });
            }
        } else {
            let (spec, corrupt_checkpoint) = match spec.strip_suffix(":corrupt-checkpoint") {
                Some(s) => (s, true),
                None => (spec.as_str(), false),
            };
            let (rank, secs) = spec
                .split_once('@')
                .ok_or_else(|| bad("expected RANK@SECONDS or random:K"))?;
            let rank: usize = rank.parse().map_err(|_| bad("bad rank"))?;
            if rank >= args.ranks {
                return Err(bad(&format!("rank {rank} is outside the job")));
            }
            let secs: f64 = secs.parse().map_err(|_| bad("bad number of seconds"))?;
            if !(secs.is_finite() && secs >= 0.0) {
                return Err(bad("the time must be a non-negative number of seconds"));
            }
            out.push(Injection {
                rank,
                after: Duration::from_secs_f64(secs),
                corrupt_checkpoint,
            });
        }
    }
    if let Some(s) = seed {
        eprintln!("vpml run: random failure injection, seed {s} (--inject-seed {s} repeats it)");
    }
    out.sort_by_key(|i| i.after);
    Ok(out)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Run a job; the process exit code is the job's.
pub fn run(args: RunArgs) -> ExitCode {
    match run_job(&args) {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            eprintln!("vpml run: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run_job(args: &RunArgs) -> Result<u8, String> {
    if args.ranks == 0 {
        return Err("-n must be at least 1".into());
    }
    if let Some(t) = args.timeout
        && !(t.is_finite() && t > 0.0)
    {
        return Err(format!(
            "--timeout must be a positive number of seconds, not {t}"
        ));
    }
    let (program, rest) = args.command.split_first().ok_or("no program given")?;
    let program = resolve_program(program)?;
    raise_fd_limit();

    let job_id = hex(&random_bytes::<8>()?);
    let token = protocol::job_token(args, hex(&random_bytes::<16>()?))?;
    let (tx, rx) = unbounded::<Event>();
    let (kv_addr, kv) = kv::start(args.ranks, token.clone(), tx.clone())
        .map_err(|e| format!("cannot start the key/value service on loopback: {e}"))?;
    let mut protocol = protocol::ProtocolSetup::start(args, &job_id, &token)?;
    if args.protocol != "none" || args.stats {
        eprintln!("vpml run: job {job_id}, {}", protocol.info);
    }
    let mailboxes: Vec<OwnedFd> = (0..args.ranks)
        .map(|r| vpml_pml::shm::create_mailbox(&format!("vpml-{job_id}-{r}"), args.ranks))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot create shared memory for {} ranks: {e}", args.ranks))?;
    let fds: Vec<String> = mailboxes
        .iter()
        .map(|f| f.as_raw_fd().to_string())
        .collect();
    let fds = fds.join(",");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bind = match args.bind_to {
        BindPolicy::Auto => args.ranks <= cores,
        BindPolicy::Core => true,
        BindPolicy::None => false,
    };
    let hosts = args.simulate_hosts.unwrap_or(1).clamp(1, args.ranks);
    let host_of: Vec<String> = (0..args.ranks)
        .map(|r| (r * hosts / args.ranks).to_string())
        .collect();
    let host_of = host_of.join(",");
    let signals = watch_signals(tx.clone())?;

    let restartable = args.protocol != "none";
    let job_page = if restartable {
        let (fd, page) = vpml_pml::recovery::JobPage::create(args.ranks)
            .map_err(|e| format!("cannot create the job page: {e}"))?;
        let raw: Vec<i32> = mailboxes.iter().map(|f| f.as_raw_fd()).collect();
        let bells = vpml_pml::shm::Doorbells::map(&raw, args.ranks)
            .map_err(|e| format!("cannot map the mailboxes: {e}"))?;
        Some((fd, page, bells))
    } else {
        None
    };
    let injections = plan_injections(args)?;
    let spawner = Spawner {
        program,
        rest: rest.to_vec(),
        job_id,
        kv_addr,
        token,
        fds,
        stats: args.stats,
        ranks: args.ranks,
        cores,
        bind,
        protocol_envs: protocol.envs.clone(),
        transport: args.transport.clone(),
        host_of,
        job_page_fd: job_page.as_ref().map(|(fd, _, _)| fd.as_raw_fd()),
        tag_output: args.tag_output,
        launcher_pid: std::process::id(),
        tx: tx.clone(),
        outputs: (0..args.ranks).map(|_| SharedOutput::default()).collect(),
    };
    let mut pids = Vec::with_capacity(args.ranks);
    let mut forwarders = Vec::new();
    for rank in 0..args.ranks {
        match spawner.spawn(rank, 0, &mut forwarders) {
            Ok(pid) => pids.push(pid),
            Err(e) => {
                stop_all(&pids, libc::SIGKILL);
                return Err(e);
            }
        }
    }
    let recovery = job_page.as_ref().map(|(_, page, bells)| Restarts {
        spawner: &spawner,
        page,
        bells,
        max: args.max_restarts,
        done: 0,
        log_dir: protocol
            .envs
            .iter()
            .find(|(k, _)| k == "VPML_LOG_DIR")
            .map(|(_, v)| PathBuf::from(v)),
    });
    let code = supervise(args, pids, &rx, recovery, &injections, &mut forwarders);
    for o in &spawner.outputs {
        if let Some(h) = lock(o).previous.take() {
            forwarders.push(h);
        }
    }
    drop(spawner);
    drop(tx);
    drop(job_page);
    drop(mailboxes);
    for f in forwarders {
        let _ = f.join();
    }
    signals.close();
    protocol.stop();
    if args.stats {
        print_stats(&kv, args.ranks);
    }
    Ok(code)
}

/// Everything needed to start (or restart) a rank process.
struct Spawner {
    program: PathBuf,
    rest: Vec<OsString>,
    job_id: String,
    kv_addr: String,
    token: String,
    fds: String,
    stats: bool,
    ranks: usize,
    cores: usize,
    bind: bool,
    protocol_envs: Vec<(String, String)>,
    transport: String,
    host_of: String,
    job_page_fd: Option<i32>,
    tag_output: bool,
    launcher_pid: u32,
    tx: Sender<Event>,
    /// Each rank's stdout over its incarnations.
    outputs: Vec<SharedOutput>,
}

impl Spawner {
    /// Start incarnation `incarnation` of `rank`; returns its pid.
    fn spawn(
        &self,
        rank: usize,
        incarnation: u32,
        forwarders: &mut Vec<std::thread::JoinHandle<()>>,
    ) -> Result<i32, String> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.rest)
            .env(env::JOB_ID, &self.job_id)
            .env(env::RANK, rank.to_string())
            .env(env::SIZE, self.ranks.to_string())
            .env(env::KV_ADDR, &self.kv_addr)
            .env(env::TOKEN, &self.token)
            .env(env::MAILBOX_FDS, &self.fds)
            .env(env::STATS, if self.stats { "1" } else { "" })
            .env(env::LOCAL_SIZE, self.ranks.to_string())
            .env(env::HOST_CORES, self.cores.to_string())
            .envs(self.protocol_envs.iter().map(|(k, v)| (k, v)))
            .env(env::TRANSPORT, &self.transport)
            .env(env::HOST_OF, &self.host_of)
            .env(env::INCARNATION, incarnation.to_string())
            .env(
                env::SPAWNED_AT_NS,
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos())
                    .to_string(),
            )
            .stdin(if rank == 0 && incarnation == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(fd) = self.job_page_fd {
            cmd.env(env::JOB_PAGE_FD, fd.to_string())
                .env(env::OUTPUT_MARKS, "1");
        }
        let core = self.bind.then_some(rank % self.cores);
        let launcher_pid = self.launcher_pid;
        // SAFETY: the closure runs in the child between fork and exec and
        // only makes async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(move || child_setup(launcher_pid, core));
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start rank {rank} ({}): {e}", self.program.display()))?;
        let pid = child.id() as i32;
        let prefix = self.tag_output.then(|| format!("[{rank}] "));
        if let Some(out) = child.stdout.take() {
            let shared = self.outputs[rank].clone();
            let previous = lock(&shared).previous.take();
            let h = forward(out, prefix.clone(), Some((shared.clone(), previous)));
            lock(&shared).previous = Some(h);
        }
        if let Some(err) = child.stderr.take() {
            forwarders.push(forward(err, prefix, None));
        }
        watch_exit(rank, child, self.tx.clone());
        Ok(pid)
    }
}

/// Restarting crashed ranks (with a fault-tolerance protocol).
struct Restarts<'a> {
    spawner: &'a Spawner,
    page: &'a vpml_pml::recovery::JobPage,
    bells: &'a vpml_pml::shm::Doorbells,
    max: u32,
    done: u32,
    /// Root of the ranks' log directories (`rank-<r>/checkpoints`).
    log_dir: Option<PathBuf>,
}

/// Flip one byte of the newest checkpoint of a rank (testing aid).
fn corrupt_newest_checkpoint(log_dir: &Path, rank: usize) -> Result<PathBuf, String> {
    let dir = log_dir.join(format!("rank-{rank}")).join("checkpoints");
    let newest = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "vck"))
        .max()
        .ok_or_else(|| format!("{} holds no checkpoint", dir.display()))?;
    let mut bytes = std::fs::read(&newest).map_err(|e| format!("{}: {e}", newest.display()))?;
    if let Some(b) = bytes.last_mut() {
        *b ^= 0xff;
    }
    std::fs::write(&newest, &bytes).map_err(|e| format!("{}: {e}", newest.display()))?;
    Ok(newest)
}

/// The main loop: returns the job's exit code once every rank has exited.
fn supervise(
    args: &RunArgs,
    mut pids: Vec<i32>,
    rx: &Receiver<Event>,
    mut restarts: Option<Restarts<'_>>,
    injections: &[Injection],
    forwarders: &mut Vec<std::thread::JoinHandle<()>>,
) -> u8 {
    let n = pids.len();
    let start = Instant::now();
    let mut finalized = vec![false; n];
    let mut all_finalized = false;
    let mut alive = vec![true; n];
    let mut next_injection = 0;
    let mut killed_at: Vec<Option<Instant>> = vec![None; n];
    let mut corrupt_before_restart = vec![false; n];
    let mut failure: Option<u8> = None;
    let mut kill_at: Option<Instant> = None;
    let mut deadline = args
        .timeout
        .map(|t| Instant::now() + Duration::from_secs_f64(t));
    let live = |alive: &[bool], pids: &[i32]| -> Vec<i32> {
        pids.iter()
            .zip(alive)
            .filter(|(_, a)| **a)
            .map(|(p, _)| *p)
            .collect()
    };
    let fail = |failure: &mut Option<u8>,
                kill_at: &mut Option<Instant>,
                code: u8,
                msg: String,
                targets: Vec<i32>| {
        if failure.is_none() {
            eprintln!("vpml run: {msg}");
            *failure = Some(code);
            stop_all(&targets, libc::SIGTERM);
            *kill_at = Some(Instant::now() + TERM_GRACE);
        }
    };
    while alive.iter().any(|&a| a) {
        let injection_at = injections.get(next_injection).map(|i| start + i.after);
        let wake = [
            deadline,
            kill_at,
            injection_at.filter(|_| failure.is_none()),
        ]
        .into_iter()
        .flatten()
        .min();
        let ev = match wake {
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
        let now = Instant::now();
        match ev {
            None => {
                while let Some(inj) = injections.get(next_injection)
                    && start + inj.after <= now
                {
                    next_injection += 1;
                    if failure.is_none() && !all_finalized && alive[inj.rank] {
                        eprintln!(
                            "vpml run: injecting a failure: SIGKILL to rank {} (pid {}) at {:.3} s",
                            inj.rank,
                            pids[inj.rank],
                            now.duration_since(start).as_secs_f64()
                        );
                        killed_at[inj.rank] = Some(now);
                        corrupt_before_restart[inj.rank] |= inj.corrupt_checkpoint;
                        stop_all(&[pids[inj.rank]], libc::SIGKILL);
                    }
                }
                if kill_at.is_some_and(|t| now >= t) {
                    stop_all(&live(&alive, &pids), libc::SIGKILL);
                    kill_at = None;
                }
                if deadline.is_some_and(|t| now >= t) && failure.is_none() {
                    let targets = live(&alive, &pids);
                    eprintln!(
                        "vpml run: job timed out after {} s; stopping {} rank(s)",
                        args.timeout.unwrap_or_default(),
                        targets.len()
                    );
                    failure = Some(TIMEOUT_EXIT);
                    stop_all(&targets, libc::SIGKILL);
                }
                if deadline.is_some_and(|t| now >= t) {
                    deadline = None;
                }
            }
            Some(Event::Finalized { rank }) => {
                finalized[rank] = true;
                if !all_finalized && finalized.iter().all(|&f| f) {
                    all_finalized = true;
                    if let Some(r) = &restarts {
                        // Ranks wait for this before exiting: until now a
                        // crashed rank could still need their logs.
                        r.page.set_all_finalized();
                        r.bells.ring_all();
                    }
                }
            }
            Some(Event::Exited { rank, pid, status }) => {
                reap(pid);
                if pids[rank] != pid {
                    continue;
                }
                alive[rank] = false;
                if let Some(sig) = status.signal() {
                    if all_finalized && finalized[rank] && restarts.is_some() {
                        // Its work is done and nobody can need it any more.
                        continue;
                    }
                    let why = format!(
                        "rank {rank} was killed by signal {sig} ({})",
                        signal_name(sig)
                    );
                    if failure.is_none()
                        && let Some(r) = restarts.as_mut()
                    {
                        if r.done < r.max {
                            r.done += 1;
                            if std::mem::take(&mut corrupt_before_restart[rank])
                                && let Some(dir) = &r.log_dir
                            {
                                match corrupt_newest_checkpoint(dir, rank) {
                                    Ok(p) => eprintln!(
                                        "vpml run: damaged {} before restarting rank {rank}",
                                        p.display()
                                    ),
                                    Err(e) => {
                                        eprintln!("vpml run: could not damage a checkpoint: {e}")
                                    }
                                }
                            }
                            let t0 = Instant::now();
                            let inc = r.page.restart(rank);
                            finalized[rank] = false;
                            match r.spawner.spawn(rank, inc, forwarders) {
                                Ok(new_pid) => {
                                    pids[rank] = new_pid;
                                    alive[rank] = true;
                                    r.bells.ring_all();
                                    let detected = killed_at[rank]
                                        .take()
                                        .map(|k| {
                                            format!(
                                                ", detected {:.1} ms after the kill",
                                                t0.duration_since(k).as_secs_f64() * 1e3
                                            )
                                        })
                                        .unwrap_or_default();
                                    eprintln!(
                                        "vpml run: {why}; restarted it as incarnation {inc} (restart {} of at most {}{detected}, spawned in {:.1} ms)",
                                        r.done,
                                        r.max,
                                        t0.elapsed().as_secs_f64() * 1e3
                                    );
                                    continue;
                                }
                                Err(e) => {
                                    let targets = live(&alive, &pids);
                                    fail(
                                        &mut failure,
                                        &mut kill_at,
                                        128 + sig as u8,
                                        format!("{why}; {e}"),
                                        targets,
                                    );
                                    continue;
                                }
                            }
                        }
                        let targets = live(&alive, &pids);
                        fail(
                            &mut failure,
                            &mut kill_at,
                            128 + sig as u8,
                            format!("{why}; no restarts left (--max-restarts {})", r.max),
                            targets,
                        );
                        continue;
                    }
                    let targets = live(&alive, &pids);
                    fail(&mut failure, &mut kill_at, 128 + sig as u8, why, targets);
                } else if let Some(code) = status.code().filter(|c| *c != 0) {
                    let targets = live(&alive, &pids);
                    fail(
                        &mut failure,
                        &mut kill_at,
                        code as u8,
                        format!("rank {rank} exited with status {code}"),
                        targets,
                    );
                } else if !finalized[rank] {
                    let targets = live(&alive, &pids);
                    fail(
                        &mut failure,
                        &mut kill_at,
                        1,
                        format!(
                            "rank {rank} exited without finalizing (status 0, but vpml was not finalized)"
                        ),
                        targets,
                    );
                }
            }
            Some(Event::Abort {
                rank,
                code,
                message,
            }) => {
                let code = u8::try_from(code).ok().filter(|&c| c != 0).unwrap_or(1);
                let targets = live(&alive, &pids);
                fail(
                    &mut failure,
                    &mut kill_at,
                    code,
                    format!("rank {rank} aborted the job (code {code}): {message}"),
                    targets,
                );
            }
            Some(Event::Signal(sig)) => {
                let targets = live(&alive, &pids);
                if failure.is_none() {
                    eprintln!(
                        "vpml run: received {}; forwarding it to {} rank(s)",
                        signal_name(sig),
                        targets.len()
                    );
                    failure = Some(128 + sig as u8);
                    stop_all(&targets, sig);
                    kill_at = Some(now + TERM_GRACE);
                } else {
                    stop_all(&targets, libc::SIGKILL);
                }
            }
        }
    }
    failure.unwrap_or(0)
}

/// Print the counters each rank published at finalize (`stats.<rank>`,
/// `name=value` pairs separated by spaces).
fn print_stats(kv: &kv::KvHandle, ranks: usize) {
    for r in 0..ranks {
        match kv.get(&format!("stats.{r}")) {
            Some(line) => eprintln!("vpml stats: rank {r}: {}", line.replace(',', " ")),
            None => eprintln!("vpml stats: rank {r}: no counters (it did not finalize)"),
        }
    }
}

fn stop_all(pids: &[i32], sig: i32) {
    for &pid in pids {
        // SAFETY: plain syscall; the pid belongs to a child we have not reaped.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

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
fn watch_exit(rank: usize, child: Child, tx: Sender<Event>) {
    std::thread::spawn(move || {
        let pid = child.id();
        // SAFETY: zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let status = loop {
            // SAFETY: waitid on our own child with a valid out-pointer;
            // WNOWAIT leaves it waitable (a zombie) for `reap`.
            let rc =
                unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if rc == 0 {
                // SAFETY: waitid succeeded, so the SIGCHLD fields are set.
                let st = unsafe { info.si_status() };
                break if info.si_code == libc::CLD_EXITED {
                    ExitStatus::from_raw((st & 0xff) << 8)
                } else {
                    ExitStatus::from_raw(st & 0x7f)
                };
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break ExitStatus::from_raw(1 << 8);
            }
        };
        drop(child);
        let _ = tx.send(Event::Exited {
            rank,
            pid: pid as i32,
            status,
        });
    });
}

/// Collect an exited child reported by [`watch_exit`].
fn reap(pid: i32) {
    let mut st = 0;
    // SAFETY: the child has exited (waitid said so) and nobody else waits for it.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

use vpml_pml::bootstrap::{CHECKPOINT_MARK, RESTART_MARK};

/// What a rank printed on stdout over all its incarnations.
#[derive(Default)]
struct RankOutput {
    /// Bytes of the rank's own output forwarded so far.
    total: u64,
    /// `total` when each checkpoint was taken.
    at_checkpoint: std::collections::HashMap<u64, u64>,
    /// The forwarder of the previous process's stdout (finished first).
    previous: Option<std::thread::JoinHandle<()>>,
}

type SharedOutput = std::sync::Arc<std::sync::Mutex<RankOutput>>;

fn lock(o: &SharedOutput) -> std::sync::MutexGuard<'_, RankOutput> {
    o.lock().unwrap_or_else(|p| p.into_inner())
}

/// Forward one output stream line by line. For stdout (`output` given),
/// the marks of [`vpml_pml::bootstrap::CHECKPOINT_MARK`] are interpreted: a restarted process's output is
/// dropped until it has re-printed what was printed after the checkpoint
/// it restarted from.
fn forward(
    stream: impl Read + Send + 'static,
    prefix: Option<String>,
    output: Option<(SharedOutput, Option<std::thread::JoinHandle<()>>)>,
) -> std::thread::JoinHandle<()> {
    let is_err = output.is_none();
    std::thread::spawn(move || {
        let output = output.map(|(o, previous)| {
            // The previous process's output comes first, whole.
            if let Some(h) = previous {
                let _ = h.join();
            }
            o
        });
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        let mut skip = 0u64;
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some(o) = &output {
                let text = String::from_utf8_lossy(&line);
                let mark = |m: &str| {
                    text.strip_prefix(m)
                        .and_then(|r| r.trim_end().strip_suffix(']'))
                        .and_then(|n| n.parse::<u64>().ok())
                };
                let mut st = lock(o);
                if let Some(i) = mark(CHECKPOINT_MARK) {
                    let total = st.total;
                    st.at_checkpoint.insert(i, total);
                    continue;
                }
                if let Some(i) = mark(RESTART_MARK) {
                    let from = if i == 0 {
                        0
                    } else {
                        st.at_checkpoint.get(&i).copied().unwrap_or(st.total)
                    };
                    skip = st.total.saturating_sub(from);
                    st.total = from;
                    continue;
                }
                let n = line.len() as u64;
                st.total += n;
                if skip >= n {
                    skip -= n;
                    continue;
                }
                skip = 0;
            }
            let mut out: Box<dyn Write> = if is_err {
                Box::new(std::io::stderr().lock())
            } else {
                Box::new(std::io::stdout().lock())
            };
            if let Some(p) = &prefix {
                let _ = out.write_all(p.as_bytes());
            }
            let _ = out.write_all(&line);
            if !line.ends_with(b"\n") {
                let _ = out.write_all(b"\n");
            }
            let _ = out.flush();
        }
    })
}

fn watch_signals(tx: Sender<Event>) -> Result<signal_hook::iterator::Handle, String> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let handle = signals.handle();
    std::thread::spawn(move || {
        for sig in signals.forever() {
            if tx.send(Event::Signal(sig)).is_err() {
                return;
            }
        }
    });
    Ok(handle)
}

/// Find the program like a shell would, with a clear error if it is missing.
fn resolve_program(program: &OsString) -> Result<PathBuf, String> {
    let p = Path::new(program);
    let is_exec = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if p.components().count() > 1 || p.is_absolute() {
        if is_exec(p) {
            return Ok(p.to_path_buf());
        }
        if p.exists() {
            return Err(format!("{} is not an executable file", p.display()));
        }
        return Err(format!("program not found: {}", p.display()));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(p);
        if is_exec(&cand) {
            return Ok(cand);
        }
    }
    Err(format!("program not found: {} (not in PATH)", p.display()))
}

fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer; raising the soft limit to the hard one is always allowed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| format!("no randomness for the job token: {e}"))?;
    Ok(b)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}
