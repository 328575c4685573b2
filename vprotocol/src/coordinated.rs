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

use crate::checkpoint::CheckpointStore;

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
        if job.incarnation == 0 && dir.exists() {
            // A first start never resumes anything an earlier job left
            // (a reused --log-dir).
            std::fs::remove_dir_all(&dir)
                .map_err(|e| fail(&format!("clearing {}", dir.display()), e))?;
        }
        let store =
            CheckpointStore::open(&dir).map_err(|e| fail("opening the checkpoint directory", e))?;
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
        };
        if job.incarnation > 0 {
            if job.restart_from > 0 {
                let payload = me.store.read(job.restart_from).map_err(|why| {
                    Error::Unrecoverable(format!(
                        "cannot restart from global checkpoint {}: {why}",
                        job.restart_from
                    ))
                })?;
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
