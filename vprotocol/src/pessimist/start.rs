//! Starting the protocol of one rank: connecting to the event loggers
//! ([`Pessimist::start`]), then either a first start, which begins with
//! nothing, or the restart of a crashed rank (incarnation > 0), which
//! takes over what its previous process left (`recovery.rs`); both end in
//! the same [`Pessimist`].

use std::path::Path;
use vpml_pml::protocol::SendGate;

use vpml_event_logger::{Client, ClientConfig};
use vpml_pml::Result;
use vpml_sender_log::SenderLog;

use super::checkpointing::SavedCheckpoint;
use super::{Config, Counters, Pessimist, fail, recovery};
use crate::checkpoint::CheckpointStore;
use crate::event_log::EventLog;
use crate::previous_sends::PreviousSends;
use crate::replay_log::ReplayLog;

/// What a process starts from: nothing at a first start ([`first_start`]);
/// after a restart, what its previous process left ([`recovery::restart`]).
pub(super) struct Start {
    pub(super) store: CheckpointStore,
    /// The checkpoint restarted from.
    pub(super) loaded: Option<recovery::Resumed>,
    /// What the previous process sent after that checkpoint.
    pub(super) previous: PreviousSends,
    pub(super) log: SenderLog,
    /// The events logged after that checkpoint.
    pub(super) replay: ReplayLog,
}

/// A first start never resumes anything an earlier job left.
fn first_start(cfg: &Config, ckpt_dir: &Path) -> Result<Start> {
    if ckpt_dir.exists() {
        std::fs::remove_dir_all(ckpt_dir)
            .map_err(|e| fail(&format!("clearing {}", ckpt_dir.display()), e))?;
    }
    let store =
        CheckpointStore::open(ckpt_dir).map_err(|e| fail("opening the checkpoint directory", e))?;
    let log = new_sender_log(cfg)?;
    Ok(Start {
        store,
        loaded: None,
        previous: PreviousSends::default(),
        log,
        replay: ReplayLog::default(),
    })
}

/// An empty sender log (nothing to continue).
pub(super) fn new_sender_log(cfg: &Config) -> Result<SenderLog> {
    let rank = cfg.rank as u32;
    let log = if cfg.log_in_memory {
        SenderLog::create_in_memory(rank, cfg.segment_size)
    } else {
        SenderLog::create(&cfg.log_dir, rank, cfg.segment_size)
            .map_err(|e| fail("creating the sender log", e))?
    };
    bounded(log, cfg)
}

/// `log`, holding at most the configured memory (full segments move to
/// the spill directory).
pub(super) fn bounded(mut log: SenderLog, cfg: &Config) -> Result<SenderLog> {
    if let Some(limit) = cfg.memory_limit {
        log.bound(limit, &cfg.spill_dir)
            .map_err(|e| fail("setting up the sender log's spill directory", e))?;
    }
    Ok(log)
}

impl Pessimist {
    /// Connect to the loggers and create the sender log.
    pub fn start(cfg: Config) -> Result<Pessimist> {
        let mut cc = ClientConfig::new(
            cfg.loggers.clone(),
            &cfg.job,
            cfg.rank as u32,
            cfg.incarnation,
            &cfg.token,
        );
        cc.replicas = cfg.replicas;
        cc.send_eagerly = cfg.send_eagerly;
        cc.survivors_acknowledge = cfg.loggers_restarted;
        let client = Client::connect(cc).map_err(|e| fail("connecting to the event loggers", e))?;
        Pessimist::start_with(cfg, Box::new(client))
    }

    /// Start over `client` (the simulator passes its in-memory loggers;
    /// `cfg.loggers` and the token are then unused).
    pub fn start_with(cfg: Config, client: Box<dyn EventLog>) -> Result<Pessimist> {
        let ckpt_dir = cfg.log_dir.join("checkpoints");
        // A restarted process takes over what its previous one left
        // (`recovery.rs`).
        let Start {
            store,
            loaded,
            previous,
            log,
            replay,
        } = if cfg.incarnation > 0 {
            recovery::restart(&cfg, client.as_ref(), &ckpt_dir)?
        } else {
            first_start(&cfg, &ckpt_dir)?
        };
        let durable = client.durable();
        let next_checkpoint = match &loaded {
            Some(c) => c.index + 1,
            None => store
                .indices()
                .map_err(|e| fail("listing the checkpoints", e))?
                .last()
                .map_or(1, |i| i + 1),
        };
        let restart_from = loaded.as_ref().map_or(0, |c| c.index);
        let (newest, restored, app_state) = match loaded {
            Some(c) => (
                Some(SavedCheckpoint {
                    event_id: c.event_id,
                    recv_seq: c.snap.recv_seq.clone(),
                }),
                Some(c.snap),
                Some(c.app),
            ),
            None => (None, None, None),
        };
        let counters = Counters {
            events_replayed: replay.len() as u64,
            ..Counters::default()
        };
        if cfg.incarnation > 0 {
            vpml_pml::bootstrap::write_output_mark(vpml_pml::bootstrap::RESTART_MARK, restart_from);
        }
        Ok(Pessimist {
            replaying: !replay.done(),
            previous,
            rank: cfg.rank,
            incarnation: cfg.incarnation,
            client,
            log,
            none_runs: Default::default(),
            durable,
            last_put: durable,
            gate: SendGate::default(),
            counters,
            store,
            next_checkpoint,
            newest,
            restored,
            app_state,
            replay,
            log_in_memory: cfg.log_in_memory,
            keep_logs: cfg.keep_logs,
            copies: cfg.copies,
        })
    }
}
