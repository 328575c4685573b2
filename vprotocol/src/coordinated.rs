//! `coordinated`: coordinated checkpoint/restart. Nothing is logged and
//! no message is kept: the ranks take global checkpoints together at the
//! program's checkpoint calls (the agreement, channel drain and commit
//! are the engine's, `vpml-pml`'s `engine/coordinated.rs`), and after any
//! failure the launcher stops every rank and restarts them all from the
//! newest global checkpoint every rank wrote (`VPML_RESTART_FROM`).
//!
//! This protocol writes and reads this rank's part: `rank-R/checkpoints/`
//! under the job's log directory, one file per global checkpoint, named
//! by its number; the last two are kept (a checkpoint is complete once
//! every rank wrote it, and no rank writes the next before that, so the
//! previous one is complete everywhere while the newest may not be).
//!
//! In a job across hosts (`VPML_CHECKPOINT_COPIES=loggers`), each part
//! is also copied to the event loggers — which serve as checkpoint
//! servers on the launcher's host — before the rank says it wrote it, so
//! a committed global checkpoint survives the loss of any rank's host: a
//! rank restarted on a spare host, or whose part is damaged, reads its
//! part from there.

use std::path::{Path, PathBuf};

use vpml_pml::bootstrap::{CHECKPOINT_MARK, JobEnv, RESTART_MARK, write_output_mark};
use vpml_pml::config::{ProtocolSettings, var};
use vpml_pml::lanes::LaneMap;
use vpml_pml::protocol::{
    CallId, CommChange, CompletionKind, LoggedMessage, OutgoingMessage, PersistentInit, Protocol,
    RecvPlan, Replay, RequestInfo, SendGate, SendPlan, WaitKind,
};
use vpml_pml::recovery::EngineSnapshot;
use vpml_pml::{Error, Result, Status};

use vpml_event_logger::{Client, ClientConfig};

use crate::checkpoint::{CheckpointStore, payload_of};

/// The file in a rank's checkpoint directory that names the job it
/// belongs to.
const OWNER: &str = "job";

/// This rank's checkpoint directory under the job's log directory `root`.
pub fn checkpoint_dir(root: &Path, rank: usize) -> PathBuf {
    root.join(format!("rank-{rank}")).join("checkpoints")
}

fn fail(what: &str, e: impl std::fmt::Display) -> Error {
    Error::EngineFailed(format!("coordinated protocol: {what}: {e}"))
}

/// The `coordinated` protocol of one rank.
#[derive(Debug)]
pub struct Coordinated {
    gate: SendGate,
    store: CheckpointStore,
    /// The checkpoint this process restarted from, until the engine takes it.
    restored: Option<EngineSnapshot>,
    /// Its application bytes.
    app_state: Option<Vec<u8>>,
    /// Messages this process had sent each rank, per context, at the
    /// checkpoint it restarted from: a restarted peer must hold exactly
    /// those (nothing is kept to send again).
    sent_at_restart: Vec<LaneMap<u64>>,
    checkpoints: u64,
    checkpoint_ns: u64,
    /// The event loggers that keep a copy of each part (a job across
    /// hosts).
    copies: Option<Client>,
    rank: usize,
}

impl Coordinated {
    /// Start rank `job`'s protocol: a restarted process loads global
    /// checkpoint `job.restart_from` (0: it starts from the beginning).
    pub fn start(job: &JobEnv, settings: &ProtocolSettings) -> Result<Coordinated> {
        let root = settings
            .log_dir
            .as_ref()
            .ok_or_else(|| Error::Bootstrap(format!("{} is not set", var::LOG_DIR)))?;
        let dir = checkpoint_dir(root, job.rank);
        // A first start never resumes anything an earlier job left (a
        // reused --log-dir), nor does a rank restarted on another host,
        // which may hold an earlier job's parts: the directory says whose
        // it is.
        let owner = dir.join(OWNER);
        let ours = std::fs::read_to_string(&owner).is_ok_and(|j| j == job.job_id);
        if (job.incarnation == 0 || !ours) && dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| fail(&format!("clearing {}", dir.display()), e))?;
        }
        let store =
            CheckpointStore::open(&dir).map_err(|e| fail("opening the checkpoint directory", e))?;
        if !owner.exists() {
            std::fs::write(&owner, &job.job_id)
                .map_err(|e| fail(&format!("writing {}", owner.display()), e))?;
        }
        let copies = if settings.checkpoint_copies {
            let mut cc = ClientConfig::new(
                settings.event_loggers.clone(),
                &job.job_id,
                job.rank as u32,
                job.incarnation,
                &job.token,
            );
            cc.replicas = settings
                .replicas
                .unwrap_or(1)
                .clamp(1, settings.event_loggers.len().max(1));
            Some(Client::connect(cc).map_err(|e| fail("connecting to the event loggers", e))?)
        } else {
            None
        };
        let gate = SendGate::default();
        // Nothing to do for any send: the engine never calls `send`.
        gate.open_below(usize::MAX);
        let mut me = Coordinated {
            gate,
            store,
            restored: None,
            app_state: None,
            sent_at_restart: vec![LaneMap::new(); job.size],
            checkpoints: 0,
            checkpoint_ns: 0,
            copies,
            rank: job.rank,
        };
        if job.incarnation > 0 {
            // Parts newer than the restart point belong to a global
            // checkpoint that never completed: their numbers are taken
            // again.
            me.store
                .remove_newer_than(job.restart_from)
                .map_err(|e| fail("removing incomplete checkpoints", e))?;
            if let Some(client) = &me.copies {
                // The launcher removed their copies too, but a replaced
                // process's copy may have landed since; from now on the
                // loggers refuse those.
                client
                    .drop_copies_above(job.restart_from)
                    .map_err(|e| fail("removing incomplete checkpoint copies", e))?;
            }
            if job.restart_from > 0 {
                let payload = me.part(job.restart_from)?;
                let (snap, app) = EngineSnapshot::decode(&payload).map_err(|why| {
                    Error::Unrecoverable(format!(
                        "global checkpoint {} of rank {}: {why}",
                        job.restart_from, job.rank
                    ))
                })?;
                if snap.global_index != job.restart_from {
                    return Err(Error::Unrecoverable(format!(
                        "global checkpoint {} of rank {} says it is number {}",
                        job.restart_from, job.rank, snap.global_index
                    )));
                }
                me.sent_at_restart = snap.send_seq.clone();
                me.app_state = Some(app.to_vec());
                me.restored = Some(snap);
            }
            write_output_mark(RESTART_MARK, job.restart_from);
        }
        Ok(me)
    }
}

impl Coordinated {
    /// This rank's part of global checkpoint `index`: from this host, or
    /// else from its copy on the event loggers (installed here for the
    /// next restart).
    fn part(&self, index: u64) -> Result<Vec<u8>> {
        let cannot = |why: String| {
            Error::Unrecoverable(format!(
                "cannot restart from global checkpoint {index}: {why}"
            ))
        };
        let here = match self.store.read(index) {
            Ok(payload) => return Ok(payload),
            Err(why) => why,
        };
        let Some(client) = &self.copies else {
            return Err(cannot(here));
        };
        let bytes = client
            .load_copy_at(self.rank as u32, index, |b| {
                payload_of(b, index).map(|_| ())
            })
            .map_err(|e| cannot(format!("{here}; its copies on the event loggers: {e}")))?
            .ok_or_else(|| cannot(format!("{here}; the event loggers hold no copy of it")))?;
        let payload = payload_of(&bytes, index).map_err(cannot)?;
        self.store
            .install(index, &bytes)
            .map_err(|e| fail("installing a checkpoint copy", e))?;
        eprintln!(
            "vpml: rank {}: its part of global checkpoint {index} cannot be read on this host ({here}): restarting from its copy on the event loggers",
            self.rank
        );
        Ok(payload)
    }
}

impl Protocol for Coordinated {
    fn name(&self) -> &'static str {
        "coordinated"
    }
    fn takes_checkpoints(&self) -> bool {
        true
    }
    fn coordinated(&self) -> bool {
        true
    }
    fn send(&mut self, _: &OutgoingMessage<'_>) -> Result<()> {
        Ok(())
    }
    fn send_gate(&self) -> Option<SendGate> {
        Some(self.gate.clone())
    }
    fn keep(&mut self, _: &OutgoingMessage<'_>) -> Result<SendPlan> {
        Ok(SendPlan::Transmit)
    }
    fn idle(&mut self) {}
    fn post_recv(&mut self, _: CallId, _: &mut vpml_pml::matching::RecvSpec) -> Result<RecvPlan> {
        Ok(RecvPlan::Post)
    }
    fn matched(&mut self, _: CallId, _: usize) -> Result<()> {
        Ok(())
    }
    fn completion(
        &mut self,
        _: CallId,
        _: CompletionKind,
        _: &[Option<RequestInfo>],
        _: &[usize],
    ) -> Result<()> {
        Ok(())
    }
    fn hears_waits(&self) -> bool {
        false
    }
    fn keeps_payloads(&self) -> bool {
        false
    }
    fn hears_posted_receives(&self) -> bool {
        false
    }
    fn waited(&mut self, _: WaitKind, _: &[Option<RequestInfo>]) -> Result<()> {
        Ok(())
    }
    fn communicator(&mut self, _: &CommChange<'_>) -> Result<()> {
        Ok(())
    }
    fn persistent(&mut self, _: &PersistentInit) -> Result<()> {
        Ok(())
    }
    fn probe(&mut self, _: CallId, _: bool, _: bool, _: Option<&Status>) -> Result<()> {
        Ok(())
    }
    fn cancel(&mut self, _: CallId, _: CallId, _: bool) -> Result<()> {
        Ok(())
    }
    fn finalize(&mut self) -> Result<()> {
        Ok(())
    }
    fn stats(&self) -> Vec<(String, u64)> {
        vec![
            ("checkpoints".into(), self.checkpoints),
            ("checkpoint_ns".into(), self.checkpoint_ns),
        ]
    }
    fn take_restored(&mut self) -> Option<EngineSnapshot> {
        self.restored.take()
    }
    fn restart_state(&self) -> Option<Vec<u8>> {
        self.app_state.clone()
    }
    fn replay_ends(&self) -> Vec<(u32, u64)> {
        Vec::new()
    }
    fn replay_completion(&mut self, _: CallId, _: &[CallId]) -> Result<Replay<Vec<CallId>>> {
        Ok(Replay::Free)
    }
    fn replay_probe(
        &mut self,
        _: CallId,
        _: &vpml_pml::matching::RecvSpec,
        _: bool,
    ) -> Result<Replay<Option<(usize, i32)>>> {
        Ok(Replay::Free)
    }
    fn replay_cancel(&mut self, _: CallId, _: CallId) -> Result<Replay<bool>> {
        Ok(Replay::Free)
    }
    /// Nothing is kept: after a restart of every rank from one global
    /// checkpoint, each peer holds exactly what this rank had sent it
    /// then. Anything else is a broken checkpoint, and an error.
    fn logged_messages(&mut self, dest: usize, after: &LaneMap<u64>) -> Result<Vec<LoggedMessage>> {
        let sent = self.sent_at_restart.get(dest).cloned().unwrap_or_default();
        let contexts: Vec<u32> = sent.iter().chain(after.iter()).map(|(c, _)| c).collect();
        for ctx in contexts {
            if sent.get(ctx) != after.get(ctx) {
                return Err(Error::Unrecoverable(format!(
                    "rank {dest} holds {} of this rank's messages on context {ctx}, but this rank had sent {} at the checkpoint both restarted from",
                    after.get(ctx),
                    sent.get(ctx)
                )));
            }
        }
        Ok(Vec::new())
    }
    fn checkpoint(
        &mut self,
        engine: &EngineSnapshot,
        app: &[u8],
    ) -> Result<Vec<(usize, u32, u64)>> {
        let t0 = std::time::Instant::now();
        let mut payload = engine.encode();
        payload.extend_from_slice(app);
        // What was printed before the checkpoint leaves before it exists.
        vpml_pml::bootstrap::flush_output();
        self.store
            .save(engine.global_index, &payload)
            .map_err(|e| fail("saving a checkpoint", e))?;
        if let Some(client) = &self.copies {
            // Off the host before this rank says it wrote its part: a
            // committed checkpoint is then whole on the loggers.
            let bytes = self
                .store
                .file_bytes(engine.global_index)
                .map_err(|e| fail("reading a checkpoint to copy it", e))?;
            client
                .save_copy(engine.global_index, &bytes)
                .map_err(|e| fail("copying a checkpoint to the event loggers", e))?;
        }
        write_output_mark(CHECKPOINT_MARK, engine.global_index);
        self.checkpoints += 1;
        self.checkpoint_ns += t0.elapsed().as_nanos() as u64;
        Ok(Vec::new())
    }
    fn free_log(&mut self, _: usize, _: u32, _: u64) -> Result<()> {
        Ok(())
    }
    fn recorded_incoming(&mut self, _: usize) -> Result<Vec<LoggedMessage>> {
        Ok(Vec::new())
    }
}
