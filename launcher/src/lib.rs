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

pub mod agent;
mod inject;
mod kv;
pub mod mpicc;
mod protocol;
pub mod record;
pub mod trace;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use vpml_pml::bootstrap::env;

use crate::inject::{Injection, Target};

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
    /// Where senders keep their logs: `file` (memory-mapped files under
    /// the log directory, which survive the process: a checkpoint adds
    /// nothing, freed segments are reused; kept with `--log-dir` for
    /// reading after the job) or `memory` (anonymous memory; each
    /// checkpoint writes the records peers may still need to a file).
    #[arg(long, value_name = "KIND", env = "VPML_SENDER_LOG", default_value = "file", value_parser = ["memory", "file"])]
    pub sender_log: String,
    /// Job token from a file in the event logger's format (`* TOKEN`), for
    /// loggers started separately.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Print each rank's counters (engine and protocol) at the end.
    #[arg(long)]
    pub stats: bool,
    /// Record the job for `vpml replay` (implies the pessimist protocol):
    /// keep sender logs, events and checkpoints in DIR (`--record=DIR`;
    /// plain `--record`: a new directory under
    /// ~/.local/share/vpml/recordings, linked as `latest`).
    #[arg(long, value_name = "DIR", num_args = 0..=1, require_equals = true, default_missing_value = "@default")]
    pub record: Option<PathBuf>,
    /// With a protocol: how many times crashed ranks (and event loggers
    /// this launcher started) may be restarted in all before the job is
    /// given up.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_restarts: u32,
    /// Kill a rank for testing: `RANK@SECONDS` (SIGKILL to RANK that many
    /// seconds after the start; repeatable; `RANK@SECONDS:corrupt-checkpoint`
    /// also damages its newest checkpoint before the restart;
    /// `RANK@restart+SECONDS` kills it that long after its next restart,
    /// i.e. while it recovers; `agent:HOST@SECONDS` kills the agent of
    /// host number HOST; `…@SECONDS:lose-files` also removes the files of
    /// the rank (or of the host's ranks) as the loss of the machine would;
    /// `logger:I@SECONDS`
    /// kills event logger I), or
    /// `random:K` / `random:K@SECONDS`
    /// (K kills of random ranks at random instants within SECONDS,
    /// default 2; the seed is printed). At a protocol step instead of an
    /// instant (debug builds): `RANK@point:NAME[#N]` — the rank's process
    /// dies the N-th time it reaches fault point NAME;
    /// `RANK@restart+point:NAME[#N]` arms it in the rank's next restarted
    /// process; `logger:I@point:NAME[#N]` in event logger I. A wrong name
    /// lists the known points.
    #[arg(long, value_name = "SPEC")]
    pub inject_failure: Vec<String>,
    /// Run on several hosts: `h1:2,h2:2` (name:slots). Each host's agent
    /// starts by `--via` (default: fork for `localhost`, ssh otherwise).
    #[arg(long, value_name = "LIST")]
    pub hosts: Option<String>,
    /// Hosts from a file: lines `host slots=N [via=fork|netns|ssh]`.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// How host agents start: `fork` (this machine), `netns` (inside the
    /// network namespace named like the host), `ssh`.
    #[arg(long, value_name = "METHOD")]
    pub via: Option<String>,
    /// Hosts with agents but no ranks, where ranks of a lost host are
    /// restarted (with a protocol): `h3,h4`.
    #[arg(long, value_name = "LIST")]
    pub spare_hosts: Option<String>,
    /// Address the launcher listens on (key/value service, agents, event
    /// loggers): the interface that reaches the other hosts.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: String,
    /// How long agents get to connect before a host counts as unreachable.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub agent_timeout: f64,
    /// Run an MPI C program (built against MPICH) on vpml's MPICH-ABI
    /// library; detected automatically for programs that link
    /// `libmpich.so.12`.
    #[arg(long)]
    pub mpi_abi: bool,
    /// Perturb message delivery timing (deterministically from SEED), to
    /// expose races: each rank skips reading from a random subset of its
    /// peers on each progress pass.
    #[arg(long, value_name = "SEED")]
    pub chaos: Option<u64>,
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
        /// Set for a child of this launcher (to reap it).
        pid: Option<i32>,
        incarnation: u32,
        status: ExitStatus,
    },
    Finalized {
        rank: usize,
    },
    /// The rank's first process is past start-up (see `KvClient::joined`).
    Joined {
        rank: usize,
    },
    Abort {
        rank: usize,
        code: i32,
        message: String,
    },
    Signal(i32),
    /// Event logger `index` (its process `pid`) exited.
    LoggerExited {
        index: usize,
        pid: u32,
        status: ExitStatus,
    },
    /// A host's agent is gone (its ranks with it).
    AgentLost {
        host: usize,
        name: String,
        why: String,
    },
}

/// Signals a user stops a job with: a rank they kill is not restarted.
const USER_STOP_SIGNALS: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Run a job; the process exit code is the job's.
pub fn run(mut args: RunArgs) -> ExitCode {
    let recording = match args.record.clone().map(|d| record::prepare(&d)).transpose() {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("vpml run: {msg}");
            return ExitCode::from(1);
        }
    };
    if let Some((dir, _)) = &recording {
        if !matches!(args.protocol.as_str(), "none" | "pessimist") || args.log_dir.is_some() {
            eprintln!("vpml run: --record uses the pessimist protocol and its own log directory");
            return ExitCode::from(1);
        }
        args.protocol = "pessimist".into();
        args.sender_log = "file".into();
        args.log_dir = Some(dir.clone());
    }
    match run_job(&args, recording.as_ref()) {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            eprintln!("vpml run: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run_job(args: &RunArgs, recording: Option<&(PathBuf, bool)>) -> Result<u8, String> {
    // A recording keeps every rank's counters in its manifest.
    let stats_env = args.stats || recording.is_some();
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
    let hosts = host_plan(args)?;
    raise_fd_limit();

    let job_id = hex(&random_bytes::<8>()?);
    let job_id_for_manifest = job_id.clone();
    // Replays may run from another directory.
    let program_for_manifest = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
    let token = protocol::job_token(args, hex(&random_bytes::<16>()?))?;
    let (tx, rx) = unbounded::<Event>();
    let (kv_addr, kv) = kv::start(&args.bind, args.ranks, token.clone(), tx.clone())
        .map_err(|e| format!("cannot start the key/value service on {}: {e}", args.bind))?;
    let plan = inject::plan(args)?;
    let mut protocol = protocol::ProtocolSetup::start(args, &job_id, &token, &plan, tx.clone())?;
    if args.protocol != "none" || args.stats {
        eprintln!("vpml run: job {job_id}, {}", protocol.info);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mpi = mpi_abi_dir(args.mpi_abi, &program, &job_id, "vpml run")?;
    let mut extra_envs: Vec<(String, String)> = protocol.envs.clone();
    if let Some(dir) = &mpi {
        extra_envs.push(("LD_LIBRARY_PATH".into(), loader_path_with(dir)));
    }
    if let Some(seed) = args.chaos {
        extra_envs.push((env::CHAOS.to_string(), seed.to_string()));
    }
    let signals = watch_signals(tx.clone())?;
    let restartable = args.protocol != "none";
    let outputs = Arc::new(Outputs::new(args.ranks, args.tag_output));
    let log_dir = protocol
        .envs
        .iter()
        .find(|(k, _)| k == "VPML_LOG_DIR")
        .map(|(_, v)| PathBuf::from(v));
    let mut forwarders = Vec::new();
    let (code, ended) = if let Some(hosts) = hosts {
        // Several hosts: every rank is started by its host's agent.
        let placement: Vec<usize> = hosts
            .iter()
            .enumerate()
            .flat_map(|(h, spec)| std::iter::repeat_n(h, spec.slots))
            .take(args.ranks)
            .collect();
        let host_of: Vec<String> = placement.iter().map(|h| h.to_string()).collect();
        let mut envs = vec![
            (env::JOB_ID.to_string(), job_id.clone()),
            (env::SIZE.to_string(), args.ranks.to_string()),
            (env::KV_ADDR.to_string(), kv_addr.clone()),
            (env::TOKEN.to_string(), token.clone()),
            (
                env::STATS.to_string(),
                if stats_env { "1" } else { "" }.to_string(),
            ),
            (env::TRANSPORT.to_string(), args.transport.clone()),
            (env::HOST_OF.to_string(), host_of.join(",")),
        ];
        envs.extend(extra_envs.iter().cloned());
        // Hosts started by fork or netns share this machine's cores: their
        // ranks count together when a rank decides whether to spin.
        let same_machine = |h: usize| hosts[h].via != agent::StartMethod::Ssh;
        let setup_for = |h: usize| agent::JobSetup {
            program: program.clone().into_os_string(),
            args: rest.to_vec(),
            size: args.ranks,
            envs: envs.clone(),
            restartable,
            local_ranks: placement
                .iter()
                .filter(|&&p| p == h || (same_machine(h) && same_machine(p)))
                .count(),
            bind: args.bind_to == BindPolicy::Core,
        };
        let sink = Arc::clone(&outputs);
        let output: agent::OutputFn =
            Arc::new(move |rank, is_err, line| sink.emit(rank, is_err, line));
        let agent_timeout = Duration::from_secs_f64(args.agent_timeout.max(0.1));
        let how = agent::Rendezvous {
            bind: &args.bind,
            token: &token,
            timeout: agent_timeout,
        };
        let mut agents =
            match agent::Agents::start(hosts.clone(), &how, tx.clone(), output, setup_for) {
                Ok(a) => a,
                Err(e) => {
                    protocol.stop();
                    return Err(e);
                }
            };
        for (rank, &h) in placement.iter().enumerate() {
            agents.command(h, &format!("SPAWN {rank} 0"));
        }
        let spares: Vec<usize> = (0..hosts.len()).filter(|&h| hosts[h].slots == 0).collect();
        let mut backend = Backend::Agents {
            agents: &agents,
            placement,
            host_alive: vec![true; hosts.len()],
            spares,
            incarnations: vec![0; args.ranks],
        };
        let (code, ended) = supervise(
            args,
            &mut backend,
            &rx,
            restartable,
            log_dir,
            &plan,
            &mut protocol,
            &mut forwarders,
        );
        drop(backend);
        agents.stop();
        (code, ended)
    } else {
        let mailboxes: Vec<OwnedFd> = (0..args.ranks)
            .map(|r| vpml_pml::shm::create_mailbox(&format!("vpml-{job_id}-{r}"), args.ranks))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cannot create shared memory for {} ranks: {e}", args.ranks))?;
        let fds: Vec<String> = mailboxes
            .iter()
            .map(|f| f.as_raw_fd().to_string())
            .collect();
        let bind = match args.bind_to {
            BindPolicy::Auto => args.ranks <= cores,
            BindPolicy::Core => true,
            BindPolicy::None => false,
        };
        let pseudo = args.simulate_hosts.unwrap_or(1).clamp(1, args.ranks);
        let host_of: Vec<String> = (0..args.ranks)
            .map(|r| (r * pseudo / args.ranks).to_string())
            .collect();
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
        let spawner = Spawner {
            program,
            rest: rest.to_vec(),
            job_id,
            kv_addr,
            token,
            fds: fds.join(","),
            stats: stats_env,
            ranks: args.ranks,
            cores,
            bind,
            protocol_envs: extra_envs.clone(),
            transport: args.transport.clone(),
            host_of: host_of.join(","),
            job_page_fd: job_page.as_ref().map(|(fd, _, _)| fd.as_raw_fd()),
            launcher_pid: std::process::id(),
            tx: tx.clone(),
            outputs: Arc::clone(&outputs),
            fault_points: inject::Plan {
                kills: Vec::new(),
                points: plan.points.clone(),
            },
        };
        let mut pids = Vec::with_capacity(args.ranks);
        for rank in 0..args.ranks {
            match spawner.spawn(rank, 0, &mut forwarders) {
                Ok(pid) => pids.push(pid),
                Err(e) => {
                    for &pid in &pids {
                        // SAFETY: plain syscall on a child we have not reaped.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                    return Err(e);
                }
            }
        }
        let mut backend = Backend::Local {
            spawner: &spawner,
            page: job_page.as_ref().map(|(_, page, bells)| (page, bells)),
            pids,
        };
        let (code, ended) = supervise(
            args,
            &mut backend,
            &rx,
            restartable,
            log_dir,
            &plan,
            &mut protocol,
            &mut forwarders,
        );
        drop(backend);
        drop(spawner);
        drop(job_page);
        drop(mailboxes);
        (code, ended)
    };
    forwarders.extend(outputs.take_previous());
    drop(tx);
    for f in forwarders {
        let _ = f.join();
    }
    signals.close();
    protocol.stop();
    if let Some(dir) = &mpi {
        let _ = std::fs::remove_dir_all(dir);
    }
    if args.stats {
        print_stats(&kv, args.ranks);
    }
    if let Some((dir, default)) = recording {
        let m = record::Manifest {
            job: job_id_for_manifest,
            size: args.ranks,
            program: program_for_manifest.into_os_string(),
            args: rest.to_vec(),
            protocol: args.protocol.clone(),
            ranks: (0..args.ranks)
                .map(|r| kv.get(&format!("stats.{r}")))
                .collect(),
            ended,
        };
        record::finish(dir, *default, &m)?;
    }
    Ok(code)
}

/// For an MPI C program (`--mpi-abi`, or a program that links MPICH's
/// `libmpich.so.12`): a directory where `libmpich.so.12` and
/// `libmpi.so.12` are vpml's MPICH-ABI library, to put first on the ranks'
/// loader path.
/// `who` names the command in the line that says so. The caller removes
/// the directory when the job ends.
pub(crate) fn mpi_abi_dir(
    force: bool,
    program: &Path,
    job_id: &str,
    who: &str,
) -> Result<Option<PathBuf>, String> {
    // A substring search (SIMD) over the file: no ELF parsing needed, and
    // fast enough that the job's start does not notice it.
    let linked = std::fs::read(program)
        .map(|b| {
            memchr::memmem::find(&b, b"libmpich.so.12").is_some()
                || memchr::memmem::find(&b, b"libmpi.so.12").is_some()
        })
        .unwrap_or(false);
    if !force && !linked {
        return Ok(None);
    }
    let lib =
        mpi_library().map_err(|e| format!("{} is an MPI program, but {e}", program.display()))?;
    // Named by our pid, so that the next run removes it if we are killed.
    protocol::remove_stale_dirs(&std::env::temp_dir(), MPI_LINKS_PREFIX);
    let links =
        std::env::temp_dir().join(format!("{MPI_LINKS_PREFIX}{}-{job_id}", std::process::id()));
    std::fs::create_dir_all(&links).map_err(|e| format!("{}: {e}", links.display()))?;
    for name in ["libmpich.so.12", "libmpi.so.12"] {
        let link = links.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link).map_err(|e| format!("{}: {e}", link.display()))?;
    }
    eprintln!(
        "{who}: {} runs on vpml's MPI library ({})",
        program.display(),
        lib.display()
    );
    Ok(Some(links))
}

/// Prefix of the temporary directories of [`mpi_abi_dir`]:
/// `<prefix><launcher pid>-<job>`.
const MPI_LINKS_PREFIX: &str = "vpml-mpi-";

/// `LD_LIBRARY_PATH` with `dir` first.
pub(crate) fn loader_path_with(dir: &Path) -> String {
    match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
        _ => dir.display().to_string(),
    }
}

/// vpml's MPICH-ABI library (`libvpml_mpich.so`), found next to the
/// `vpml` binary or in its `deps/` directory (where `cargo test` builds
/// it), the newer of the two.
pub fn mpi_library() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the vpml binary: {e}"))?;
    let dir = exe.parent().ok_or("the vpml binary has no directory")?;
    // Both may exist in a cargo target directory (`cargo build -p
    // vpml-mpi-abi` writes the first, `cargo test` only the second): the
    // newer one is the current build.
    [
        dir.join("libvpml_mpich.so"),
        dir.join("deps").join("libvpml_mpich.so"),
    ]
    .into_iter()
    .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
    .max_by_key(|(modified, _)| *modified)
    .map(|(_, p)| p)
    .ok_or_else(|| {
        format!(
            "vpml's MPI library (libvpml_mpich.so) is not next to {}: build it with `cargo build --release -p vpml-mpi-abi`",
            exe.display()
        )
    })
}

/// The hosts of a multi-host job (`--hosts`, `--hostfile`, plus
/// `--spare-hosts` with no slots), or `None` for a job on this host alone.
fn host_plan(args: &RunArgs) -> Result<Option<Vec<agent::HostSpec>>, String> {
    let mut hosts = match (&args.hosts, &args.hostfile) {
        (Some(_), Some(_)) => return Err("give --hosts or --hostfile, not both".into()),
        (Some(list), None) => agent::parse_hosts(list, args.via.as_deref())?,
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("cannot read the host file {}: {e}", f.display()))?;
            agent::parse_hostfile(&text, args.via.as_deref())?
        }
        (None, None) => {
            if args.spare_hosts.is_some() {
                return Err("--spare-hosts needs --hosts or --hostfile".into());
            }
            return Ok(None);
        }
    };
    let slots: usize = hosts.iter().map(|h| h.slots).sum();
    if slots < args.ranks {
        return Err(format!(
            "{} rank(s) but the hosts offer {slots} slot(s)",
            args.ranks
        ));
    }
    if let Some(spares) = &args.spare_hosts {
        for mut h in agent::parse_hosts(spares, args.via.as_deref())? {
            h.slots = 0;
            hosts.push(h);
        }
    }
    Ok(Some(hosts))
}

/// Everything needed to start (or restart) a rank process on this host.
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
    launcher_pid: u32,
    tx: Sender<Event>,
    outputs: Arc<Outputs>,
    /// Fault points to arm (`--inject-failure RANK@point:…`).
    fault_points: inject::Plan,
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
            .env(env::SPAWNED_AT_NS, spawned_at_ns())
            .env_remove(vpml_fault_points::ENV)
            .stdin(if rank == 0 && incarnation == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(point) = self.fault_points.point_for(Target::Rank(rank), incarnation) {
            cmd.env(vpml_fault_points::ENV, point);
        }
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
        if let Some(out) = child.stdout.take() {
            let previous = self.outputs.take_previous_of(rank);
            let h = forward(out, Arc::clone(&self.outputs), rank, false, previous);
            self.outputs.set_previous(rank, h);
        }
        if let Some(err) = child.stderr.take() {
            forwarders.push(forward(err, Arc::clone(&self.outputs), rank, true, None));
        }
        watch_exit(rank, incarnation, child, self.tx.clone());
        Ok(pid)
    }
}

/// Where the ranks run: children of this launcher, or of per-host agents.
enum Backend<'a> {
    Local {
        spawner: &'a Spawner,
        /// The job page and doorbells (with a protocol).
        page: Option<(
            &'a vpml_pml::recovery::JobPage,
            &'a vpml_pml::shm::Doorbells,
        )>,
        pids: Vec<i32>,
    },
    Agents {
        agents: &'a agent::Agents,
        /// Host of each rank's current process.
        placement: Vec<usize>,
        host_alive: Vec<bool>,
        /// Hosts started without ranks, for restarts.
        spares: Vec<usize>,
        incarnations: Vec<u32>,
    },
}

impl Backend<'_> {
    fn signal(&self, rank: usize, sig: i32) {
        match self {
            Backend::Local { pids, .. } => {
                // SAFETY: plain syscall on a child we have not reaped.
                unsafe { libc::kill(pids[rank], sig) };
            }
            Backend::Agents {
                agents, placement, ..
            } => agents.command(placement[rank], &format!("KILL {rank} {sig}")),
        }
    }

    /// Where `rank` runs (for messages).
    fn describe(&self, rank: usize) -> String {
        match self {
            Backend::Local { pids, .. } => format!("pid {}", pids[rank]),
            Backend::Agents {
                agents, placement, ..
            } => format!("host {}", agents.hosts[placement[rank]].name),
        }
    }

    /// Announce that `rank` restarts; returns its new incarnation.
    fn announce_restart(&mut self, rank: usize) -> u32 {
        match self {
            Backend::Local { page, .. } => page.map_or(0, |(page, _)| page.restart(rank)),
            Backend::Agents {
                agents,
                incarnations,
                ..
            } => {
                incarnations[rank] += 1;
                agents.broadcast(&format!("RESTART {rank}"));
                incarnations[rank]
            }
        }
    }

    /// After `announce_restart`: wake the ranks waiting on it.
    fn wake_all(&self) {
        if let Backend::Local {
            page: Some((_, bells)),
            ..
        } = self
        {
            bells.ring_all();
        }
    }

    fn announce_all_finalized(&self) {
        match self {
            Backend::Local { page, .. } => {
                if let Some((page, bells)) = page {
                    page.set_all_finalized();
                    bells.ring_all();
                }
            }
            Backend::Agents { agents, .. } => agents.broadcast("ALLFINAL"),
        }
    }

    /// Start incarnation `inc` of `rank` again: on its host, or on a spare
    /// if its host is lost.
    fn respawn(
        &mut self,
        rank: usize,
        inc: u32,
        forwarders: &mut Vec<std::thread::JoinHandle<()>>,
    ) -> Result<(), String> {
        match self {
            Backend::Local { spawner, pids, .. } => {
                pids[rank] = spawner.spawn(rank, inc, forwarders)?;
                Ok(())
            }
            Backend::Agents {
                agents,
                placement,
                host_alive,
                spares,
                ..
            } => {
                if !host_alive[placement[rank]] {
                    let load = |h: usize| placement.iter().filter(|&&p| p == h).count();
                    let spare = spares
                        .iter()
                        .copied()
                        .filter(|&h| host_alive[h])
                        .min_by_key(|&h| load(h))
                        .ok_or_else(|| {
                            format!(
                                "host {} is lost and no spare host is left (--spare-hosts)",
                                agents.hosts[placement[rank]].name
                            )
                        })?;
                    placement[rank] = spare;
                }
                agents.command(placement[rank], &format!("SPAWN {rank} {inc}"));
                Ok(())
            }
        }
    }

    /// Kill the agent of `host` (testing aid).
    fn kill_agent(&self, host: usize) {
        if let Backend::Agents { agents, .. } = self {
            agents.kill(host);
        }
    }

    /// The agent of `host` is gone: the ranks it ran.
    fn host_lost(&mut self, host: usize) -> Vec<usize> {
        match self {
            Backend::Local { .. } => Vec::new(),
            Backend::Agents {
                placement,
                host_alive,
                ..
            } => {
                host_alive[host] = false;
                (0..placement.len())
                    .filter(|&r| placement[r] == host)
                    .collect()
            }
        }
    }
}

/// How a rank's process ended, as the supervisor sees it.
enum Death {
    Signal(i32),
    Lost(String),
}

/// The main loop: returns the job's exit code once every rank has exited.
#[allow(clippy::too_many_arguments)]
fn supervise(
    args: &RunArgs,
    backend: &mut Backend<'_>,
    rx: &Receiver<Event>,
    restartable: bool,
    log_dir: Option<PathBuf>,
    plan: &inject::Plan,
    protocol: &mut protocol::ProtocolSetup,
    forwarders: &mut Vec<std::thread::JoinHandle<()>>,
) -> (u8, Vec<String>) {
    let n = args.ranks;
    let (injections, points) = (&plan.kills, &plan.points);
    let start = Instant::now();
    // How each rank's last process ended (for a recording's manifest).
    let mut ended = vec!["still running when the job ended".to_string(); n];
    let mut finalized = vec![false; n];
    let mut joined = vec![false; n];
    let mut all_finalized = false;
    let mut alive = vec![true; n];
    let mut incarnation = vec![0u32; n];
    let mut next_injection = 0;
    let (relative, injections): (Vec<&Injection>, Vec<&Injection>) =
        injections.iter().partition(|i| i.after_restart);
    // Kills that wait for a restart of their rank, in order, and those armed.
    let mut on_restart: Vec<std::collections::VecDeque<Duration>> = vec![Default::default(); n];
    for i in relative {
        if let Target::Rank(r) = i.target
            && let Some(q) = on_restart.get_mut(r)
        {
            q.push_back(i.after);
        }
    }
    let mut armed: Vec<(Instant, usize)> = Vec::new();
    let mut killed_at: Vec<Option<Instant>> = vec![None; n];
    let mut corrupt_before_restart = vec![false; n];
    // Files removed when the rank dies next (`…:lose-files`): a rank's
    // point kills its first process, or the process a restart armed.
    let mut lose_files_before_restart = vec![false; n];
    let lose_files_at: Vec<(usize, u32)> = points
        .iter()
        .filter(|p| p.lose_files)
        .filter_map(|p| match p.target {
            Target::Rank(r) => Some((r, p.incarnation)),
            _ => None,
        })
        .collect();
    // Hosts whose files go with them (`agent:H@T:lose-files`).
    let mut files_lost_with: Vec<usize> = Vec::new();
    let mut restarts_done = 0u32;
    let mut failure: Option<u8> = None;
    let mut kill_at: Option<Instant> = None;
    let mut deadline = args
        .timeout
        .map(|t| Instant::now() + Duration::from_secs_f64(t));
    let live = |alive: &[bool]| -> Vec<usize> { (0..alive.len()).filter(|&r| alive[r]).collect() };
    let signal_all = |backend: &Backend<'_>, ranks: &[usize], sig: i32| {
        for &r in ranks {
            backend.signal(r, sig);
        }
    };
    macro_rules! fail {
        ($code:expr, $msg:expr) => {
            if failure.is_none() {
                eprintln!("vpml run: {}", $msg);
                failure = Some($code);
                signal_all(backend, &live(&alive), libc::SIGTERM);
                kill_at = Some(Instant::now() + TERM_GRACE);
            }
        };
    }
    while alive.iter().any(|&a| a) {
        let injection_at = injections
            .get(next_injection)
            .map(|i| start + i.after)
            .into_iter()
            .chain(armed.iter().map(|(t, _)| *t))
            .min();
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
        // The ranks whose process just died (and how).
        let mut deaths: Vec<(usize, Death)> = Vec::new();
        match ev {
            None => {
                armed.retain(|&(t, rank)| {
                    if t > now {
                        return true;
                    }
                    if failure.is_none() && !all_finalized && alive[rank] {
                        eprintln!(
                            "vpml run: injecting a failure: SIGKILL to rank {rank} ({}) during its recovery, at {:.3} s",
                            backend.describe(rank),
                            now.duration_since(start).as_secs_f64()
                        );
                        killed_at[rank] = Some(now);
                        backend.signal(rank, libc::SIGKILL);
                    }
                    false
                });
                while let Some(inj) = injections.get(next_injection)
                    && start + inj.after <= now
                {
                    next_injection += 1;
                    if failure.is_some() || all_finalized {
                        continue;
                    }
                    let at = now.duration_since(start).as_secs_f64();
                    match inj.target {
                        Target::Agent(host) => {
                            eprintln!(
                                "vpml run: injecting a failure: SIGKILL to the agent of host {host} at {at:.3} s"
                            );
                            if inj.lose_files {
                                files_lost_with.push(host);
                            }
                            backend.kill_agent(host);
                        }
                        Target::Logger(i) => {
                            eprintln!(
                                "vpml run: injecting a failure: SIGKILL to event logger {i} at {at:.3} s"
                            );
                            protocol.kill_logger(i);
                        }
                        Target::Rank(rank) if alive[rank] => {
                            eprintln!(
                                "vpml run: injecting a failure: SIGKILL to rank {rank} ({}) at {at:.3} s",
                                backend.describe(rank),
                            );
                            killed_at[rank] = Some(now);
                            corrupt_before_restart[rank] |= inj.corrupt_checkpoint;
                            lose_files_before_restart[rank] |= inj.lose_files;
                            backend.signal(rank, libc::SIGKILL);
                        }
                        Target::Rank(_) => {}
                    }
                }
                if kill_at.is_some_and(|t| now >= t) {
                    signal_all(backend, &live(&alive), libc::SIGKILL);
                    kill_at = None;
                }
                if deadline.is_some_and(|t| now >= t) && failure.is_none() {
                    let targets = live(&alive);
                    eprintln!(
                        "vpml run: job timed out after {} s; stopping {} rank(s)",
                        args.timeout.unwrap_or_default(),
                        targets.len()
                    );
                    failure = Some(TIMEOUT_EXIT);
                    signal_all(backend, &targets, libc::SIGKILL);
                }
                if deadline.is_some_and(|t| now >= t) {
                    deadline = None;
                }
            }
            Some(Event::Joined { rank }) => joined[rank] = true,
            Some(Event::Finalized { rank }) => {
                finalized[rank] = true;
                if !all_finalized && finalized.iter().all(|&f| f) {
                    all_finalized = true;
                    if restartable {
                        // Ranks wait for this before exiting: until now a
                        // crashed rank could still need their logs.
                        backend.announce_all_finalized();
                    }
                }
            }
            Some(Event::AgentLost { host, name, why }) => {
                let lost = backend.host_lost(host);
                if files_lost_with.contains(&host)
                    && let Some(dir) = &log_dir
                {
                    // As if the machine were gone: its ranks' files too.
                    for &r in &lost {
                        inject::remove_rank_files(dir, r, &format!("with host {name}"));
                    }
                }
                for r in lost {
                    if alive[r] {
                        alive[r] = false;
                        deaths.push((r, Death::Lost(format!("host {name} was lost ({why})"))));
                    }
                }
            }
            Some(Event::Exited {
                rank,
                pid,
                incarnation: inc,
                status,
            }) => {
                if let Some(pid) = pid {
                    reap(pid);
                }
                if inc != incarnation[rank] || !alive[rank] {
                    continue;
                }
                alive[rank] = false;
                ended[rank] = match (status.code(), status.signal()) {
                    (Some(c), _) => format!("exit {c}"),
                    (_, Some(sig)) => format!("signal {sig}"),
                    _ => "unknown".into(),
                };
                if let Some(sig) = status.signal() {
                    deaths.push((rank, Death::Signal(sig)));
                } else if let Some(code) = status.code().filter(|c| *c != 0) {
                    fail!(code as u8, format!("rank {rank} exited with status {code}"));
                } else if !finalized[rank] {
                    fail!(
                        1,
                        format!(
                            "rank {rank} exited without finalizing (status 0, but vpml was not finalized)"
                        )
                    );
                }
            }
            Some(Event::Abort {
                rank,
                code,
                message,
            }) => {
                let code = u8::try_from(code).ok().filter(|&c| c != 0).unwrap_or(1);
                fail!(
                    code,
                    format!("rank {rank} aborted the job (code {code}): {message}")
                );
            }
            Some(Event::LoggerExited { index, pid, status }) => {
                if failure.is_none() && !all_finalized {
                    if let Some(sig) = status.signal().filter(|s| USER_STOP_SIGNALS.contains(s)) {
                        // Ctrl-C reaches the loggers too: the user's stop.
                        fail!(
                            128 + sig as u8,
                            format!(
                                "event logger {index} was stopped by {}: ending the job",
                                signal_name(sig)
                            )
                        );
                    } else if restarts_done >= args.max_restarts {
                        fail!(
                            1,
                            format!(
                                "event logger {index} died; no restarts left (--max-restarts {})",
                                args.max_restarts
                            )
                        );
                    } else {
                        match protocol.restart_logger(index, pid, status) {
                            Ok(Some(line)) => {
                                restarts_done += 1;
                                eprintln!("vpml run: {line}");
                            }
                            Ok(None) => {}
                            Err(why) => fail!(1, why),
                        }
                    }
                }
            }
            Some(Event::Signal(sig)) => {
                let targets = live(&alive);
                if failure.is_none() {
                    eprintln!(
                        "vpml run: received {}; forwarding it to {} rank(s)",
                        signal_name(sig),
                        targets.len()
                    );
                    failure = Some(128 + sig as u8);
                    signal_all(backend, &targets, sig);
                    kill_at = Some(now + TERM_GRACE);
                } else {
                    signal_all(backend, &targets, libc::SIGKILL);
                }
            }
        }
        for (rank, death) in deaths {
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
                    128 + libc::SIGKILL as u8,
                ),
            };
            if restartable && all_finalized && finalized[rank] {
                // Its work is done and nobody can need it any more.
                continue;
            }
            if failure.is_some() {
                continue;
            }
            if !restartable {
                fail!(code, why);
                continue;
            }
            if !joined[rank] {
                // The others wait for it in a start-up fence: nothing to
                // recover, and a new process cannot take its place there.
                fail!(
                    code,
                    format!(
                        "{why} during start-up, before the job was joined: only ranks past start-up are restarted (run the job again)"
                    )
                );
                continue;
            }
            if matches!(death, Death::Signal(s) if USER_STOP_SIGNALS.contains(&s)) {
                // Ctrl-C reaches the whole process group, ranks included,
                // often before the launcher hears it: the user's stop, not
                // a crash to recover from.
                fail!(
                    code,
                    format!(
                        "{why}: ending the job (a rank stopped by SIGINT, SIGTERM, SIGHUP or SIGQUIT is not restarted)"
                    )
                );
                continue;
            }
            if restarts_done >= args.max_restarts {
                fail!(
                    code,
                    format!(
                        "{why}; no restarts left (--max-restarts {})",
                        args.max_restarts
                    )
                );
                continue;
            }
            restarts_done += 1;
            if lose_files_at.contains(&(rank, incarnation[rank])) {
                lose_files_before_restart[rank] = true;
            }
            if std::mem::take(&mut corrupt_before_restart[rank])
                && let Some(dir) = &log_dir
            {
                match inject::corrupt_newest_checkpoint(dir, rank) {
                    Ok(p) => eprintln!(
                        "vpml run: damaged {} before restarting rank {rank}",
                        p.display()
                    ),
                    Err(e) => eprintln!("vpml run: could not damage a checkpoint: {e}"),
                }
            }
            if std::mem::take(&mut lose_files_before_restart[rank])
                && let Some(dir) = &log_dir
            {
                // As if the rank had run on a machine now gone.
                inject::remove_rank_files(dir, rank, &format!("before restarting rank {rank}"));
            }
            let t0 = Instant::now();
            let inc = backend.announce_restart(rank);
            incarnation[rank] = inc;
            finalized[rank] = false;
            match backend.respawn(rank, inc, forwarders) {
                Ok(()) => {
                    alive[rank] = true;
                    backend.wake_all();
                    if let Some(after) = on_restart[rank].pop_front() {
                        armed.push((Instant::now() + after, rank));
                    }
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
                        "vpml run: {why}; restarted it as incarnation {inc} on {} (restart {restarts_done} of at most {}{detected}, spawned in {:.1} ms)",
                        backend.describe(rank),
                        args.max_restarts,
                        t0.elapsed().as_secs_f64() * 1e3
                    );
                }
                Err(e) => fail!(code, format!("{why}; cannot restart it: {e}")),
            }
        }
    }
    (failure.unwrap_or(0), ended)
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
fn watch_exit(rank: usize, incarnation: u32, child: Child, tx: Sender<Event>) {
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

use vpml_pml::bootstrap::{CHECKPOINT_MARK, RESTART_MARK};

/// What a rank printed on stdout over all its incarnations.
#[derive(Default)]
struct RankOutput {
    /// Bytes of the rank's own output forwarded so far.
    total: u64,
    /// `total` when each checkpoint was taken.
    at_checkpoint: std::collections::HashMap<u64, u64>,
    /// Bytes a restarted process prints again before its new output.
    skip: u64,
    /// The forwarder of the previous process's stdout (finished first).
    previous: Option<std::thread::JoinHandle<()>>,
}

/// Every rank's output, printed line by line by the launcher (from local
/// pipes or from agents). A rank's stdout carries the marks of
/// [`vpml_pml::bootstrap::CHECKPOINT_MARK`]: a restarted process's output
/// is dropped until it has re-printed what was printed after the
/// checkpoint it restarted from.
struct Outputs {
    ranks: Vec<Mutex<RankOutput>>,
    tag: bool,
}

impl Outputs {
    fn new(n: usize, tag: bool) -> Outputs {
        Outputs {
            ranks: (0..n).map(|_| Mutex::new(RankOutput::default())).collect(),
            tag,
        }
    }

    fn state(&self, rank: usize) -> Option<std::sync::MutexGuard<'_, RankOutput>> {
        self.ranks
            .get(rank)
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn take_previous_of(&self, rank: usize) -> Option<std::thread::JoinHandle<()>> {
        self.state(rank)?.previous.take()
    }

    fn set_previous(&self, rank: usize, h: std::thread::JoinHandle<()>) {
        if let Some(mut st) = self.state(rank) {
            st.previous = Some(h);
        }
    }

    fn take_previous(&self) -> Vec<std::thread::JoinHandle<()>> {
        (0..self.ranks.len())
            .filter_map(|r| self.take_previous_of(r))
            .collect()
    }

    /// One line (with its newline, unless the stream ended without one).
    fn emit(&self, rank: usize, is_err: bool, line: &[u8]) {
        if !is_err {
            let Some(mut st) = self.state(rank) else {
                return;
            };
            let text = String::from_utf8_lossy(line);
            let mark = |m: &str| {
                text.strip_prefix(m)
                    .and_then(|r| r.trim_end().strip_suffix(']'))
                    .and_then(|n| n.parse::<u64>().ok())
            };
            if let Some(i) = mark(CHECKPOINT_MARK) {
                let total = st.total;
                st.at_checkpoint.insert(i, total);
                return;
            }
            if let Some(i) = mark(RESTART_MARK) {
                let from = if i == 0 {
                    0
                } else {
                    st.at_checkpoint.get(&i).copied().unwrap_or(st.total)
                };
                st.skip = st.total.saturating_sub(from);
                st.total = from;
                return;
            }
            let n = line.len() as u64;
            st.total += n;
            if st.skip >= n {
                st.skip -= n;
                return;
            }
            st.skip = 0;
        }
        let mut out: Box<dyn Write> = if is_err {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        if self.tag {
            let _ = write!(out, "[{rank}] ");
        }
        let _ = out.write_all(line);
        if !line.ends_with(b"\n") {
            let _ = out.write_all(b"\n");
        }
        let _ = out.flush();
    }
}

/// Forward one output stream of a local rank line by line (stdout after
/// the previous process's stdout has been forwarded whole).
fn forward(
    stream: impl Read + Send + 'static,
    outputs: Arc<Outputs>,
    rank: usize,
    is_err: bool,
    previous: Option<std::thread::JoinHandle<()>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if let Some(h) = previous {
            let _ = h.join();
        }
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => outputs.emit(rank, is_err, &line),
            }
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

pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| format!("no randomness for the job token: {e}"))?;
    Ok(b)
}

/// Lower-case hexadecimal of `bytes` (ids, tokens, and the byte strings
/// of the agents' setup and the recording manifests).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of [`hex`]'s output; `None` if `s` is not such a string.
pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Now, in nanoseconds since the Unix epoch, as a rank's
/// `SPAWNED_AT_NS` (it measures its own start from it).
pub(crate) fn spawned_at_ns() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .to_string()
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
