//! Multi-host launch: `vpml agent`, the per-host agent, and the launcher's
//! side of it.
//!
//! With `--hosts`/`--hostfile`, the launcher starts one agent per host —
//! as a child (`fork`), inside the network namespace named like the host
//! (`netns`, via `ip netns exec`, for tests on one machine) or over `ssh`.
//! The agent connects back to the launcher's control address, presents
//! the job token (which it reads from its standard input, never from its
//! command line), and from then on does what the launcher says: it
//! creates the host's shared memory (mailboxes, job page), starts ranks,
//! forwards their output line by line, reports their exits, signals them,
//! and applies restarts to its job page. When its connection to the
//! launcher closes, it kills its ranks and exits; when the agent dies, its
//! ranks die with it (parent-death signal).
//!
//! Messages in both directions are `u32` length + header line, `u32`
//! length + payload (little-endian), bounded in size; anything malformed
//! ends the connection with a message naming the host.

use crate::Error;
use crate::ids::{hex, unhex};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use vpml_pml::bootstrap::env;

use crate::event::Event;

/// Largest header and payload of one control message.
const MAX_HEADER: usize = 4096;
const MAX_PAYLOAD: usize = 16 << 20;

/// A broken control connection (either side).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Reading failed.
    #[error("read failed: {0}")]
    Read(#[source] std::io::Error),
    /// The stream ended inside a message.
    #[error("message cut short: {0}")]
    CutShort(#[source] std::io::Error),
    /// A header over the limit.
    #[error("header of {0} bytes (at most {MAX_HEADER})")]
    LongHeader(usize),
    /// A payload over the limit.
    #[error("payload of {0} bytes (at most {MAX_PAYLOAD})")]
    LongPayload(usize),
    /// A header that is not text.
    #[error("header is not UTF-8")]
    HeaderNotUtf8,
    /// Writing failed.
    #[error("launcher connection: {0}")]
    Write(#[source] std::io::Error),
}

/// What the `vpml agent` process stops on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// Standard input gave no token.
    #[error("reading the job token: {0}")]
    ReadToken(#[source] std::io::Error),
    /// The launcher cannot be reached.
    #[error("cannot reach the launcher at {addr}: {source}")]
    Unreachable {
        /// Its control address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The control socket failed.
    #[error("{0}")]
    Socket(#[source] std::io::Error),
    /// The control connection broke.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The job setup is not text.
    #[error("setup is not UTF-8")]
    SetupNotUtf8,
    /// A job setup line does not parse.
    #[error("bad setup line {0:?}")]
    SetupLine(String),
    /// The job setup has no size.
    #[error("setup names no job size")]
    SetupSize,
    /// A command with bad arguments.
    #[error("malformed command {0:?}")]
    Malformed(String),
    /// A command this agent does not know.
    #[error("unknown command {0:?}")]
    UnknownCommand(String),
    /// `SPAWN` before the job setup.
    #[error("SPAWN before SETUP")]
    SpawnBeforeSetup,
    /// The host's mailboxes cannot be created.
    #[error("cannot create shared memory: {0}")]
    SharedMemory(#[source] std::io::Error),
    /// The host's job page cannot be created.
    #[error("cannot create the job page: {0}")]
    JobPage(#[source] std::io::Error),
    /// The doorbells cannot be mapped.
    #[error("cannot map the mailboxes: {0}")]
    MapMailboxes(#[source] vpml_pml::Error),
    /// A rank does not start.
    #[error("cannot start rank {rank}: {source}")]
    SpawnRank {
        /// The rank.
        rank: usize,
        /// Why.
        source: std::io::Error,
    },
}

/// Write one message.
pub(crate) fn write_msg(w: &mut impl Write, header: &str, payload: &[u8]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(8 + header.len() + payload.len());
    buf.extend_from_slice(&(header.len() as u32).to_le_bytes());
    buf.extend_from_slice(header.as_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf)?;
    w.flush()
}

/// Read one message; `Ok(None)` at a clean end of stream.
pub(crate) fn read_msg(r: &mut impl Read) -> Result<Option<(String, Vec<u8>)>, WireError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(WireError::Read(e)),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_HEADER {
        return Err(WireError::LongHeader(n));
    }
    let mut header = vec![0u8; n];
    r.read_exact(&mut header).map_err(WireError::CutShort)?;
    let header = String::from_utf8(header).map_err(|_| WireError::HeaderNotUtf8)?;
    r.read_exact(&mut len).map_err(WireError::CutShort)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_PAYLOAD {
        return Err(WireError::LongPayload(n));
    }
    let mut payload = vec![0u8; n];
    r.read_exact(&mut payload).map_err(WireError::CutShort)?;
    Ok(Some((header, payload)))
}

/// What every rank of the job gets, sent to each agent once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobSetup {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub size: usize,
    /// Environment common to all ranks (job id, kv address, token, …).
    pub envs: Vec<(String, String)>,
    /// Crashed ranks are restarted (create a job page).
    pub restartable: bool,
    /// Number of ranks this host starts at first (for the idle policy).
    pub local_ranks: usize,
    /// Bind ranks to cores.
    pub bind: bool,
}

impl JobSetup {
    fn encode(&self) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let mut s = String::new();
        s += &format!("program {}\n", hex(self.program.as_bytes()));
        for a in &self.args {
            s += &format!("arg {}\n", hex(a.as_bytes()));
        }
        s += &format!("size {}\n", self.size);
        s += &format!("restartable {}\n", u8::from(self.restartable));
        s += &format!("local {}\n", self.local_ranks);
        s += &format!("bind {}\n", u8::from(self.bind));
        for (k, v) in &self.envs {
            s += &format!("env {} {}\n", hex(k.as_bytes()), hex(v.as_bytes()));
        }
        s.into_bytes()
    }

    fn decode(b: &[u8]) -> Result<JobSetup, AgentError> {
        use std::os::unix::ffi::OsStringExt;
        let text = std::str::from_utf8(b).map_err(|_| AgentError::SetupNotUtf8)?;
        let mut j = JobSetup {
            program: OsString::new(),
            args: Vec::new(),
            size: 0,
            envs: Vec::new(),
            restartable: false,
            local_ranks: 0,
            bind: false,
        };
        for line in text.lines() {
            let mut p = line.split(' ');
            let bad = || AgentError::SetupLine(line.to_string());
            let bytes = |v: Option<&str>| v.and_then(unhex).ok_or_else(bad);
            let num = |v: Option<&str>| v.and_then(|v| v.parse::<usize>().ok()).ok_or_else(bad);
            match p.next() {
                Some("program") => j.program = OsString::from_vec(bytes(p.next())?),
                Some("arg") => j.args.push(OsString::from_vec(bytes(p.next())?)),
                Some("size") => j.size = num(p.next())?,
                Some("restartable") => j.restartable = num(p.next())? != 0,
                Some("local") => j.local_ranks = num(p.next())?,
                Some("bind") => j.bind = num(p.next())? != 0,
                Some("env") => {
                    let k = String::from_utf8(bytes(p.next())?).map_err(|_| bad())?;
                    let v = String::from_utf8(bytes(p.next())?).map_err(|_| bad())?;
                    j.envs.push((k, v));
                }
                _ => return Err(bad()),
            }
        }
        if j.size == 0 {
            return Err(AgentError::SetupSize);
        }
        Ok(j)
    }
}

// ------------------------------------------------------------------ agent

/// Options of `vpml agent` (started by `vpml run`, not by hand).
#[derive(clap::Args, Debug, Clone)]
pub struct AgentArgs {
    /// The launcher's control address.
    #[arg(long, value_name = "ADDR")]
    pub connect: String,
    /// This host's index in the job.
    #[arg(long, value_name = "N")]
    pub host: usize,
}

/// Run an agent (see the module docs). The job token is the first line
/// of standard input.
pub fn agent_main(args: AgentArgs) -> ExitCode {
    match agent(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vpml agent (host {}): {e}", args.host);
            ExitCode::from(1)
        }
    }
}

struct AgentState {
    setup: Option<JobSetup>,
    mailboxes: Vec<OwnedFd>,
    page: Option<(
        OwnedFd,
        vpml_pml::recovery::JobPage,
        vpml_pml::shm::Doorbells,
    )>,
    /// Live rank processes: rank → pid.
    pids: HashMap<usize, i32>,
}

fn agent(args: &AgentArgs) -> Result<(), AgentError> {
    let mut token = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut token)
        .map_err(AgentError::ReadToken)?;
    let token = token.trim().to_string();
    let stream = connect_with_retry(&args.connect, Duration::from_secs(30))?;
    let _ = stream.set_nodelay(true);
    let writer = Arc::new(Mutex::new(stream.try_clone().map_err(AgentError::Socket)?));
    let mut reader = BufReader::new(stream);
    send(&writer, &format!("HELLO {token} {}", args.host), &[])?;
    let state = Arc::new(Mutex::new(AgentState {
        setup: None,
        mailboxes: Vec::new(),
        page: None,
        pids: HashMap::new(),
    }));
    let result = (|| -> Result<(), AgentError> {
        while let Some((header, payload)) = read_msg(&mut reader)? {
            let mut p = header.split(' ');
            let cmd = p.next().unwrap_or("");
            let mut num = || -> Result<usize, AgentError> {
                p.next()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| AgentError::Malformed(header.clone()))
            };
            match cmd {
                "SETUP" => setup(&state, JobSetup::decode(&payload)?)?,
                "SPAWN" => {
                    let (rank, inc) = (num()?, num()? as u32);
                    spawn_rank(&state, &writer, args.host, rank, inc)?;
                }
                "RESTART" => {
                    let rank = num()?;
                    let st = lock(&state);
                    if let Some((_, page, bells)) = &st.page {
                        page.restart(rank);
                        bells.ring_all();
                    }
                }
                "ALLFINAL" => {
                    let st = lock(&state);
                    if let Some((_, page, bells)) = &st.page {
                        page.set_all_finalized();
                        bells.ring_all();
                    }
                }
                "KILL" => {
                    let (rank, sig) = (num()?, num()? as i32);
                    if let Some(&pid) = lock(&state).pids.get(&rank) {
                        // SAFETY: plain syscall on a child we have not reaped.
                        unsafe { libc::kill(pid, sig) };
                    }
                }
                other => return Err(AgentError::UnknownCommand(other.to_string())),
            }
        }
        Ok(())
    })();
    // The launcher is gone (or told nonsense): nothing may outlive it.
    for &pid in lock(&state).pids.values() {
        // SAFETY: plain syscall on our own children.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    result
}

fn connect_with_retry(addr: &str, within: Duration) -> Result<TcpStream, AgentError> {
    let deadline = Instant::now() + within;
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(source) if Instant::now() >= deadline => {
                return Err(AgentError::Unreachable {
                    addr: addr.to_string(),
                    source,
                });
            }
            // The launcher listens before it starts agents; a refusal
            // means a route that is still coming up. Retry, not spin.
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn send(w: &Mutex<TcpStream>, header: &str, payload: &[u8]) -> Result<(), WireError> {
    write_msg(&mut *lock(w), header, payload).map_err(WireError::Write)
}

fn setup(state: &Mutex<AgentState>, job: JobSetup) -> Result<(), AgentError> {
    let mut st = lock(state);
    let jid = job
        .envs
        .iter()
        .find(|(k, _)| k == env::JOB_ID)
        .map_or("job".to_string(), |(_, v)| v.clone());
    st.mailboxes = (0..job.size)
        .map(|r| vpml_pml::shm::create_mailbox(&format!("vpml-{jid}-{r}"), job.size))
        .collect::<Result<_, _>>()
        .map_err(AgentError::SharedMemory)?;
    if job.restartable {
        let (fd, page) =
            vpml_pml::recovery::JobPage::create(job.size).map_err(AgentError::JobPage)?;
        let raw: Vec<i32> = st.mailboxes.iter().map(|f| f.as_raw_fd()).collect();
        let bells =
            vpml_pml::shm::Doorbells::map(&raw, job.size).map_err(AgentError::MapMailboxes)?;
        st.page = Some((fd, page, bells));
    }
    st.setup = Some(job);
    Ok(())
}

fn spawn_rank(
    state: &Arc<Mutex<AgentState>>,
    writer: &Arc<Mutex<TcpStream>>,
    host: usize,
    rank: usize,
    inc: u32,
) -> Result<(), AgentError> {
    let mut st = lock(state);
    let job = st.setup.clone().ok_or(AgentError::SpawnBeforeSetup)?;
    let fds: Vec<String> = st
        .mailboxes
        .iter()
        .map(|f| f.as_raw_fd().to_string())
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cmd = Command::new(&job.program);
    cmd.args(&job.args)
        .envs(job.envs.iter().map(|(k, v)| (k, v)))
        .env(env::RANK, rank.to_string())
        .env(env::MAILBOX_FDS, fds.join(","))
        .env(env::LOCAL_SIZE, job.local_ranks.max(1).to_string())
        .env(env::HOST_CORES, cores.to_string())
        .env(env::INCARNATION, inc.to_string())
        .env(env::SPAWNED_AT_NS, crate::process::spawned_at_ns())
        .env_remove(vpml_fault_points::ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some((fd, _, _)) = &st.page {
        cmd.env(env::JOB_PAGE_FD, fd.as_raw_fd().to_string())
            .env(env::OUTPUT_MARKS, "1");
    }
    // Each rank learns its own host; the others' are as placed at start.
    let host_of = job
        .envs
        .iter()
        .find(|(k, _)| k == env::HOST_OF)
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let mut hosts: Vec<String> = host_of.split(',').map(str::to_string).collect();
    if let Some(h) = hosts.get_mut(rank) {
        *h = host.to_string();
    }
    cmd.env(env::HOST_OF, hosts.join(","));
    let core = job.bind.then_some(rank % cores);
    let me = std::process::id();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || crate::process::child_setup(me, core));
    }
    let mut child = cmd
        .spawn()
        .map_err(|source| AgentError::SpawnRank { rank, source })?;
    let pid = child.id() as i32;
    st.pids.insert(rank, pid);
    drop(st);
    let mut readers = Vec::new();
    for (stream, is_err) in [
        (
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            false,
        ),
        (
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            true,
        ),
    ] {
        let Some(stream) = stream else { continue };
        let w = Arc::clone(writer);
        readers.push(std::thread::spawn(move || {
            let mut r = BufReader::new(stream);
            let mut line = Vec::new();
            loop {
                line.clear();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let h = format!("OUT {rank} {}", u8::from(is_err));
                if send(&w, &h, &line).is_err() {
                    return;
                }
            }
        }));
    }
    let w = Arc::clone(writer);
    let state = Arc::clone(state);
    std::thread::spawn(move || {
        let status = child
            .wait()
            .unwrap_or_else(|_| ExitStatus::from_raw(1 << 8));
        // Every line the process printed goes first.
        for r in readers {
            let _ = r.join();
        }
        {
            let mut st = lock(&state);
            if st.pids.get(&rank) == Some(&pid) {
                st.pids.remove(&rank);
            }
        }
        let (code, sig) = (status.code().unwrap_or(-1), status.signal().unwrap_or(0));
        let _ = send(&w, &format!("EXIT {rank} {inc} {code} {sig}"), &[]);
    });
    Ok(())
}

// --------------------------------------------------------- launcher side

/// How the launcher starts an agent on a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMethod {
    /// A child process on this machine.
    Fork,
    /// A child process inside the network namespace named like the host.
    Netns,
    /// Over ssh.
    Ssh,
}

/// One host of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Host name (for ssh/netns) — also how messages name it.
    pub name: String,
    /// Ranks it takes at start (0 for a spare).
    pub slots: usize,
    /// How its agent starts.
    pub via: StartMethod,
}

/// What is wrong with `--hosts`, `--spare-hosts` or a host file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HostsError {
    /// `--via` (or `via=`) names no start method.
    #[error("unknown start method {0:?} (fork, netns, ssh)")]
    Method(String),
    /// `--hosts`: `name:slots` with a bad slot count.
    #[error("--hosts: bad slot count in {0:?}")]
    SlotCount(String),
    /// `--hosts`: an empty name or one with spaces.
    #[error("--hosts: bad host name in {0:?}")]
    HostName(String),
    /// A host file's `slots=` is not a number.
    #[error("host file line {line}: bad slots {value:?}")]
    FileSlots {
        /// Line number, from 1.
        line: usize,
        /// The value.
        value: String,
    },
    /// A host file field this vpml does not know.
    #[error("host file line {line}: unknown field {field:?}")]
    FileField {
        /// Line number, from 1.
        line: usize,
        /// The field.
        field: String,
    },
    /// A host file's `via=` names no start method.
    #[error("host file line {line}: unknown start method {method:?} (fork, netns, ssh)")]
    FileMethod {
        /// Line number, from 1.
        line: usize,
        /// The method.
        method: String,
    },
    /// A host file without hosts.
    #[error("the host file lists no host")]
    NoHost,
}

/// Why a connection that claims to be an agent is refused.
#[derive(Debug, thiserror::Error)]
enum HelloError {
    #[error("{0}")]
    Socket(#[source] std::io::Error),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("closed before its hello")]
    Closed,
    #[error("not a vpml agent")]
    NotAgent,
    #[error("wrong job token")]
    WrongToken,
    #[error("bad host index")]
    BadHost,
}

fn method(name: &str, via: Option<&str>) -> Result<StartMethod, HostsError> {
    Ok(match via {
        Some("fork") => StartMethod::Fork,
        Some("netns") => StartMethod::Netns,
        Some("ssh") => StartMethod::Ssh,
        Some(other) => return Err(HostsError::Method(other.to_string())),
        None if name == "localhost" => StartMethod::Fork,
        None => StartMethod::Ssh,
    })
}

/// Parse `--hosts h1:2,h2:2` (`via` applies to every host; default: fork
/// for `localhost`, ssh otherwise).
pub fn parse_hosts(list: &str, via: Option<&str>) -> Result<Vec<HostSpec>, HostsError> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|item| {
            let item = item.trim();
            let (name, slots) = match item.rsplit_once(':') {
                Some((n, s)) => (
                    n,
                    s.parse::<usize>()
                        .map_err(|_| HostsError::SlotCount(item.to_string()))?,
                ),
                None => (item, 1),
            };
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(HostsError::HostName(item.to_string()));
            }
            Ok(HostSpec {
                name: name.to_string(),
                slots,
                via: method(name, via)?,
            })
        })
        .collect()
}

/// Parse a host file: lines `host [slots=N] [via=fork|netns|ssh]`, `#`
/// comments, as Open MPI's (without its other keys).
pub fn parse_hostfile(text: &str, via: Option<&str>) -> Result<Vec<HostSpec>, HostsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default().to_string();
        let mut slots = 1;
        let mut this_via = via.map(str::to_string);
        for w in words {
            match w.split_once('=') {
                Some(("slots", n)) => {
                    slots = n.parse().map_err(|_| HostsError::FileSlots {
                        line: i + 1,
                        value: n.to_string(),
                    })?
                }
                Some(("via", m)) => this_via = Some(m.to_string()),
                _ => {
                    return Err(HostsError::FileField {
                        line: i + 1,
                        field: w.to_string(),
                    });
                }
            }
        }
        let via = method(&name, this_via.as_deref()).map_err(|e| match e {
            HostsError::Method(method) => HostsError::FileMethod {
                line: i + 1,
                method,
            },
            other => other,
        })?;
        out.push(HostSpec { name, slots, via });
    }
    if out.is_empty() {
        return Err(HostsError::NoHost);
    }
    Ok(out)
}

/// The command that starts the agent of host `index`.
pub(crate) fn agent_command(
    h: &HostSpec,
    index: usize,
    control: &str,
    vpml: &std::path::Path,
) -> Command {
    let agent_args = [
        "agent".to_string(),
        "--connect".into(),
        control.to_string(),
        "--host".into(),
        index.to_string(),
    ];
    match h.via {
        StartMethod::Fork => {
            let mut c = Command::new(vpml);
            c.args(&agent_args);
            c
        }
        StartMethod::Netns => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &h.name])
                .arg(vpml)
                .args(&agent_args);
            c
        }
        StartMethod::Ssh => {
            let mut c = Command::new("ssh");
            c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", &h.name])
                .arg(vpml)
                .args(&agent_args);
            c
        }
    }
}

/// Where and how agents meet the launcher.
pub(crate) struct Rendezvous<'a> {
    /// Address the launcher listens on.
    pub bind: &'a str,
    /// The job token agents present.
    pub token: &'a str,
    /// How long agents get to connect.
    pub timeout: Duration,
}

/// The launcher's agents: one control connection per host.
pub(crate) struct Agents {
    pub hosts: Vec<HostSpec>,
    writers: Vec<Option<Arc<Mutex<TcpStream>>>>,
    children: Vec<std::process::Child>,
}

/// What an agent reader thread tells the launcher.
pub(crate) type OutputFn = Arc<dyn Fn(usize, bool, &[u8]) + Send + Sync>;

impl Agents {
    /// Start every host's agent and wait for each to connect (at most
    /// `timeout`), then send the job setup. `setup_for(host)` builds it.
    pub(crate) fn start(
        hosts: Vec<HostSpec>,
        how: &Rendezvous<'_>,
        events: Sender<Event>,
        output: OutputFn,
        setup_for: impl Fn(usize) -> JobSetup,
    ) -> Result<Agents, Error> {
        let (bind, token, timeout) = (how.bind, how.token, how.timeout);
        let launcher_pid = std::process::id();
        let listener = TcpListener::bind((bind, 0)).map_err(|source| Error::ListenForAgents {
            bind: bind.to_string(),
            source,
        })?;
        let control = listener
            .local_addr()
            .map_err(Error::ControlSocket)?
            .to_string();
        let vpml = std::env::current_exe().map_err(Error::CurrentExe)?;
        let mut children = Vec::new();
        for (i, h) in hosts.iter().enumerate() {
            let mut cmd = agent_command(h, i, &control, &vpml);
            cmd.stdin(Stdio::piped());
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || crate::process::child_setup(launcher_pid, None));
            }
            let mut child = cmd.spawn().map_err(|source| Error::StartAgent {
                host: h.name.clone(),
                source,
            })?;
            if let Some(mut stdin) = child.stdin.take() {
                let _ = writeln!(stdin, "{token}");
            }
            children.push(child);
        }
        let mut agents = Agents {
            writers: (0..hosts.len()).map(|_| None).collect(),
            hosts,
            children,
        };
        listener
            .set_nonblocking(true)
            .map_err(Error::ControlSocket)?;
        let deadline = Instant::now() + timeout;
        while agents.writers.iter().any(Option::is_none) {
            if let Some(i) = agents.exited_agent() {
                return Err(Error::AgentExited {
                    host: agents.hosts[i].name.clone(),
                });
            }
            match listener.accept() {
                Ok((s, from)) => match agent_hello(s, token, agents.hosts.len()) {
                    Ok((i, s, reader)) if agents.writers[i].is_none() => {
                        let w = Arc::new(Mutex::new(s));
                        send(&w, "SETUP", &setup_for(i).encode()).map_err(|source| {
                            Error::AgentConnection {
                                host: agents.hosts[i].name.clone(),
                                source,
                            }
                        })?;
                        agents.writers[i] = Some(Arc::clone(&w));
                        watch_agent(
                            i,
                            agents.hosts[i].name.clone(),
                            reader,
                            events.clone(),
                            output.clone(),
                        );
                    }
                    Ok((i, _, _)) => {
                        tracing::warn!("refused a second agent for host {i} from {from}")
                    }
                    Err(why) => tracing::warn!("refused an agent connection from {from}: {why}"),
                },
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<&str> = agents
                            .writers
                            .iter()
                            .zip(&agents.hosts)
                            .filter(|(w, _)| w.is_none())
                            .map(|(_, h)| h.name.as_str())
                            .collect();
                        return Err(Error::AgentsUnreachable {
                            hosts: missing.join(", "),
                            secs: timeout.as_secs_f64(),
                        });
                    }
                    let mut fd = libc::pollfd {
                        fd: listener.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd for the call.
                    unsafe { libc::poll(&mut fd, 1, 100) };
                }
                Err(e) => return Err(Error::AcceptAgents(e)),
            }
        }
        Ok(agents)
    }

    fn exited_agent(&mut self) -> Option<usize> {
        self.children
            .iter_mut()
            .position(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Send a command to the agent of `host` (ignored if it is gone: its
    /// loss is reported separately).
    pub(crate) fn command(&self, host: usize, header: &str) {
        if let Some(Some(w)) = self.writers.get(host)
            && let Err(e) = send(w, header, &[])
        {
            tracing::debug!("agent {host}: {e}");
        }
    }

    /// SIGKILL the agent of `host` (testing aid; its ranks die with it).
    pub(crate) fn kill(&self, host: usize) {
        if let Some(c) = self.children.get(host) {
            // SAFETY: plain syscall on our child (reaped in `stop`).
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
        }
    }

    /// Send a command to every agent.
    pub(crate) fn broadcast(&self, header: &str) {
        for h in 0..self.writers.len() {
            self.command(h, header);
        }
    }

    /// Stop: close every control connection (agents kill their ranks and
    /// exit), then reap the agents.
    pub(crate) fn stop(&mut self) {
        for w in self.writers.iter().flatten() {
            let _ = lock(w).shutdown(std::net::Shutdown::Both);
        }
        for c in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    // Agents exit as soon as their ranks are gone.
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }
}

/// Read and check an agent's `HELLO <token> <host>`.
fn agent_hello(
    s: TcpStream,
    token: &str,
    hosts: usize,
) -> Result<(usize, TcpStream, BufReader<TcpStream>), HelloError> {
    s.set_nonblocking(false).map_err(HelloError::Socket)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(HelloError::Socket)?;
    let _ = s.set_nodelay(true);
    let mut reader = BufReader::new(s.try_clone().map_err(HelloError::Socket)?);
    let (header, _) = read_msg(&mut reader)?.ok_or(HelloError::Closed)?;
    let mut p = header.split(' ');
    if p.next() != Some("HELLO") {
        return Err(HelloError::NotAgent);
    }
    if p.next() != Some(token) {
        return Err(HelloError::WrongToken);
    }
    let host: usize = p
        .next()
        .and_then(|h| h.parse().ok())
        .filter(|&h| h < hosts)
        .ok_or(HelloError::BadHost)?;
    s.set_read_timeout(None).map_err(HelloError::Socket)?;
    reader
        .get_ref()
        .set_read_timeout(None)
        .map_err(HelloError::Socket)?;
    Ok((host, s, reader))
}

/// Turn an agent's messages into launcher events.
fn watch_agent(
    host: usize,
    name: String,
    mut reader: BufReader<TcpStream>,
    events: Sender<Event>,
    output: OutputFn,
) {
    std::thread::spawn(move || {
        let why = loop {
            let (header, payload) = match read_msg(&mut reader) {
                Ok(Some(m)) => m,
                Ok(None) => break "its connection closed".to_string(),
                Err(e) => break e.to_string(),
            };
            let mut p = header.split(' ');
            let cmd = p.next().unwrap_or("");
            let nums: Vec<i64> = p.filter_map(|v| v.parse().ok()).collect();
            match (cmd, nums.as_slice()) {
                ("OUT", [rank, is_err]) => output(*rank as usize, *is_err != 0, &payload),
                ("EXIT", [rank, inc, code, sig]) => {
                    let status = if *sig != 0 {
                        ExitStatus::from_raw((*sig as i32) & 0x7f)
                    } else {
                        ExitStatus::from_raw(((*code as i32) & 0xff) << 8)
                    };
                    let _ = events.send(Event::Exited {
                        rank: *rank as usize,
                        pid: None,
                        incarnation: *inc as u32,
                        status,
                    });
                }
                _ => break format!("sent a malformed message {header:?}"),
            }
        };
        let _ = events.send(Event::AgentLost { host, name, why });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_and_files_are_parsed_with_clear_errors() {
        let h = parse_hosts("a:2,localhost:1,b", Some("netns")).unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!((h[0].slots, h[0].via), (2, StartMethod::Netns));
        assert_eq!(h[2].slots, 1);
        let d = parse_hosts("localhost:2,far:2", None).unwrap();
        assert_eq!((d[0].via, d[1].via), (StartMethod::Fork, StartMethod::Ssh));
        assert!(
            parse_hosts("a:x", None)
                .unwrap_err()
                .to_string()
                .contains("slot count")
        );
        let f =
            parse_hostfile("# hosts\nn1 slots=2 via=netns\n\nn2 slots=3 # two\n", None).unwrap();
        assert_eq!(
            f[1],
            HostSpec {
                name: "n2".into(),
                slots: 3,
                via: StartMethod::Ssh
            }
        );
        assert!(
            parse_hostfile("n1 cpus=2\n", None)
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
        assert!(parse_hostfile("\n# none\n", None).is_err());
    }

    #[test]
    fn setups_round_trip_and_messages_are_bounded() {
        let s = JobSetup {
            program: "/bin/prog with space".into(),
            args: vec!["--x".into(), "a b\nc".into()],
            size: 4,
            envs: vec![("K".into(), "v=1,2".into())],
            restartable: true,
            local_ranks: 2,
            bind: false,
        };
        assert_eq!(JobSetup::decode(&s.encode()).unwrap(), s);
        assert!(JobSetup::decode(b"size 0\n").is_err());
        assert!(JobSetup::decode(b"what 1\n").is_err());
        let mut buf = Vec::new();
        write_msg(&mut buf, "OUT 1 0", b"line\n").unwrap();
        let (h, p) = read_msg(&mut buf.as_slice()).unwrap().unwrap();
        assert_eq!((h.as_str(), p.as_slice()), ("OUT 1 0", &b"line\n"[..]));
        let huge = (u32::MAX).to_le_bytes();
        assert!(
            read_msg(&mut huge.as_slice())
                .unwrap_err()
                .to_string()
                .contains("header")
        );
        assert_eq!(read_msg(&mut [].as_slice()).unwrap(), None);
    }

    #[test]
    fn an_agent_with_a_wrong_token_is_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let hello = |line: &str| {
            let mut c = TcpStream::connect(addr).unwrap();
            write_msg(&mut c, line, &[]).unwrap();
            let (s, _) = l.accept().unwrap();
            agent_hello(s, "right", 2)
                .map(|(h, _, _)| h)
                .map_err(|e| e.to_string())
        };
        assert_eq!(hello("HELLO right 1").unwrap(), 1);
        assert_eq!(hello("HELLO wrong 1").unwrap_err(), "wrong job token");
        assert_eq!(hello("HELLO right 7").unwrap_err(), "bad host index");
        assert_eq!(hello("GET / HTTP/1.0").unwrap_err(), "not a vpml agent");
    }

    #[test]
    fn agents_start_through_fork_netns_or_ssh() {
        let vpml = std::path::Path::new("/opt/vpml");
        let h = |via| HostSpec {
            name: "n1".into(),
            slots: 1,
            via,
        };
        let show = |c: Command| {
            std::iter::once(c.get_program().to_string_lossy().into_owned())
                .chain(c.get_args().map(|a| a.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            show(agent_command(&h(StartMethod::Netns), 1, "10.0.0.1:5", vpml)),
            "ip netns exec n1 /opt/vpml agent --connect 10.0.0.1:5 --host 1"
        );
        assert!(
            show(agent_command(&h(StartMethod::Ssh), 0, "a:1", vpml))
                .starts_with("ssh -o BatchMode=yes -o ConnectTimeout=10 n1 /opt/vpml agent")
        );
        assert_eq!(
            show(agent_command(&h(StartMethod::Fork), 2, "a:1", vpml)),
            "/opt/vpml agent --connect a:1 --host 2"
        );
    }
}
