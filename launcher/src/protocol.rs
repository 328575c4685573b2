//! Setting up the fault-tolerance protocol of a job: for `pessimist`, the
//! sender-log directory and the event loggers (started here as `vpml
//! event-logger` processes, or given with `--event-logger-addrs`).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::RunArgs;

/// Environment variables of the protocol layer (see `vpml-vprotocol`).
const PROTOCOL: &str = "VPML_PROTOCOL";
const EVENT_LOGGERS: &str = "VPML_EVENT_LOGGERS";
const REPLICAS: &str = "VPML_REPLICAS";
const LOG_DIR: &str = "VPML_LOG_DIR";

/// A job's protocol: what the ranks are told and what must be stopped and
/// removed afterwards.
pub(crate) struct ProtocolSetup {
    /// Environment for every rank.
    pub envs: Vec<(String, String)>,
    /// The one info line printed per job.
    pub info: String,
    loggers: Vec<Child>,
    remove_dir: Option<PathBuf>,
}

/// The job token to use: from `--token-file` (the event logger's format,
/// `JOB TOKEN` or `* TOKEN` lines; the first line's token) or fresh.
pub(crate) fn job_token(args: &RunArgs, fresh: String) -> Result<String, String> {
    let Some(path) = &args.token_file else {
        return Ok(fresh);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read --token-file {}: {e}", path.display()))?;
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            let (_, tok) = (w.next()?, w.next()?);
            Some(tok.to_string())
        })
        .ok_or_else(|| format!("--token-file {}: no `JOB TOKEN` line", path.display()))
}

impl ProtocolSetup {
    /// Prepare the protocol named by `--protocol`.
    pub(crate) fn start(
        args: &RunArgs,
        job_id: &str,
        token: &str,
    ) -> Result<ProtocolSetup, String> {
        match args.protocol.as_str() {
            "none" => Ok(ProtocolSetup {
                envs: vec![(PROTOCOL.into(), "none".into())],
                info: "protocol none".into(),
                loggers: Vec::new(),
                remove_dir: None,
            }),
            "pessimist" => Self::pessimist(args, job_id, token),
            other => Err(format!(
                "unknown protocol {other:?} (known: none, pessimist)"
            )),
        }
    }

    fn pessimist(args: &RunArgs, job_id: &str, token: &str) -> Result<ProtocolSetup, String> {
        if args.replicas == 0 {
            return Err("--replicas must be at least 1".into());
        }
        let (root, remove_dir) = match &args.log_dir {
            Some(d) => (d.clone(), None),
            None => {
                let d = default_log_root(job_id);
                (d.clone(), Some(d))
            }
        };
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&root)
                .map_err(|e| format!("cannot create the log directory {}: {e}", root.display()))?;
        }
        let mut setup = ProtocolSetup {
            envs: Vec::new(),
            info: String::new(),
            loggers: Vec::new(),
            remove_dir,
        };
        let addrs: Vec<String> = if let Some(list) = &args.event_logger_addrs {
            list.split(',')
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .collect()
        } else {
            if args.event_loggers == 0 {
                return Err("--event-loggers must be at least 1".into());
            }
            let tokens = root.join("logger-tokens");
            write_private(&tokens, &format!("{job_id} {token}\n"))
                .map_err(|e| format!("cannot write {}: {e}", tokens.display()))?;
            let mut addrs = Vec::new();
            for i in 0..args.event_loggers {
                match start_logger(&root.join(format!("logger-{i}")), &tokens, &args.bind) {
                    Ok((child, addr)) => {
                        setup.loggers.push(child);
                        addrs.push(addr);
                    }
                    Err(e) => {
                        setup.stop();
                        return Err(format!("cannot start event logger {i}: {e}"));
                    }
                }
            }
            addrs
        };
        if args.replicas > addrs.len() {
            setup.stop();
            return Err(format!(
                "--replicas {} needs at least as many event loggers (have {})",
                args.replicas,
                addrs.len()
            ));
        }
        setup.info = format!(
            "protocol pessimist: {} event logger(s) at {}, {} replica(s), sender logs {}, checkpoints in {}",
            addrs.len(),
            addrs.join(","),
            args.replicas,
            if args.sender_log == "file" {
                format!("in {}", root.display())
            } else {
                "in memory".to_string()
            },
            root.display()
        );
        setup.envs = vec![
            (PROTOCOL.into(), "pessimist".into()),
            (EVENT_LOGGERS.into(), addrs.join(",")),
            (REPLICAS.into(), args.replicas.to_string()),
            (LOG_DIR.into(), root.display().to_string()),
            ("VPML_SENDER_LOG".into(), args.sender_log.clone()),
        ];
        if args.record.is_some() {
            // A recording keeps every event and message (no garbage
            // collection after checkpoints): a replay starts from the
            // beginning.
            setup.envs.push(("VPML_KEEP_LOGS".into(), "1".into()));
        }
        Ok(setup)
    }

    /// Stop the loggers this launcher started and remove the temporary
    /// log directory.
    pub(crate) fn stop(&mut self) {
        for l in &mut self.loggers {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(l.id() as i32, libc::SIGTERM) };
        }
        for mut l in self.loggers.drain(..) {
            let _ = l.wait();
        }
        if let Some(d) = self.remove_dir.take()
            && let Err(e) = std::fs::remove_dir_all(&d)
        {
            eprintln!("vpml run: cannot remove {}: {e}", d.display());
        }
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

/// Where sender logs go by default: memory-backed `/dev/shm` when present
/// (the log only has to survive a process crash, and page-cache writeback
/// to a disk would throttle every large send), else the temporary
/// directory. Directories left by launchers that were killed are removed
/// first.
fn default_log_root(job_id: &str) -> PathBuf {
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    remove_stale_dirs(&base, TEMP_LOG_PREFIX);
    base.join(format!("{TEMP_LOG_PREFIX}{}-{job_id}", std::process::id()))
}

/// Remove the `<prefix><pid>-*` directories in `base` whose launcher no
/// longer runs (it was killed with SIGKILL), and say so.
pub(crate) fn remove_stale_dirs(base: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            match std::fs::remove_dir_all(e.path()) {
                Ok(()) => eprintln!(
                    "vpml: removed {}, left by a launcher that was killed",
                    e.path().display()
                ),
                Err(err) => tracing::warn!("cannot remove stale {}: {err}", e.path().display()),
            }
        }
    }
}

/// Start `vpml event-logger` on loopback and read the address it printed.
fn start_logger(data_dir: &Path, tokens: &Path, bind: &str) -> Result<(Child, String), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the vpml binary: {e}"))?;
    let parent = std::process::id();
    let mut cmd = Command::new(exe);
    cmd.arg("event-logger")
        .arg("--listen")
        .arg(format!("{bind}:0"))
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--token-file")
        .arg(tokens)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || crate::child_setup(parent, None));
    }
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let mut line = String::new();
    let read = child
        .stdout
        .take()
        .ok_or_else(|| "no stdout".to_string())
        .and_then(|out| {
            BufReader::new(out)
                .read_line(&mut line)
                .map_err(|e| e.to_string())
        });
    match read {
        Ok(n) if n > 0 && !line.trim().is_empty() => Ok((child, line.trim().to_string())),
        _ => {
            let _ = child.kill();
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            Err(format!("it exited ({status}) before printing its address"))
        }
    }
}

impl Drop for ProtocolSetup {
    fn drop(&mut self) {
        self.stop();
    }
}
