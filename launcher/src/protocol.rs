//! Setting up the fault-tolerance protocol of a job: for `pessimist`, the
//! sender-log directory and the event loggers (started here as `vpml
//! event-logger` processes, or given with `--event-logger-addrs`).
//!
//! A logger started here that dies while the job runs is started again on
//! the same address from its files (which hold everything it acknowledged:
//! it acknowledges after `write`). Each rank's client reconnects to it and
//! sends again what it had not acknowledged — including what the other
//! replicas acknowledged meanwhile — from the events the client keeps
//! until every replica holds them.

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use rustix::process::Signal;

use vpml_pml::config::{ProtocolName, ProtocolSettings, SenderLogMode};

use crate::cli::SenderLogKind;
use crate::event::Event;
use crate::inject::{Plan, Target};
use crate::{Error, RunArgs};

/// A job's protocol: what the ranks are told and what must be stopped and
/// removed afterwards.
pub(crate) struct ProtocolSetup {
    /// What every rank is told of the protocol (its part of the ranks'
    /// `JobConfig`).
    pub settings: ProtocolSettings,
    /// The one info line printed per job.
    pub info: String,
    loggers: Vec<StartedLogger>,
    /// The job's token file for the loggers.
    tokens: PathBuf,
    /// Where the launcher hears that a logger exited.
    tx: Option<Sender<Event>>,
    /// Fault points to arm in loggers (`--inject-failure logger:I@point:…`).
    fault_points: Plan,
    remove_dirs: Vec<PathBuf>,
}

/// An event logger this launcher started (and restarts if it dies).
struct StartedLogger {
    /// Its current process.
    pid: u32,
    /// Reports the process's exit to the launcher; taken (joined) just
    /// before the process is reaped, so `Some` means `pid` is still ours.
    watcher: Option<JoinHandle<()>>,
    /// Where it listens: kept across restarts (the ranks know it).
    addr: String,
    /// Its listening socket, made and kept open here and inherited by
    /// each of its processes: while one is restarted, clients' connections
    /// wait in the backlog instead of finding the port closed (or taken).
    listener: std::sync::Arc<std::net::TcpListener>,
    data_dir: PathBuf,
    /// Processes started so far, minus one.
    incarnation: u32,
}

/// Why an event logger process does not start.
#[derive(Debug, thiserror::Error)]
pub enum LoggerStartError {
    /// `std::env::current_exe` failed.
    #[error("cannot find the vpml binary: {0}")]
    CurrentExe(#[source] std::io::Error),
    /// The process cannot be started.
    #[error("{0}")]
    Spawn(#[source] std::io::Error),
    /// The process ended without printing its address.
    #[error("it exited ({status}) before printing its address")]
    NoAddress {
        /// How it ended, as `ExitStatus` shows it (empty if unknown).
        status: String,
    },
}

/// The job token to use: from `--token-file` (the event logger's token
/// file, read by the logger's own code: comments allowed; the first
/// `* TOKEN` line, since job ids are random) or fresh.
pub(crate) fn job_token(args: &RunArgs, fresh: String) -> Result<String, Error> {
    let Some(path) = &args.token_file else {
        return Ok(fresh);
    };
    let tokens =
        vpml_event_logger::Tokens::load(path).map_err(|e| Error::TokenFile(e.to_string()))?;
    tokens
        .any_job_token()
        .map(str::to_owned)
        .ok_or_else(|| Error::NoAnyJobToken(path.clone()))
}

impl ProtocolSetup {
    /// Prepare the protocol named by `--protocol`.
    pub(crate) fn start(
        args: &RunArgs,
        job_id: &str,
        token: &str,
        plan: &Plan,
        tx: Sender<Event>,
    ) -> Result<ProtocolSetup, Error> {
        let fault_points = Plan {
            kills: Vec::new(),
            points: plan
                .points
                .iter()
                .filter(|p| matches!(p.target, Target::Logger(_)))
                .cloned()
                .collect(),
        };
        let mut setup = ProtocolSetup {
            settings: ProtocolSettings::default(),
            info: "protocol none".into(),
            loggers: Vec::new(),
            tokens: PathBuf::new(),
            tx: Some(tx),
            fault_points,
            remove_dirs: Vec::new(),
        };
        match args.protocol.as_str() {
            "none" => Ok(setup),
            "pessimist" => {
                setup.pessimist(args, job_id, token)?;
                Ok(setup)
            }
            "coordinated" => {
                setup.coordinated(args, job_id, token)?;
                Ok(setup)
            }
            other => Err(Error::UnknownProtocol(other.to_string())),
        }
    }

    /// The job's log directory: `--log-dir`, else a private one in
    /// memory removed at the end; created (mode 0700).
    fn log_root(&mut self, args: &RunArgs, job_id: &str) -> Result<PathBuf, Error> {
        let root = match &args.log_dir {
            Some(d) => std::path::absolute(d).unwrap_or_else(|_| d.clone()),
            None => {
                let d = default_log_root(job_id);
                self.remove_dirs.push(d.clone());
                d
            }
        };
        create_private_dir(&root)?;
        Ok(root)
    }

    fn coordinated(&mut self, args: &RunArgs, job_id: &str, token: &str) -> Result<(), Error> {
        let across_hosts = args.hosts.is_some() || args.hostfile.is_some();
        if across_hosts && args.event_logger_addrs.is_some() {
            return Err(Error::CoordinatedOutsideLoggers);
        }
        let root = self.log_root(args, job_id)?;
        // A restart must never find an earlier job's checkpoints in a
        // reused --log-dir: they go before any rank starts.
        for r in 0..args.ranks {
            let dir = vpml_vprotocol::coordinated::checkpoint_dir(&root, r);
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|source| Error::Io {
                    path: dir.clone(),
                    source,
                })?;
            }
        }
        self.settings = ProtocolSettings {
            name: ProtocolName::Coordinated,
            log_dir: Some(root.clone()),
            ..ProtocolSettings::default()
        };
        if !across_hosts {
            self.info = format!("protocol coordinated: checkpoints in {}", root.display());
            return Ok(());
        }
        // Across hosts, a host may be lost with the parts on it: each
        // part is copied to event loggers on this host (checkpoint
        // servers), where the restart looks for complete checkpoints.
        if args.event_loggers == 0 {
            return Err(Error::NoEventLoggers);
        }
        if args.replicas == 0 {
            return Err(Error::NoReplicas);
        }
        if args.replicas > args.event_loggers {
            return Err(Error::TooFewLoggers {
                replicas: args.replicas,
                loggers: args.event_loggers,
            });
        }
        let addrs = self.start_own_loggers(args, job_id, token, &root)?;
        let event_loggers = self.parse_logger_addrs(&addrs)?;
        self.info = format!(
            "protocol coordinated: checkpoints in {} on each host, copied to the event logger(s) at {}",
            root.display(),
            addrs.join(",")
        );
        self.settings.replicas = Some(args.replicas);
        self.settings.event_loggers = event_loggers;
        self.settings.checkpoint_copies = true;
        Ok(())
    }

    /// Start `--event-loggers` loggers on this host, their data under
    /// `root`; their addresses.
    fn start_own_loggers(
        &mut self,
        args: &RunArgs,
        job_id: &str,
        token: &str,
        root: &std::path::Path,
    ) -> Result<Vec<String>, Error> {
        self.tokens = root.join("logger-tokens");
        write_private(&self.tokens, &format!("{job_id} {token}\n")).map_err(|source| {
            Error::Write {
                path: self.tokens.clone(),
                source,
            }
        })?;
        for i in 0..args.event_loggers {
            let data_dir = root.join(format!("logger-{i}"));
            let listener =
                std::net::TcpListener::bind(format!("{}:0", args.bind)).map_err(|source| {
                    Error::Listen {
                        addr: args.bind.clone(),
                        source,
                    }
                })?;
            if let Err(source) = self.start_logger(i, data_dir, std::sync::Arc::new(listener)) {
                self.stop();
                return Err(Error::StartLogger { index: i, source });
            }
        }
        Ok(self.loggers.iter().map(|l| l.addr.clone()).collect())
    }

    /// The loggers' `addrs` as socket addresses (stopping the loggers
    /// started if one is not an address).
    fn parse_logger_addrs(&mut self, addrs: &[String]) -> Result<Vec<std::net::SocketAddr>, Error> {
        let mut parsed = Vec::with_capacity(addrs.len());
        for a in addrs {
            match a.parse() {
                Ok(addr) => parsed.push(addr),
                Err(_) => {
                    self.stop();
                    return Err(Error::BadLoggerAddress(a.clone()));
                }
            }
        }
        Ok(parsed)
    }

    fn pessimist(&mut self, args: &RunArgs, job_id: &str, token: &str) -> Result<(), Error> {
        if args.replicas == 0 {
            return Err(Error::NoReplicas);
        }
        let absolute = |d: &PathBuf| std::path::absolute(d).unwrap_or_else(|_| d.clone());
        let root = self.log_root(args, job_id)?;
        // Segments moved out of memory: where the user says, else with the
        // logs when the user placed them, else on a disk (the default log
        // directory is memory).
        let spill_root = match (&args.spill_dir, &args.log_dir) {
            (Some(d), _) => Some(absolute(d)),
            (None, Some(_)) => None,
            (None, None) => {
                let d = default_spill_root(job_id);
                self.remove_dirs.push(d.clone());
                Some(d)
            }
        };
        if let Some(dir) = &spill_root {
            create_private_dir(dir)?;
        }
        warn_if_memory(spill_root.as_ref().unwrap_or(&root));
        let addrs: Vec<String> = if let Some(list) = &args.event_logger_addrs {
            list.split(',')
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .collect()
        } else {
            if args.event_loggers == 0 {
                return Err(Error::NoEventLoggers);
            }
            self.start_own_loggers(args, job_id, token, &root)?
        };
        if args.replicas > addrs.len() {
            self.stop();
            return Err(Error::TooFewLoggers {
                replicas: args.replicas,
                loggers: addrs.len(),
            });
        }
        self.info = format!(
            "protocol pessimist: {} event logger(s) at {}, {} replica(s), sender logs {}, checkpoints in {}",
            addrs.len(),
            addrs.join(","),
            args.replicas,
            if args.sender_log == SenderLogKind::File {
                format!("in {}", root.display())
            } else {
                "in memory".to_string()
            } + &format!(
                " (full segments move to {})",
                spill_root.as_ref().unwrap_or(&root).display()
            ),
            root.display()
        );
        let event_loggers = self.parse_logger_addrs(&addrs)?;
        // The user's settings (tuning knobs such as VPML_LOG_SEGMENT_SIZE,
        // or VPML_CHECKPOINT_COPIES=loggers on one host), read here in
        // the launcher's environment and handed on with the rest.
        let user = ProtocolSettings::user_knobs_from_env().map_err(Error::Settings)?;
        self.settings = ProtocolSettings {
            name: ProtocolName::Pessimist,
            event_loggers,
            replicas: Some(args.replicas),
            log_dir: Some(root),
            sender_log: match args.sender_log {
                SenderLogKind::File => SenderLogMode::File,
                SenderLogKind::Memory => SenderLogMode::Memory,
            },
            // This launcher restarts the loggers it started from their
            // files when they die.
            loggers_restarted: user.loggers_restarted || !self.loggers.is_empty(),
            // A host may be lost with the files on it: checkpoints (and
            // the log records they keep for peers) are copied to the
            // loggers, for a restart on another host.
            checkpoint_copies: user.checkpoint_copies
                || args.hosts.is_some()
                || args.hostfile.is_some(),
            // A recording keeps every event and message (no garbage
            // collection after checkpoints): a replay starts from the
            // beginning.
            keep_logs: user.keep_logs || args.record.is_some(),
            segment_size: user.segment_size,
            sender_log_limit: args.sender_log_limit,
            spill_dir: spill_root,
            events_eager: user.events_eager,
        };
        Ok(())
    }

    /// Where the global checkpoints' copies are (a coordinated job across
    /// hosts): the data directories of the loggers this launcher started.
    pub(crate) fn copy_stores(&self, job_id: &str) -> Option<crate::supervise::CopyStores> {
        (self.settings.name == ProtocolName::Coordinated && self.settings.checkpoint_copies).then(
            || crate::supervise::CopyStores {
                logger_dirs: self.loggers.iter().map(|l| l.data_dir.clone()).collect(),
                job: job_id.to_string(),
            },
        )
    }

    /// Stop the loggers this launcher started and remove the temporary
    /// log directory.
    pub(crate) fn stop(&mut self) {
        // Exits from now on are the ones asked for.
        self.tx = None;
        for l in self.loggers.iter().filter(|l| l.watcher.is_some()) {
            // Our child, alive or a zombie: it is reaped (by this function
            // or `restart_logger`) only after its watcher is taken.
            crate::process::signal(l.pid as i32, Signal::TERM);
        }
        for l in &mut self.loggers {
            if let Some(w) = l.watcher.take() {
                let _ = w.join();
                crate::process::reap(l.pid as i32);
            }
        }
        self.loggers.clear();
        for d in std::mem::take(&mut self.remove_dirs) {
            if let Err(e) = std::fs::remove_dir_all(&d) {
                eprintln!("vpml run: cannot remove {}: {e}", d.display());
            }
        }
    }

    /// Start event logger `index` on `listener`, in `data_dir`.
    fn start_logger(
        &mut self,
        index: usize,
        data_dir: PathBuf,
        listener: std::sync::Arc<std::net::TcpListener>,
    ) -> Result<(), LoggerStartError> {
        let incarnation = self.loggers.get(index).map_or(0, |l| l.incarnation + 1);
        let point = self
            .fault_points
            .point_for(Target::Logger(index), incarnation);
        let (child, addr) = start_logger(&data_dir, &self.tokens, &listener, point)?;
        let pid = child.id();
        // Reaped by `stop` or `restart_logger` only, never before.
        drop(child);
        let tx = self.tx.clone();
        let watcher = std::thread::spawn(move || {
            let status = crate::process::wait_exit_unreaped(pid);
            if let Some(tx) = tx {
                let _ = tx.send(Event::LoggerExited { index, pid, status });
            }
        });
        let started = StartedLogger {
            pid,
            watcher: Some(watcher),
            addr,
            listener,
            data_dir,
            incarnation,
        };
        match self.loggers.get_mut(index) {
            Some(l) => *l = started,
            None => self.loggers.push(started),
        }
        Ok(())
    }

    /// SIGKILL to event logger `index` (testing aid).
    pub(crate) fn kill_logger(&self, index: usize) {
        if let Some(l) = self.loggers.get(index).filter(|l| l.watcher.is_some()) {
            // Our child, alive or a zombie (reaped only after its watcher
            // is taken).
            crate::process::signal(l.pid as i32, Signal::KILL);
        }
    }

    /// Process `pid` of logger `index` exited with `status` while the job
    /// runs: start it again on its address, from its files. Returns the
    /// warning to print (`None`: a process already replaced).
    pub(crate) fn restart_logger(
        &mut self,
        index: usize,
        pid: u32,
        status: ExitStatus,
    ) -> Result<Option<String>, Error> {
        let Some(l) = self.loggers.get_mut(index) else {
            return Ok(None);
        };
        if l.pid != pid || self.tx.is_none() {
            return Ok(None);
        }
        if let Some(w) = l.watcher.take() {
            let _ = w.join();
            crate::process::reap(pid as i32);
        }
        let (addr, dir, listener) = (
            l.addr.clone(),
            l.data_dir.clone(),
            std::sync::Arc::clone(&l.listener),
        );
        let how = match status.signal() {
            Some(sig) => format!("killed by signal {sig}"),
            None => format!("exit status {}", status.code().unwrap_or(-1)),
        };
        self.start_logger(index, dir.clone(), listener)
            .map_err(|source| Error::RestartLogger {
                index,
                addr: addr.clone(),
                how: how.clone(),
                source,
            })?;
        let incarnation = self.loggers[index].incarnation;
        Ok(Some(format!(
            "warning: event logger {index} at {addr} died ({how}); started it again from {} (incarnation {incarnation}); the ranks send it what it lacks",
            dir.display()
        )))
    }
}

/// Write a file only its owner can read (it holds the job token).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// Prefix of temporary log directories: `<prefix><launcher pid>-<job>`.
const TEMP_LOG_PREFIX: &str = "vpml-logs-";
/// Name prefix of the spill directories `vpml run` makes (and removes).
const TEMP_SPILL_PREFIX: &str = "vpml-spill-";

/// Where sender logs go by default: memory-backed `/dev/shm` when present
/// (the log only has to survive a process crash, and page-cache writeback
/// to a disk would throttle every large send), else the temporary
/// directory. Directories left by launchers that were killed are removed
/// first, with a line each (they may hold much memory).
fn default_log_root(job_id: &str) -> PathBuf {
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    remove_stale_dirs(&base, TEMP_LOG_PREFIX, true);
    base.join(format!("{TEMP_LOG_PREFIX}{}-{job_id}", std::process::id()))
}

/// A new directory for the segments sender logs move out of memory, on a
/// disk: under $TMPDIR when set (batch systems point it at a node's local
/// disk), else /var/tmp (a disk by convention, where /tmp may be memory).
/// Named after this host too: `$TMPDIR` may be shared by hosts, and only
/// this host's launcher processes can be told dead or alive.
fn default_spill_root(job_id: &str) -> PathBuf {
    let base = match std::env::var_os("TMPDIR") {
        Some(t) if !t.is_empty() => PathBuf::from(t),
        _ if Path::new("/var/tmp").is_dir() => PathBuf::from("/var/tmp"),
        _ => std::env::temp_dir(),
    };
    let host = rustix::system::uname();
    let host = host.nodename().to_string_lossy();
    let prefix = format!("{TEMP_SPILL_PREFIX}{host}-");
    remove_stale_dirs(&base, &prefix, true);
    base.join(format!("{prefix}{}-{job_id}", std::process::id()))
}

/// A warning when `dir` is memory (tmpfs): segments moved there still
/// take memory, so the sender log's limit bounds nothing.
fn warn_if_memory(dir: &Path) {
    if let Ok(fs) = rustix::fs::statfs(dir)
        && fs.f_type == libc::TMPFS_MAGIC
    {
        eprintln!(
            "vpml run: warning: sender logs move full segments to {}, which is memory (tmpfs): --sender-log-limit bounds nothing there; give --spill-dir a directory on a disk",
            dir.display()
        );
    }
}

/// Remove the `<prefix><pid>-*` directories in `base` whose launcher no
/// longer runs (it was killed with SIGKILL), and say so if `say`.
pub(crate) fn remove_stale_dirs(base: &Path, prefix: &str, say: bool) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
            .filter(|&p| p > 0)
            .and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        // Signal 0 only checks whether the process exists (EPERM: it does,
        // as another user's).
        let alive = matches!(
            rustix::process::test_kill_process(pid),
            Ok(()) | Err(rustix::io::Errno::PERM)
        );
        if !alive {
            match std::fs::remove_dir_all(e.path()) {
                Ok(()) if say => eprintln!(
                    "vpml: removed {}, left by a launcher that was killed",
                    e.path().display()
                ),
                Ok(()) => {}
                // (Another launcher swept it first.)
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => tracing::warn!("cannot remove stale {}: {err}", e.path().display()),
            }
        }
    }
}

/// Start `vpml event-logger` on `listener` (inherited as descriptor 3) and
/// read the address it printed;
/// `fault_point`: armed in it (testing aid). Started again after a crash,
/// it cuts a record its predecessor tore (never acknowledged) and refuses
/// to start over any other damage, naming the file and offset.
fn start_logger(
    data_dir: &Path,
    tokens: &Path,
    listener: &std::net::TcpListener,
    fault_point: Option<&str>,
) -> Result<(Child, String), LoggerStartError> {
    use std::os::fd::{AsRawFd, BorrowedFd};
    let fd = listener.as_raw_fd();
    let exe = std::env::current_exe().map_err(LoggerStartError::CurrentExe)?;
    let parent = std::process::id();
    let mut cmd = Command::new(exe);
    cmd.arg("event-logger")
        .args(["--listen-fd", "3"])
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--token-file")
        .arg(tokens)
        .env_remove(vpml_fault_points::ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    if let Some(p) = fault_point {
        cmd.env(vpml_fault_points::ENV, p);
    }
    // SAFETY: only raw system calls (fcntl or dup2, then those of
    // `child_setup`) between fork and exec; `fd` is the listener, open in
    // this process (and so in the child) while `listener` is borrowed.
    unsafe {
        cmd.pre_exec(move || {
            // The listener becomes descriptor 3, open across exec.
            if fd == 3 {
                let listener = BorrowedFd::borrow_raw(fd);
                rustix::io::fcntl_setfd(listener, rustix::io::FdFlags::empty())?;
            } else if libc::dup2(fd, 3) < 0 {
                // Raw libc: rustix's dup2 replaces an `OwnedFd`, and
                // descriptor 3 need not be open here.
                return Err(std::io::Error::last_os_error());
            }
            crate::process::child_setup(parent, None)
        });
    }
    let mut child = cmd.spawn().map_err(LoggerStartError::Spawn)?;
    let mut line = String::new();
    // No stdout or a failed read: as if it printed nothing.
    let read = child
        .stdout
        .take()
        .and_then(|out| BufReader::new(out).read_line(&mut line).ok());
    match read {
        Some(n) if n > 0 && !line.trim().is_empty() => Ok((child, line.trim().to_string())),
        _ => {
            let _ = child.kill();
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            Err(LoggerStartError::NoAddress { status })
        }
    }
}

impl Drop for ProtocolSetup {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Create `dir` and its parents, the last one private (mode 0700).
fn create_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| Error::CreateLogDir {
            path: dir.to_path_buf(),
            source,
        })
}
