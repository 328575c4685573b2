//! Setting up and starting a job: checks the options, starts the
//! key/value service, the protocol and the ranks (here or through host
//! agents), hands them to the supervisor, and cleans up after them.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crossbeam_channel::{Sender, unbounded};
use vpml_pml::config::{EngineSettings, var as env};

use crate::backend::{Backend, Spawner};
use crate::cli::{BindPolicy, RunArgs, SenderLogKind};
use crate::event::Event;
use crate::ids::random_bytes;
use crate::mpi_abi::{loader_path_with, mpi_abi_dir};
use crate::output::Outputs;
use crate::supervise::{LaunchedJob, Policy, Supervisor};
use crate::{Error, agent, inject, kv, protocol};
use vpml_replay::recording;

/// How the job of `args` is supervised.
fn policy(
    args: &RunArgs,
    restartable: bool,
    log_dir: Option<PathBuf>,
    copy_stores: Option<crate::supervise::CopyStores>,
) -> Policy {
    Policy {
        ranks: args.ranks,
        restartable,
        rollback: args.protocol == "coordinated",
        // (Checked in `run_job`.)
        checkpoint_interval: args.checkpoint_interval.and_then(crate::seconds),
        max_restarts: args.max_restarts,
        // (Checked in `run_job`.)
        timeout: args.timeout.and_then(crate::seconds),
        log_dir,
        copy_stores,
    }
}

/// Run a job; the process exit code is the job's.
pub fn run(args: RunArgs) -> ExitCode {
    match record_and_run(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("vpml run: {e}");
            ExitCode::from(1)
        }
    }
}

/// Prepare the recording (`--record`), then run the job.
fn record_and_run(mut args: RunArgs) -> Result<u8, Error> {
    let recording = args
        .record
        .clone()
        .map(|d| recording::prepare(&d))
        .transpose()?;
    if let Some((dir, _)) = &recording {
        if !matches!(args.protocol.as_str(), "none" | "pessimist") || args.log_dir.is_some() {
            return Err(Error::RecordConflict);
        }
        args.protocol = "pessimist".into();
        args.sender_log = SenderLogKind::File;
        args.log_dir = Some(dir.clone());
    }
    run_job(&args, recording.as_ref())
}

fn run_job(args: &RunArgs, recording: Option<&(PathBuf, bool)>) -> Result<u8, Error> {
    // A recording keeps every rank's counters in its manifest.
    let stats_env = args.stats || recording.is_some();
    if args.ranks == 0 {
        return Err(Error::NoRanks);
    }
    if let Some(t) = args.timeout
        && !(t > 0.0 && crate::seconds(t).is_some())
    {
        return Err(Error::BadTimeout(t));
    }
    if let Some(t) = args.checkpoint_interval {
        if !(t > 0.0 && crate::seconds(t).is_some()) {
            return Err(Error::BadCheckpointInterval(t));
        }
        if args.protocol != "coordinated" {
            return Err(Error::CheckpointIntervalNeedsCoordinated);
        }
    }
    let (program, rest) = args.command.split_first().ok_or(Error::NoProgram)?;
    let program = resolve_program(program)?;
    let hosts = host_plan(args)?;
    raise_fd_limit();

    let job_id = hex::encode(random_bytes::<8>()?);
    let job_id_for_manifest = job_id.clone();
    // Replays may run from another directory.
    let program_for_manifest = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
    let token = protocol::job_token(args, hex::encode(random_bytes::<16>()?))?;
    let (tx, rx) = unbounded::<Event>();
    let (kv_addr, kv) =
        kv::start(&args.bind, args.ranks, token.clone(), tx.clone()).map_err(|source| {
            Error::KvService {
                bind: args.bind.clone(),
                source,
            }
        })?;
    // Where `vpml checkpoint` finds the job (removed when it ends); a job
    // that takes no global checkpoints answers that it does not.
    let job_file = match crate::control::register(&job_id, &kv_addr, &token, &args.protocol) {
        Ok(f) => Some(f),
        Err(e) => {
            if args.protocol == "coordinated" {
                eprintln!("vpml run: warning: `vpml checkpoint` cannot find this job: {e}");
            }
            None
        }
    };
    let plan = inject::plan(args)?;
    let mut protocol = protocol::ProtocolSetup::start(args, &job_id, &token, &plan, tx.clone())?;
    if args.verbose || args.stats {
        eprintln!("vpml run: job {job_id}, {}", protocol.info);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mpi = mpi_abi_dir(args.mpi_abi, &program, &job_id, "vpml run", args.verbose)?;
    // The job-wide part of every rank's JobConfig: the engine's and the
    // protocol's settings (the user's knobs among them read here).
    let user = EngineSettings::user_knobs_from_env().map_err(Error::Settings)?;
    let engine = EngineSettings {
        stats: stats_env,
        chaos: args.chaos.or(user.chaos),
        ..user
    };
    let mut extra_envs: Vec<(String, String)> = engine.to_env();
    extra_envs.extend(protocol.settings.to_env());
    if let Some(dir) = &mpi {
        extra_envs.push(("LD_LIBRARY_PATH".into(), loader_path_with(dir)));
    }
    let signals = watch_signals(tx.clone())?;
    let restartable = args.protocol != "none";
    let outputs = Arc::new(Outputs::new(args.ranks, args.tag_output));
    let log_dir = protocol.settings.log_dir.clone();
    let copy_stores = protocol.copy_stores(&job_id);
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
                env::TRANSPORT.to_string(),
                args.transport.as_str().to_string(),
            ),
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
        let agent_timeout = crate::seconds(args.agent_timeout.max(0.1))
            .ok_or(Error::BadAgentTimeout(args.agent_timeout))?;
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
            restart_from: 0,
        };
        let (code, ended) = Supervisor::with_plan(
            policy(args, restartable, log_dir, copy_stores),
            LaunchedJob {
                backend: &mut backend,
                protocol: &mut protocol,
                forwarders: &mut forwarders,
            },
            &plan,
        )
        .run(&rx);
        drop(backend);
        agents.stop();
        (code, ended)
    } else {
        let mailboxes: Vec<OwnedFd> = (0..args.ranks)
            .map(|r| vpml_pml::shm::create_mailbox(&format!("vpml-{job_id}-{r}"), args.ranks))
            .collect::<Result<_, _>>()
            .map_err(|source| Error::SharedMemory {
                ranks: args.ranks,
                source,
            })?;
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
            let (fd, page) =
                vpml_pml::recovery::JobPage::create(args.ranks).map_err(Error::JobPage)?;
            let bells = vpml_pml::shm::Doorbells::map(&mailboxes, args.ranks)
                .map_err(Error::MapMailboxes)?;
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
            ranks: args.ranks,
            cores,
            bind,
            protocol_envs: extra_envs.clone(),
            transport: args.transport.as_str().to_string(),
            host_of: host_of.join(","),
            job_page_fd: job_page.as_ref().map(|(fd, _, _)| fd.as_raw_fd()),
            launcher_pid: std::process::id(),
            tx: tx.clone(),
            outputs: Arc::clone(&outputs),
            fault_points: inject::Plan {
                kills: Vec::new(),
                points: plan.points.clone(),
            },
            restart_from: Default::default(),
        };
        let mut pids = Vec::with_capacity(args.ranks);
        for rank in 0..args.ranks {
            match spawner.spawn(rank, 0, &mut forwarders) {
                Ok(pid) => pids.push(pid),
                Err(e) => {
                    for &pid in &pids {
                        // A child we have not reaped.
                        crate::process::signal(pid, rustix::process::Signal::KILL);
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
        let (code, ended) = Supervisor::with_plan(
            policy(args, restartable, log_dir, copy_stores),
            LaunchedJob {
                backend: &mut backend,
                protocol: &mut protocol,
                forwarders: &mut forwarders,
            },
            &plan,
        )
        .run(&rx);
        drop(backend);
        drop(spawner);
        drop(job_page);
        drop(mailboxes);
        (code, ended)
    };
    // No more requests: the job is over.
    drop(job_file);
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
    // Shared windows' files that ranks killed before unlinking them left.
    vpml_pml::shm::window_files::remove_window_files(&job_id_for_manifest);
    if args.stats {
        print_stats(&kv, args.ranks);
    }
    if let Some((dir, default)) = recording {
        let m = recording::Manifest {
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
        recording::finish(dir, *default, &m)?;
    }
    Ok(code)
}

/// The hosts of a multi-host job (`--hosts`, `--hostfile`, plus
/// `--spare-hosts` with no slots), or `None` for a job on this host alone.
fn host_plan(args: &RunArgs) -> Result<Option<Vec<agent::HostSpec>>, Error> {
    let mut hosts = match (&args.hosts, &args.hostfile) {
        (Some(_), Some(_)) => return Err(Error::HostsAndHostfile),
        (Some(list), None) => agent::parse_hosts(list, args.via.as_deref())?,
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f).map_err(|source| Error::ReadHostfile {
                path: f.clone(),
                source,
            })?;
            agent::parse_hostfile(&text, args.via.as_deref())?
        }
        (None, None) => {
            if args.spare_hosts.is_some() {
                return Err(Error::SpareHostsAlone);
            }
            return Ok(None);
        }
    };
    let slots: usize = hosts.iter().map(|h| h.slots).sum();
    if slots < args.ranks {
        return Err(Error::TooFewSlots {
            ranks: args.ranks,
            slots,
        });
    }
    if let Some(spares) = &args.spare_hosts {
        for mut h in agent::parse_hosts(spares, args.via.as_deref())? {
            h.slots = 0;
            hosts.push(h);
        }
    }
    Ok(Some(hosts))
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

fn watch_signals(tx: Sender<Event>) -> Result<signal_hook::iterator::Handle, Error> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
    // SIGUSR1 asks for a global checkpoint (`sbatch --signal=USR1@…`).
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1])
        .map_err(Error::SignalHandlers)?;
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
fn resolve_program(program: &OsString) -> Result<PathBuf, Error> {
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
            return Err(Error::NotExecutable(p.to_path_buf()));
        }
        return Err(Error::ProgramNotFound(p.to_path_buf()));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(p);
        if is_exec(&cand) {
            return Ok(cand);
        }
    }
    Err(Error::ProgramNotInPath(p.to_path_buf()))
}

fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    // `None` is unlimited; raising the soft limit to the hard one is always
    // allowed, and a failure only leaves the limit as it was.
    let below_hard = match (lim.current, lim.maximum) {
        (Some(cur), Some(max)) => cur < max,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if below_hard {
        lim.current = lim.maximum;
        let _ = setrlimit(Resource::Nofile, lim);
    }
}
