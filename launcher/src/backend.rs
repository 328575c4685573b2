//! Where the ranks of a job run: children of this launcher (started by
//! [`Spawner`]) or children of per-host agents; [`Backend`] is what the
//! supervisor signals, restarts and announces through.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use crossbeam_channel::Sender;
use rustix::process::Signal;
use vpml_pml::config::var as env;

use crate::agent::lock as wire_lock;
use crate::event::Event;
use crate::inject::{self, Target};
use crate::output::{Outputs, forward};
use crate::process::{child_setup, spawned_at_ns, watch_exit};
use crate::{Error, agent};

/// Everything needed to start (or restart) a rank process on this host.
pub(crate) struct Spawner {
    pub(crate) program: PathBuf,
    pub(crate) rest: Vec<OsString>,
    pub(crate) job_id: String,
    pub(crate) kv_addr: String,
    pub(crate) token: String,
    pub(crate) fds: String,
    pub(crate) ranks: usize,
    pub(crate) cores: usize,
    pub(crate) bind: bool,
    pub(crate) protocol_envs: Vec<(String, String)>,
    pub(crate) transport: String,
    pub(crate) host_of: String,
    pub(crate) job_page_fd: Option<i32>,
    pub(crate) launcher_pid: u32,
    pub(crate) tx: Sender<Event>,
    pub(crate) outputs: Arc<Outputs>,
    /// Fault points to arm (`--inject-failure RANK@point:…`).
    pub(crate) fault_points: inject::Plan,
    /// The global checkpoint restarted processes resume from
    /// (`VPML_RESTART_FROM`: coordinated checkpointing).
    pub(crate) restart_from: std::sync::atomic::AtomicU64,
}

impl Spawner {
    /// Start incarnation `incarnation` of `rank`; returns its pid.
    pub(crate) fn spawn(
        &self,
        rank: usize,
        incarnation: u32,
        forwarders: &mut Vec<std::thread::JoinHandle<()>>,
    ) -> Result<i32, Error> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.rest)
            .env(env::JOB_ID, &self.job_id)
            .env(env::RANK, rank.to_string())
            .env(env::SIZE, self.ranks.to_string())
            .env(env::KV_ADDR, &self.kv_addr)
            .env(env::TOKEN, &self.token)
            .env(env::MAILBOX_FDS, &self.fds)
            .env(env::LOCAL_SIZE, self.ranks.to_string())
            .env(env::HOST_CORES, self.cores.to_string())
            .envs(self.protocol_envs.iter().map(|(k, v)| (k, v)))
            .env(env::TRANSPORT, &self.transport)
            .env(env::HOST_OF, &self.host_of)
            .env(env::INCARNATION, incarnation.to_string())
            .env(
                env::RESTART_FROM,
                self.restart_from
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .to_string(),
            )
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
        } else {
            // Not restartable: nothing inherited may say otherwise.
            cmd.env_remove(env::JOB_PAGE_FD)
                .env_remove(env::OUTPUT_MARKS);
        }
        cmd.env_remove(env::REPLAY_DIR)
            .env_remove(env::REPLAY_UNTIL);
        let core = self.bind.then_some(rank % self.cores);
        let launcher_pid = self.launcher_pid;
        // SAFETY: the closure runs in the child between fork and exec and
        // only makes async-signal-safe system calls.
        unsafe {
            cmd.pre_exec(move || child_setup(launcher_pid, core));
        }
        let mut child = cmd.spawn().map_err(|source| Error::SpawnRank {
            rank,
            program: self.program.clone(),
            source,
        })?;
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
pub(crate) enum Backend<'a> {
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
        /// The global checkpoint restarted processes resume from.
        restart_from: u64,
    },
}

impl Backend<'_> {
    pub(crate) fn signal(&self, rank: usize, sig: Signal) {
        match self {
            // A child we have not reaped.
            Backend::Local { pids, .. } => crate::process::signal(pids[rank], sig),
            Backend::Agents {
                agents, placement, ..
            } => agents.command(placement[rank], &format!("KILL {rank} {}", sig.as_raw())),
        }
    }

    /// Where `rank` runs (for messages).
    pub(crate) fn describe(&self, rank: usize) -> String {
        match self {
            Backend::Local { pids, .. } => format!("pid {}", pids[rank]),
            Backend::Agents {
                agents, placement, ..
            } => format!("host {}", agents.hosts[placement[rank]].name),
        }
    }

    /// The host `rank` runs on, across hosts.
    pub(crate) fn host_name(&self, rank: usize) -> Option<String> {
        match self {
            Backend::Local { .. } => None,
            Backend::Agents {
                agents, placement, ..
            } => Some(agents.hosts[placement[rank]].name.clone()),
        }
    }

    /// Announce that `rank` restarts; returns its new incarnation.
    pub(crate) fn announce_restart(&mut self, rank: usize) -> u32 {
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

    /// Processes started from now on resume from global checkpoint
    /// `index` (coordinated checkpointing).
    pub(crate) fn set_restart_from(&mut self, index: u64) {
        match self {
            Backend::Local { spawner, .. } => spawner
                .restart_from
                .store(index, std::sync::atomic::Ordering::Relaxed),
            Backend::Agents { restart_from, .. } => *restart_from = index,
        }
    }

    /// Ask the ranks for a global checkpoint: the request's ticket (the
    /// count of requests with it).
    pub(crate) fn request_checkpoint(&self) -> u32 {
        match self {
            Backend::Local { page, .. } => page.map_or(0, |(p, _)| p.request_checkpoint()),
            Backend::Agents { agents, .. } => {
                let requests = {
                    let mut m = wire_lock(&agents.checkpoints);
                    m.requests += 1;
                    m.requests
                };
                // (Not under the lock: a stalled agent must not stall the
                // others' reports.)
                agents.broadcast(&format!("CKPTREQ {requests}"));
                requests
            }
        }
    }

    /// How many requests complete global checkpoints answered.
    pub(crate) fn requests_taken(&self) -> u32 {
        match self {
            Backend::Local { page, .. } => page.map_or(0, |(p, _)| p.checkpoint_requests_taken()),
            Backend::Agents { agents, .. } => wire_lock(&agents.checkpoints).taken,
        }
    }

    /// The newest complete global checkpoint (0: none).
    pub(crate) fn global_checkpoint(&self) -> u32 {
        match self {
            Backend::Local { page, .. } => page.map_or(0, |(p, _)| p.global_checkpoint()),
            Backend::Agents { agents, .. } => wire_lock(&agents.checkpoints).global,
        }
    }

    /// Every rank restarts from global checkpoint `index`: the newer ones
    /// are gone (on every host's page; reports from before are stale).
    pub(crate) fn reset_global_checkpoint(&self, index: u32) {
        match self {
            Backend::Local { page, .. } => {
                if let Some((p, _)) = page {
                    p.reset_global_checkpoint(index);
                }
            }
            Backend::Agents { agents, .. } => {
                let generation = {
                    let mut m = wire_lock(&agents.checkpoints);
                    m.generation += 1;
                    m.global = index;
                    m.generation
                };
                // An agent reports the new generation only after this.
                agents.broadcast(&format!("CKPTRESET {generation} {index}"));
            }
        }
    }

    /// After `announce_restart`: wake the ranks waiting on it.
    pub(crate) fn wake_all(&self) {
        if let Backend::Local {
            page: Some((_, bells)),
            ..
        } = self
        {
            bells.ring_all();
        }
    }

    pub(crate) fn announce_all_finalized(&self) {
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
    pub(crate) fn respawn(
        &mut self,
        rank: usize,
        inc: u32,
        forwarders: &mut Vec<std::thread::JoinHandle<()>>,
    ) -> Result<(), Error> {
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
                restart_from,
                ..
            } => {
                if !host_alive[placement[rank]] {
                    let load = |h: usize| placement.iter().filter(|&&p| p == h).count();
                    let spare = spares
                        .iter()
                        .copied()
                        .filter(|&h| host_alive[h])
                        .min_by_key(|&h| load(h))
                        .ok_or_else(|| Error::NoSpareHost {
                            host: agents.hosts[placement[rank]].name.clone(),
                        })?;
                    placement[rank] = spare;
                }
                agents.command(
                    placement[rank],
                    &format!("SPAWN {rank} {inc} {restart_from}"),
                );
                Ok(())
            }
        }
    }

    /// Kill the agent of `host` (testing aid).
    pub(crate) fn kill_agent(&self, host: usize) {
        if let Backend::Agents { agents, .. } = self {
            agents.kill(host);
        }
    }

    /// The agent of `host` is gone: the ranks it ran.
    pub(crate) fn host_lost(&mut self, host: usize) -> Vec<usize> {
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
