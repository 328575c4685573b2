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
//! and applies restarts to its job page. For coordinated checkpointing
//! it relays the launcher's checkpoint requests and resets to its page
//! and reports what its ranks record there (`CKPT generation taken
//! global`, looked at every 50 ms). When its connection to the
//! launcher closes, it kills its ranks and exits; when the agent dies, its
//! ranks die with it (parent-death signal).
//!
//! Messages in both directions are `u32` length + header line, `u32`
//! length + payload (little-endian), bounded in size; anything malformed
//! ends the connection with a message naming the host.

mod agents;
mod hosts;
mod wire;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use vpml_pml::config::var as env;

pub(crate) use agents::{Agents, OutputFn, Rendezvous};
pub use hosts::{HostSpec, HostsError, StartMethod, parse_hostfile, parse_hosts};
pub(crate) use wire::JobSetup;
pub use wire::WireError;
pub(crate) use wire::lock;
use wire::{read_msg, send};

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
    /// Resets of the global checkpoint so far (`CKPTRESET`): the
    /// generation of this agent's `CKPT` reports.
    checkpoint_generation: u32,
}

/// How often an agent looks at its job page's checkpoint counters.
const CHECKPOINT_REPORT_EVERY: Duration = Duration::from_millis(50);

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
        checkpoint_generation: 0,
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
                "SETUP" => {
                    setup(&state, JobSetup::decode(&payload)?)?;
                    report_checkpoints(&state, &writer);
                }
                "SPAWN" => {
                    let (rank, inc) = (num()?, num()? as u32);
                    // (Coordinated: the global checkpoint to resume from.)
                    let from = p.next().map_or(Some(0), |v| v.parse().ok());
                    let from = from.ok_or_else(|| AgentError::Malformed(header.clone()))?;
                    spawn_rank(&state, &writer, args.host, (rank, inc, from))?;
                }
                "CKPTREQ" => {
                    let n = num()? as u32;
                    let st = lock(&state);
                    if let Some((_, page, bells)) = &st.page {
                        page.raise_checkpoint_requests(n);
                        bells.ring_all();
                    }
                }
                "CKPTRESET" => {
                    let (generation, index) = (num()? as u32, num()? as u32);
                    let mut st = lock(&state);
                    st.checkpoint_generation = generation;
                    if let Some((_, page, _)) = &st.page {
                        page.reset_global_checkpoint(index);
                    }
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
                    // The launcher sends only named signals (KILL, TERM, INT, HUP).
                    let Some(sig) = Signal::from_named_raw(sig) else {
                        tracing::warn!("ignored KILL {rank} with unknown signal {sig}");
                        continue;
                    };
                    if let Some(&pid) = lock(&state).pids.get(&rank) {
                        // A child we have not reaped.
                        crate::process::signal(pid, sig);
                    }
                }
                other => return Err(AgentError::UnknownCommand(other.to_string())),
            }
        }
        Ok(())
    })();
    // The launcher is gone (or told nonsense): nothing may outlive it.
    let st = lock(&state);
    for &pid in st.pids.values() {
        // Our own children, not yet reaped.
        crate::process::signal(pid, Signal::KILL);
    }
    // Shared windows' files that this host's killed ranks left.
    if let Some(job) = &st.setup {
        vpml_pml::shm::window_files::remove_window_files(&job_id_of(job));
    }
    drop(st);
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

/// The id of the job `job` sets up ("job" if the launcher sent none).
fn job_id_of(job: &JobSetup) -> String {
    job.envs
        .iter()
        .find(|(k, _)| k == env::JOB_ID)
        .map_or("job".to_string(), |(_, v)| v.clone())
}

fn setup(state: &Mutex<AgentState>, job: JobSetup) -> Result<(), AgentError> {
    let mut st = lock(state);
    let jid = job_id_of(&job);
    st.mailboxes = (0..job.size)
        .map(|r| vpml_pml::shm::create_mailbox(&format!("vpml-{jid}-{r}"), job.size))
        .collect::<Result<_, _>>()
        .map_err(AgentError::SharedMemory)?;
    if job.restartable {
        let (fd, page) =
            vpml_pml::recovery::JobPage::create(job.size).map_err(AgentError::JobPage)?;
        let bells = vpml_pml::shm::Doorbells::map(&st.mailboxes, job.size)
            .map_err(AgentError::MapMailboxes)?;
        st.page = Some((fd, page, bells));
    }
    st.setup = Some(job);
    Ok(())
}

/// With a job page: report its checkpoint counters to the launcher
/// whenever they change (`CKPT generation taken global`), until the
/// connection closes.
fn report_checkpoints(state: &Arc<Mutex<AgentState>>, writer: &Arc<Mutex<TcpStream>>) {
    if lock(state).page.is_none() {
        return;
    }
    let (state, writer) = (Arc::clone(state), Arc::clone(writer));
    std::thread::spawn(move || {
        let mut sent = None;
        loop {
            std::thread::sleep(CHECKPOINT_REPORT_EVERY);
            // Read under the lock a reset takes: the counters and their
            // generation belong together.
            let now = {
                let st = lock(&state);
                let Some((_, page, _)) = &st.page else { return };
                (
                    st.checkpoint_generation,
                    page.checkpoint_requests_taken(),
                    page.global_checkpoint(),
                )
            };
            if sent != Some(now) {
                let (g, taken, global) = now;
                if send(&writer, &format!("CKPT {g} {taken} {global}"), &[]).is_err() {
                    return;
                }
                sent = Some(now);
            }
        }
    });
}

/// Start `(rank, incarnation, global checkpoint to resume from)`.
fn spawn_rank(
    state: &Arc<Mutex<AgentState>>,
    writer: &Arc<Mutex<TcpStream>>,
    host: usize,
    (rank, inc, from): (usize, u32, u64),
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
        .env(env::RESTART_FROM, from.to_string())
        .env(env::SPAWNED_AT_NS, crate::process::spawned_at_ns())
        .env_remove(vpml_fault_points::ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some((fd, _, _)) = &st.page {
        cmd.env(env::JOB_PAGE_FD, fd.as_raw_fd().to_string())
            .env(env::OUTPUT_MARKS, "1");
    } else {
        // Not restartable: nothing inherited may say otherwise.
        cmd.env_remove(env::JOB_PAGE_FD)
            .env_remove(env::OUTPUT_MARKS);
    }
    cmd.env_remove(env::REPLAY_DIR)
        .env_remove(env::REPLAY_UNTIL);
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
