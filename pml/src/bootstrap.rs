//! How a rank learns about its job: environment variables set by `vpml run`
//! and a small key/value service hosted by the launcher.
//!
//! # Wire protocol (version 1)
//!
//! One TCP connection per rank to `VPML_KV_ADDR` (loopback). Requests and
//! replies are single text lines (`\n`-terminated, at most 64 KiB; keys
//! and values are free of spaces and newlines):
//!
//! | request | reply | meaning |
//! |---|---|---|
//! | `HELLO 1 <token> <rank> <incarnation>` | `OK` / `ERR <reason>` | first line; wrong token or rank closes the connection (the launcher ignores what a process it has replaced says) |
//! | `PUT <key> <value>` | `OK` | publish a value |
//! | `GET <key>` | `VAL <value>` / `NONE` | read a value |
//! | `FENCE` | `OK` | returns once every rank has sent `FENCE` (values put before are visible) |
//! | `JOINED` | `OK` | the rank's first process finished start-up (its fences); from now on it can be restarted |
//! | `FINALIZE` | `OK` | the rank finished cleanly; it may exit |
//! | `ABORT <code> <message>` | `OK` | stop the whole job with exit code `<code>` |

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use crate::config::{Lookup, number, optional, required};
use crate::error::{Error, Result};

/// The environment variables `vpml run` sets (see [`crate::config`]).
pub use crate::config::var as env;

/// Marks a rank writes on its stdout when `VPML_OUTPUT_MARKS=1` (with a
/// protocol), so that a restarted process does not print again what its
/// predecessors printed: `<CHECKPOINT_MARK><index>]` when checkpoint
/// `index` is saved, `<RESTART_MARK><index>]` when a process restarts from
/// it (index 0: from the beginning). The launcher drops the restarted
/// process's output until it has re-printed what was printed after that
/// checkpoint; the marks never reach the user.
pub const CHECKPOINT_MARK: &str = "\u{1b}[vpml:checkpoint ";
/// See [`CHECKPOINT_MARK`].
pub const RESTART_MARK: &str = "\u{1b}[vpml:restart ";

/// Write an output mark (see [`CHECKPOINT_MARK`]) if the launcher asked
/// for them. Everything printed before is flushed first, in order.
pub fn write_output_mark(mark: &str, index: u64) {
    use std::io::Write;
    if !crate::config::JobConfig::get().is_ok_and(|c| c.engine.output_marks) {
        return;
    }
    flush_output();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{mark}{index}]");
    let _ = out.flush();
}

/// Hand everything the program printed so far to the launcher: Rust's
/// stdout and a C program's stdio buffers (fully buffered into the
/// launcher's pipe). Called before a checkpoint is saved — a process that
/// dies after saving it but before its mark would otherwise take lines
/// printed before the checkpoint with it, and its successor, resuming
/// after them, never prints them again — and before each mark.
pub fn flush_output() {
    use std::io::Write;
    let _ = std::io::stdout().lock().flush();
    // SAFETY: fflush(NULL) flushes every open output stream; it takes
    // each stream's own lock.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

/// Version of the key/value protocol.
pub const KV_PROTOCOL_VERSION: u32 = 1;

/// Longest line either side accepts.
pub const MAX_LINE: usize = 64 * 1024;

/// Everything a rank reads from its environment.
#[derive(Clone, Debug)]
pub struct JobEnv {
    /// Job id.
    pub job_id: String,
    /// This rank.
    pub rank: usize,
    /// World size.
    pub size: usize,
    /// Key/value service address.
    pub kv_addr: String,
    /// Secret token.
    pub token: String,
    /// Mailbox descriptors, by rank.
    pub mailbox_fds: Vec<i32>,
    /// Ranks on this host.
    pub local_size: usize,
    /// Cores on this host.
    pub host_cores: usize,
    /// Every pair talks over TCP (`VPML_TRANSPORT=tcp`).
    pub transport_tcp: bool,
    /// Host index of every rank.
    pub host_of: Vec<usize>,
    /// The job page, when crashed ranks are restarted.
    pub job_page_fd: Option<i32>,
    /// This process's incarnation.
    pub incarnation: u32,
    /// The global checkpoint a process restarted by coordinated
    /// checkpointing resumes from (0: the beginning).
    pub restart_from: u64,
}

impl JobEnv {
    /// Do ranks `a` and `b` talk over TCP (different hosts, or TCP forced)?
    pub fn over_tcp(&self, a: usize, b: usize) -> bool {
        self.transport_tcp || self.host_of.get(a) != self.host_of.get(b)
    }
}

/// `VPML_RANK` and `VPML_SIZE`, checked against each other.
fn rank_and_size(get: Lookup<'_>) -> Result<(usize, usize)> {
    let rank: usize = number(env::RANK, &required(get, env::RANK)?)?;
    let size: usize = number(env::SIZE, &required(get, env::SIZE)?)?;
    if size == 0 || rank >= size {
        return Err(Error::Bootstrap(format!(
            "rank {rank} is not inside a job of {size} ranks"
        )));
    }
    Ok((rank, size))
}

/// A comma-separated list of `size` numbers in variable `name`.
fn list_of<T: std::str::FromStr>(name: &str, list: &str, size: usize) -> Result<Vec<T>> {
    let v = list
        .split(',')
        .map(|x| number::<T>(name, x))
        .collect::<Result<Vec<_>>>()?;
    if v.len() != size {
        return Err(Error::Bootstrap(format!(
            "{name} lists {} entries for {size} ranks",
            v.len()
        )));
    }
    Ok(v)
}

impl JobEnv {
    /// The environment of a rank replayed alone (`vpml replay` sets
    /// `VPML_REPLAY_DIR`, the rank, the size and the job id).
    pub(crate) fn for_replay(get: Lookup<'_>) -> Result<JobEnv> {
        let (rank, size) = rank_and_size(get)?;
        Ok(JobEnv {
            job_id: required(get, env::JOB_ID)?,
            rank,
            size,
            kv_addr: String::new(),
            token: String::new(),
            mailbox_fds: Vec::new(),
            local_size: 1,
            host_cores: 1,
            transport_tcp: false,
            host_of: vec![0; size],
            job_page_fd: None,
            incarnation: 0,
            restart_from: 0,
        })
    }

    /// The job environment; `Ok(None)` if this process was not started
    /// by `vpml run` (then it runs as a single-rank job).
    pub(crate) fn read(get: Lookup<'_>) -> Result<Option<JobEnv>> {
        if get(env::RANK).is_none() {
            return Ok(None);
        }
        let (rank, size) = rank_and_size(get)?;
        let mailbox_fds: Vec<i32> =
            list_of(env::MAILBOX_FDS, &required(get, env::MAILBOX_FDS)?, size)?;
        let job_page_fd: Option<i32> = optional(get, env::JOB_PAGE_FD)?;
        // Each inherited descriptor is closed once mapped: no number twice.
        let mut all: Vec<i32> = mailbox_fds.iter().copied().chain(job_page_fd).collect();
        all.sort_unstable();
        if let Some(w) = all.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Bootstrap(format!(
                "descriptor {} is named twice by {} and {}",
                w[0],
                env::MAILBOX_FDS,
                env::JOB_PAGE_FD
            )));
        }
        Ok(Some(JobEnv {
            job_id: required(get, env::JOB_ID)?,
            rank,
            size,
            kv_addr: required(get, env::KV_ADDR)?,
            token: required(get, env::TOKEN)?,
            mailbox_fds,
            local_size: number(env::LOCAL_SIZE, &required(get, env::LOCAL_SIZE)?)?,
            host_cores: number(env::HOST_CORES, &required(get, env::HOST_CORES)?)?,
            job_page_fd,
            incarnation: optional(get, env::INCARNATION)?.unwrap_or(0),
            restart_from: optional(get, env::RESTART_FROM)?.unwrap_or(0),
            host_of: match get(env::HOST_OF) {
                None => vec![0; size],
                Some(list) => list_of(env::HOST_OF, &list, size)?,
            },
            transport_tcp: match get(env::TRANSPORT).as_deref() {
                Some("tcp") => true,
                Some("shm") | Some("") | None => false,
                Some(other) => {
                    return Err(Error::Bootstrap(format!(
                        "{}={other:?}: expected shm or tcp",
                        env::TRANSPORT
                    )));
                }
            },
        }))
    }
}

/// A rank's connection to the launcher's key/value service.
pub struct KvClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl KvClient {
    /// Connect and introduce this rank.
    pub fn connect(addr: &str, token: &str, rank: usize, incarnation: u32) -> Result<KvClient> {
        let stream = TcpStream::connect(addr)
            .map_err(|e| Error::LauncherLost(format!("connecting to {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let writer = stream
            .try_clone()
            .map_err(|e| Error::LauncherLost(e.to_string()))?;
        let mut c = KvClient {
            reader: BufReader::new(stream),
            writer,
        };
        c.expect_ok(&format!(
            "HELLO {KV_PROTOCOL_VERSION} {token} {rank} {incarnation}"
        ))?;
        Ok(c)
    }

    /// The address of this end of the connection: the interface that
    /// reaches the launcher, which is where other hosts reach this rank.
    pub fn local_ip(&self) -> std::net::IpAddr {
        self.writer
            .local_addr()
            .map_or(std::net::IpAddr::from([127, 0, 0, 1]), |a| a.ip())
    }

    fn request(&mut self, line: &str) -> Result<String> {
        let lost = |e: std::io::Error| Error::LauncherLost(e.to_string());
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .map_err(lost)?;
        let mut reply = String::new();
        let n = (&mut self.reader)
            .take(MAX_LINE as u64)
            .read_line(&mut reply)
            .map_err(lost)?;
        if n == 0 {
            return Err(Error::LauncherLost("connection closed".into()));
        }
        Ok(reply.trim_end().to_string())
    }

    fn expect_ok(&mut self, line: &str) -> Result<()> {
        let reply = self.request(line)?;
        if reply == "OK" {
            Ok(())
        } else {
            Err(Error::Bootstrap(format!("launcher answered {reply:?}")))
        }
    }

    /// Publish `value` under `key`.
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        self.expect_ok(&format!("PUT {key} {value}"))
    }

    /// Read the value under `key`, if any.
    pub fn get(&mut self, key: &str) -> Result<Option<String>> {
        let reply = self.request(&format!("GET {key}"))?;
        if reply == "NONE" {
            return Ok(None);
        }
        match reply.strip_prefix("VAL ") {
            Some(v) => Ok(Some(v.to_string())),
            None => Err(Error::Bootstrap(format!("launcher answered {reply:?}"))),
        }
    }

    /// Wait until every rank reached the fence.
    pub fn fence(&mut self) -> Result<()> {
        self.expect_ok("FENCE")
    }

    /// Tell the launcher that start-up (every fence) is behind this rank:
    /// a process that dies before cannot be restarted alone, because the
    /// others wait in a fence for it.
    pub fn joined(&mut self) -> Result<()> {
        self.expect_ok("JOINED")
    }

    /// Tell the launcher this rank finished cleanly.
    pub fn finalize(&mut self) -> Result<()> {
        self.expect_ok("FINALIZE")
    }

    /// Ask the launcher to stop the job with `code`.
    pub fn abort(&mut self, code: i32, message: &str) -> Result<()> {
        let msg: String = message
            .chars()
            .map(|c| if c == '\n' { ' ' } else { c })
            .take(1000)
            .collect();
        self.expect_ok(&format!("ABORT {code} {msg}"))
    }
}
