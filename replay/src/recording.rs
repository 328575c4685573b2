//! Recordings (`vpml run --record`) and `vpml replay`.
//!
//! A recording is a directory holding what the pessimist protocol wrote
//! during the job — every rank's sender log (`rank-<r>/seg-*.vlog`, kept
//! as files), the event loggers' data (`logger-<i>/`), the checkpoints —
//! and a `manifest` of `key value` lines: format version, job id, world
//! size, program and arguments (hex), protocol, and per rank the counters
//! it published at finalize. Without a directory, recordings go under the
//! user's data directory (`$XDG_DATA_HOME/vpml/recordings/`, else
//! `~/.local/share/vpml/recordings/`) with a `latest` link, as rr does.
//!
//! `vpml run --record` calls [`prepare`] before the job and [`finish`]
//! with its [`Manifest`] after it. `vpml replay [DIR] --rank R`
//! ([`replay_main`]) starts rank R's program alone, with the `replay`
//! protocol ([`crate::replayer`]): no launcher, no peers.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use vpml_pml::config::var as env;
use vpml_vprotocol::ProtocolName;

use crate::{Error, ManifestError};

/// Manifest format version.
pub(crate) const FORMAT: u32 = 1;

/// Where recordings go by default.
pub(crate) fn default_root() -> Result<PathBuf, Error> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .ok_or(Error::NoDataHome)?;
    Ok(data.join("vpml").join("recordings"))
}

/// The directory a `--record` run writes to (created, empty), and whether
/// it is under the default root (then `latest` points to it). An empty
/// `choice` or `@default` asks for a new directory under the default root.
pub fn prepare(choice: &Path) -> Result<(PathBuf, bool), Error> {
    let (dir, default) = if choice.as_os_str().is_empty() || choice == Path::new("@default") {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        (
            default_root()?.join(format!("{stamp}-{}", std::process::id())),
            true,
        )
    } else {
        (choice.to_path_buf(), false)
    };
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map_err(|source| Error::Read {
                path: dir.clone(),
                source,
            })?
            .next()
            .is_some()
    {
        return Err(Error::RecordingNotEmpty(dir));
    }
    std::fs::create_dir_all(&dir).map_err(|source| Error::Create {
        path: dir.clone(),
        source,
    })?;
    Ok((dir, default))
}

/// What a manifest says.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The job id.
    pub job: String,
    /// Ranks of the job.
    pub size: usize,
    /// The program, as an absolute path where it could be resolved.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The protocol it ran with.
    pub protocol: String,
    /// Per rank: the counters it published (`name=value ...`), if any.
    pub ranks: Vec<Option<String>>,
    /// Per rank: how its last process ended (`exit 0`, `signal 9`, …).
    pub ended: Vec<String>,
}

impl Manifest {
    fn encode(&self) -> String {
        let mut s = format!("format {FORMAT}\njob {}\nsize {}\n", self.job, self.size);
        s += &format!("program {}\n", hex::encode(self.program.as_bytes()));
        for a in &self.args {
            s += &format!("arg {}\n", hex::encode(a.as_bytes()));
        }
        s += &format!("protocol {}\n", self.protocol);
        for (r, c) in self.ranks.iter().enumerate() {
            match c {
                Some(c) => s += &format!("rank {r} {}\n", c.replace(',', " ")),
                None => s += &format!("rank {r} (no counters: it did not finalize)\n"),
            }
        }
        for (r, e) in self.ended.iter().enumerate() {
            s += &format!("ended {r} {e}\n");
        }
        s
    }

    fn decode(text: &str, path: &Path) -> Result<Manifest, Error> {
        let bad = |why: ManifestError| Error::Manifest {
            path: path.to_path_buf(),
            why,
        };
        let mut m = Manifest {
            job: String::new(),
            size: 0,
            program: OsString::new(),
            args: Vec::new(),
            protocol: String::new(),
            ranks: Vec::new(),
            ended: Vec::new(),
        };
        let mut format = None;
        for (i, line) in text.lines().enumerate() {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            let field = |v: &str| {
                bad(ManifestError::BadValue {
                    line: i + 1,
                    key: key.to_string(),
                    value: v.to_string(),
                })
            };
            match key {
                "format" => format = Some(value.parse::<u32>().map_err(|_| field(value))?),
                "job" => m.job = value.to_string(),
                "size" => m.size = value.parse().map_err(|_| field(value))?,
                "program" => {
                    m.program = OsString::from_vec(hex::decode(value).map_err(|_| field(value))?)
                }
                "arg" => m.args.push(OsString::from_vec(
                    hex::decode(value).map_err(|_| field(value))?,
                )),
                "protocol" => m.protocol = value.to_string(),
                "ended" => {
                    let (_, how) = value.split_once(' ').unwrap_or((value, ""));
                    m.ended.push(how.to_string());
                }
                "rank" => {
                    let (_, counters) = value.split_once(' ').unwrap_or((value, ""));
                    m.ranks.push(
                        (!counters.starts_with("(no counters")).then(|| counters.to_string()),
                    );
                }
                _ => {
                    return Err(bad(ManifestError::UnknownKey {
                        line: i + 1,
                        key: key.to_string(),
                    }));
                }
            }
        }
        match format {
            Some(FORMAT) => {}
            Some(v) => return Err(bad(ManifestError::Version(v))),
            None => return Err(bad(ManifestError::NoFormat)),
        }
        if m.size == 0 || m.job.is_empty() || m.program.is_empty() {
            return Err(bad(ManifestError::Incomplete));
        }
        Ok(m)
    }
}

/// Write the manifest of a finished recording in `dir` (and, when
/// `default` — the directory is under the default root — point `latest`
/// at it).
pub fn finish(dir: &Path, default: bool, m: &Manifest) -> Result<(), Error> {
    let path = dir.join("manifest");
    std::fs::write(&path, m.encode()).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    if default && let Some(root) = dir.parent() {
        let link = root.join("latest");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(dir, &link).map_err(|source| Error::Link {
            path: link.clone(),
            source,
        })?;
    }
    eprintln!("vpml run: recorded to {}", dir.display());
    Ok(())
}

/// Options of `vpml replay`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The recording (default: the latest under the user's data directory).
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The rank to replay.
    #[arg(long, value_name = "R")]
    pub rank: usize,
    /// Stop (SIGSTOP) when event N is about to be replayed, for a debugger
    /// to attach.
    #[arg(long, value_name = "N")]
    pub until: Option<u64>,
    /// Run the rank under gdb.
    #[arg(long)]
    pub gdb: bool,
    /// Run the rank under this debugger command instead (after `--`).
    #[arg(last = true, value_name = "DEBUGGER")]
    pub debugger: Vec<OsString>,
}

/// How `vpml replay` lets an MPI C program load vpml's MPI library, as
/// `vpml run` does (the launcher knows how; this crate cannot depend on
/// it): given the rank's command, the program and a name for a temporary
/// directory, it sets the command's loader path if the program is an MPI
/// program and returns the directory to remove once the rank is done.
pub type MpiSetup = fn(
    &mut Command,
    &Path,
    &str,
) -> Result<Option<PathBuf>, Box<dyn std::error::Error + Send + Sync>>;

/// `vpml replay`: exit status of the replayed rank (1 on divergence).
pub fn replay_main(args: ReplayArgs, mpi: MpiSetup) -> ExitCode {
    match replay(&args, mpi) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("vpml replay: {e}");
            ExitCode::from(1)
        }
    }
}

/// The recording `dir`, or the latest under the default directory.
pub(crate) fn resolve(dir: Option<&Path>) -> Result<PathBuf, Error> {
    match dir {
        Some(d) => Ok(d.to_path_buf()),
        None => {
            let latest = default_root()?.join("latest");
            std::fs::canonicalize(&latest).map_err(|source| Error::NoLatest {
                path: latest.clone(),
                source,
            })
        }
    }
}

/// Read the manifest of the recording in `dir`.
pub(crate) fn read_manifest(dir: &Path) -> Result<Manifest, Error> {
    let path = dir.join("manifest");
    let text = std::fs::read_to_string(&path).map_err(|source| Error::NotARecording {
        path: path.clone(),
        source,
    })?;
    Manifest::decode(&text, &path)
}

/// Every rank's sender log holds as many messages as the rank said it
/// sent (a truncated or lost file would otherwise surface later, as a
/// wait for a message that never comes).
fn check_complete(dir: &Path, m: &Manifest) -> Result<(), Error> {
    for (r, counters) in m.ranks.iter().enumerate() {
        let Some(sent) = counters.as_deref().and_then(|c| {
            c.split_whitespace()
                .find_map(|kv| kv.strip_prefix("messages_sent=")?.parse::<usize>().ok())
        }) else {
            continue;
        };
        let rank_dir = dir.join(format!("rank-{r}"));
        let log = vpml_sender_log::SenderLog::open_read_only(&rank_dir)?;
        let held: usize = log.destinations().iter().map(|&d| log.records_to(d)).sum();
        if held < sent {
            return Err(Error::Incomplete {
                dir: rank_dir,
                held,
                rank: r,
                sent,
            });
        }
    }
    Ok(())
}

fn replay(args: &ReplayArgs, mpi: MpiSetup) -> Result<u8, Error> {
    let dir = resolve(args.dir.as_deref())?;
    let m = read_manifest(&dir)?;
    check_complete(&dir, &m)?;
    if args.rank >= m.size {
        return Err(Error::RankOutsideRecording {
            rank: args.rank,
            size: m.size,
        });
    }
    let mut cmd = if args.gdb || !args.debugger.is_empty() {
        let mut parts: Vec<OsString> = if args.debugger.is_empty() {
            vec!["gdb".into(), "--args".into()]
        } else {
            args.debugger.clone()
        };
        let first = parts.remove(0);
        let mut c = Command::new(first);
        c.args(parts).arg(&m.program).args(&m.args);
        c
    } else {
        let mut c = Command::new(&m.program);
        c.args(&m.args);
        c
    };
    // Nothing of a job it might run inside (or a stale variable of the
    // user's shell) reaches the replayed rank.
    for var in [
        env::KV_ADDR,
        env::MAILBOX_FDS,
        env::JOB_PAGE_FD,
        env::TOKEN,
        env::REPLAY_UNTIL,
        env::OUTPUT_MARKS,
        env::CHAOS,
    ] {
        cmd.env_remove(var);
    }
    cmd.env(env::REPLAY_DIR, &dir)
        .env(env::RANK, args.rank.to_string())
        .env(env::SIZE, m.size.to_string())
        .env(env::JOB_ID, &m.job)
        .env(env::PROTOCOL, ProtocolName::Replay.as_str());
    if let Some(n) = args.until {
        cmd.env(env::REPLAY_UNTIL, n.to_string());
    }
    // An MPI C program loads vpml's MPI library, as under `vpml run`
    // (its vpml_ext.h calls exist nowhere else).
    let mpi = mpi(
        &mut cmd,
        Path::new(&m.program),
        &format!("replay-{}", std::process::id()),
    )
    .map_err(Error::MpiLibrary)?;
    eprintln!(
        "vpml replay: rank {} of {} ({} ranks), alone",
        args.rank,
        dir.display(),
        m.size
    );
    let status = cmd.status();
    if let Some(lib) = &mpi {
        let _ = std::fs::remove_dir_all(lib);
    }
    let status = status.map_err(|source| Error::StartProgram {
        program: m.program.to_string_lossy().into_owned(),
        source,
    })?;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => 128 + s as u8,
        _ => 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip_and_damage_is_named() {
        let m = Manifest {
            job: "abc".into(),
            size: 3,
            program: "/bin/x y".into(),
            args: vec!["a\nb".into()],
            protocol: "pessimist".into(),
            ranks: vec![Some("messages_sent=3 events_total=1".into()), None, None],
            ended: vec!["exit 0".into(), "signal 9".into(), "exit 0".into()],
        };
        let p = Path::new("/r/manifest");
        let back = Manifest::decode(&m.encode(), p).unwrap();
        assert_eq!(back.ended, m.ended);
        assert_eq!(
            back.ranks[0].as_deref(),
            Some("messages_sent=3 events_total=1")
        );
        assert_eq!(back.ranks[1], None);
        assert_eq!(
            (back.job, back.size, back.program, back.args),
            (m.job, m.size, m.program, m.args)
        );
        assert!(
            Manifest::decode("job x\n", p)
                .unwrap_err()
                .to_string()
                .contains("/r/manifest")
        );
        assert!(
            Manifest::decode("format 9\njob x\nsize 1\nprogram 61\n", p)
                .unwrap_err()
                .to_string()
                .contains("version 9")
        );
        assert!(
            Manifest::decode("format 1\nsize x\n", p)
                .unwrap_err()
                .to_string()
                .contains("line 2")
        );
    }
}
