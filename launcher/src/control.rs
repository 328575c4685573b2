//! `vpml checkpoint [JOB]`: ask a running job for a global checkpoint
//! (`--protocol coordinated`), from another shell of the same user.
//!
//! Every `vpml run` writes a *job file* while it runs:
//! `$XDG_RUNTIME_DIR/vpml/jobs/<job id>` (else `/tmp/vpml-<uid>/jobs/`),
//! in a directory only its user may enter, holding the address of the
//! job's key/value service, the job's token and the launcher's pid. The
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
    /// needed only when this user runs more than one job.
    pub job: Option<String>,
}

/// Where this user's running jobs leave their files.
fn jobs_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| Path::new(d).is_dir()) {
        Some(d) => PathBuf::from(d).join("vpml").join("jobs"),
        None => std::env::temp_dir()
            .join(format!("vpml-{}", rustix::process::getuid().as_raw()))
            .join("jobs"),
    }
}

/// A running job's file, removed when dropped (at the job's end).
pub(crate) struct JobFile(PathBuf);

impl Drop for JobFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Write job `job_id`'s file: where `vpml checkpoint` reaches it.
pub(crate) fn register(job_id: &str, kv_addr: &str, token: &str) -> std::io::Result<JobFile> {
    let dir = jobs_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    check_private(&dir)?;
    let path = dir.join(job_id);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    f.write_all(format!("{kv_addr} {token} {}\n", std::process::id()).as_bytes())?;
    Ok(JobFile(path))
}

/// `dir` must be this user's and closed to others: the token is in it.
fn check_private(dir: &Path) -> std::io::Result<()> {
    let m = std::fs::metadata(dir)?;
    if m.uid() != rustix::process::getuid().as_raw() || m.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not private to this user",
            dir.display()
        )));
    }
    Ok(())
}

/// A job file read back.
struct Job {
    id: String,
    kv_addr: String,
    token: String,
}

/// The running job `wanted` names (or the only one): its file read back.
fn find_job(wanted: Option<&str>) -> Result<Job, String> {
    let dir = jobs_dir();
    check_private(&dir).map_err(|e| format!("no running job found ({}: {e})", dir.display()))?;
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut running = Vec::new();
    for e in entries.flatten() {
        let id = e.file_name().to_string_lossy().into_owned();
        let text = match std::fs::read_to_string(e.path()) {
            Ok(t) => t,
            Err(_) => continue,
        };
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [kv_addr, token, pid] = fields[..] else {
            continue;
        };
        // A launcher killed with SIGKILL leaves its file: not running.
        let alive = pid
            .parse::<i32>()
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
        if !alive {
            let _ = std::fs::remove_file(e.path());
            continue;
        }
        if wanted.is_none_or(|w| id.starts_with(w)) {
            running.push(Job {
                id,
                kv_addr: kv_addr.to_string(),
                token: token.to_string(),
            });
        }
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
fn ask(job: &Job) -> Result<u32, String> {
    let stream = TcpStream::connect(&job.kv_addr).map_err(|e| format!("{}: {e}", job.kv_addr))?;
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
            .map_err(|e| e.to_string())?;
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
    let job = match find_job(args.job.as_deref()) {
        Ok(j) => j,
        Err(why) => {
            eprintln!("vpml checkpoint: {why}");
            return ExitCode::from(1);
        }
    };
    match ask(&job) {
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
