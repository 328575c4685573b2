//! `vpml checkpoint [JOB]`: ask a running job for a global checkpoint
//! (`--protocol coordinated`), from another shell of the same user.
//!
//! Every `vpml run` writes a *job file* while it runs:
//! `$XDG_RUNTIME_DIR/vpml/jobs/<job id>` (else `/tmp/vpml-<uid>/jobs/`),
//! in directories only its user may enter (checked, not followed if
//! links), holding the address of the job's key/value service, the job's
//! token, the launcher's pid and the protocol. The
//! command reads it, says `HELLO 1 <token> control` and `CHECKPOINT`, and
//! waits for the answer: the number of the global checkpoint once it is
//! complete, or why it was not taken.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vpml_pml::bootstrap::KV_PROTOCOL_VERSION;

/// `vpml checkpoint`'s arguments.
#[derive(clap::Args, Debug)]
pub struct CheckpointArgs {
    /// The job's id, or the start of it (as `vpml run -v` prints it);
    /// needed only when this user runs more than one job with
    /// `--protocol coordinated`.
    pub job: Option<String>,
    /// Give up waiting after this many seconds (the request stays: the
    /// ranks take it at their next checkpoint call).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

/// This user's directories for job files: `vpml/` and `vpml/jobs/` under
/// `$XDG_RUNTIME_DIR`, else `vpml-<uid>/` and its `jobs/` in the
/// temporary directory.
fn job_dirs() -> [PathBuf; 2] {
    let base = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| Path::new(d).is_dir()) {
        Some(d) => PathBuf::from(d).join("vpml"),
        None => std::env::temp_dir().join(format!("vpml-{}", rustix::process::getuid().as_raw())),
    };
    let jobs = base.join("jobs");
    [base, jobs]
}

/// The directory of job files, checked private to this user (each level
/// a real directory of ours that only we may enter: the tokens are in
/// it), and created so if `create`.
fn jobs_dir(create: bool) -> std::io::Result<PathBuf> {
    let dirs = job_dirs();
    for d in &dirs {
        if create {
            match std::fs::DirBuilder::new().mode(0o700).create(d) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        let m = std::fs::symlink_metadata(d)?;
        if !m.is_dir() || m.uid() != rustix::process::getuid().as_raw() || m.mode() & 0o077 != 0 {
            return Err(std::io::Error::other(format!(
                "{} is not a directory private to this user",
                d.display()
            )));
        }
    }
    let [_, jobs] = dirs;
    Ok(jobs)
}

/// A running job's file, removed when dropped (at the job's end).
pub(crate) struct JobFile(PathBuf);

impl Drop for JobFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Write job `job_id`'s file: where `vpml checkpoint` reaches it.
pub(crate) fn register(
    job_id: &str,
    kv_addr: &str,
    token: &str,
    protocol: &str,
) -> std::io::Result<JobFile> {
    let path = jobs_dir(true)?.join(job_id);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    f.write_all(format!("{kv_addr} {token} {} {protocol}\n", std::process::id()).as_bytes())?;
    Ok(JobFile(path))
}

/// A job file read back.
struct Job {
    id: String,
    kv_addr: String,
    token: String,
    protocol: String,
}

/// Longest job file read.
const MAX_JOB_FILE: u64 = 4096;

/// Job `id`'s file at `path`, if it is one of a running launcher (a
/// launcher killed with SIGKILL leaves its file: removed here).
fn read_job(id: String, path: &Path) -> Option<Job> {
    let is_id = id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit());
    let m = std::fs::symlink_metadata(path).ok()?;
    if !is_id || !m.is_file() || m.len() > MAX_JOB_FILE {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let fields: Vec<&str> = text.split_whitespace().collect();
    let [kv_addr, token, pid, protocol] = fields[..] else {
        return None;
    };
    let pid = rustix::process::Pid::from_raw(pid.parse().ok()?)?;
    match rustix::process::test_kill_process(pid) {
        Ok(()) => Some(Job {
            id,
            kv_addr: kv_addr.to_string(),
            token: token.to_string(),
            protocol: protocol.to_string(),
        }),
        Err(rustix::io::Errno::SRCH) => {
            let _ = std::fs::remove_file(path);
            None
        }
        // Not ours to judge (another user's pid now).
        Err(_) => None,
    }
}

/// The running job `wanted` names, else the only one (or the only one
/// with coordinated checkpointing).
fn find_job(wanted: Option<&str>) -> Result<Job, String> {
    let dir = jobs_dir(false).map_err(|e| format!("no running job found ({e})"))?;
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut running: Vec<Job> = entries
        .flatten()
        .filter_map(|e| read_job(e.file_name().to_string_lossy().into_owned(), &e.path()))
        .filter(|j| wanted.is_none_or(|w| j.id.starts_with(w)))
        .collect();
    if running.len() > 1 && wanted.is_none() {
        running.retain(|j| j.protocol == "coordinated");
    }
    match running.len() {
        1 => Ok(running.remove(0)),
        0 => Err(match wanted {
            Some(w) => format!("no running job of this user has an id starting {w:?}"),
            None => "no running job of this user".into(),
        }),
        _ => {
            let ids: Vec<&str> = running.iter().map(|j| j.id.as_str()).collect();
            Err(format!(
                "{} running jobs match ({}): name one",
                ids.len(),
                ids.join(", ")
            ))
        }
    }
}

/// Ask `job` for a global checkpoint and wait for the answer.
fn ask(job: &Job, timeout: Option<std::time::Duration>) -> Result<u32, String> {
    let stream = TcpStream::connect(&job.kv_addr).map_err(|e| format!("{}: {e}", job.kv_addr))?;
    stream
        .set_read_timeout(timeout)
        .map_err(|e| e.to_string())?;
    let mut out = stream.try_clone().map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut answer = |out: &mut TcpStream, send: &str| -> Result<String, String> {
        out.write_all(send.as_bytes()).map_err(|e| e.to_string())?;
        line.clear();
        reader
            .by_ref()
            .take(4096)
            .read_line(&mut line)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    "no answer within --timeout (the request stays: the ranks take it at their next checkpoint call)".to_string()
                }
                _ => e.to_string(),
            })?;
        Ok(line.trim_end().to_string())
    };
    let hello = answer(
        &mut out,
        &format!("HELLO {KV_PROTOCOL_VERSION} {} control\n", job.token),
    )?;
    if hello != "OK" {
        return Err(format!("the launcher said {hello:?}"));
    }
    let reply = answer(&mut out, "CHECKPOINT\n")?;
    if let Some(index) = reply.strip_prefix("OK ") {
        return index
            .parse()
            .map_err(|_| format!("the launcher said {reply:?}"));
    }
    match reply.strip_prefix("ERR ") {
        Some(why) => Err(format!("refused: {why}")),
        None if reply.is_empty() => Err("the job ended".into()),
        None => Err(format!("the launcher said {reply:?}")),
    }
}

/// `vpml checkpoint`: exit status 0 once the checkpoint is complete.
pub fn checkpoint_main(args: CheckpointArgs) -> ExitCode {
    let timeout = match args.timeout {
        None => None,
        Some(t) => match crate::seconds(t).filter(|d| !d.is_zero()) {
            Some(d) => Some(d),
            None => {
                eprintln!(
                    "vpml checkpoint: --timeout must be a positive number of seconds up to {}, not {t:?}",
                    crate::MAX_SECONDS
                );
                return ExitCode::from(1);
            }
        },
    };
    let job = match find_job(args.job.as_deref()) {
        Ok(j) => j,
        Err(why) => {
            eprintln!("vpml checkpoint: {why}");
            return ExitCode::from(1);
        }
    };
    match ask(&job, timeout) {
        Ok(index) => {
            println!(
                "vpml checkpoint: job {}: global checkpoint {index} is complete",
                job.id
            );
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("vpml checkpoint: job {}: {why}", job.id);
            ExitCode::from(1)
        }
    }
}
