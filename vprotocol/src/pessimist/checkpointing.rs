//! Taking a checkpoint, and the garbage collection it allows.
//!
//! [`Pessimist::save_checkpoint`] (the body of `Protocol::checkpoint`)
//! waits until every event put so far is durable, then saves the engine's
//! state, the id of the last event before it and the application's bytes
//! ([`encode_checkpoint`]) in the rank's `CheckpointStore`, which keeps
//! the last two. A memory sender log is spilled to a file first
//! ([`spill_path`]): the records peers may still need must outlive the
//! process. With copies on, the checkpoint also goes to the event loggers
//! (`crate::offhost`), for a restart on another host.
//!
//! Then everything older than the *older* kept checkpoint is freed: the
//! loggers truncate this rank's events up to that checkpoint's last event,
//! and the engine tells every sender up to which sequence number it may
//! free its log records to this rank; each sender frees them in
//! [`Pessimist::free_records`] (the body of `Protocol::free_log`).
//! Keeping two checkpoints lets a restart fall back to the older one when
//! the newer is damaged: what it needs is still there.
//!
//! A restarted process reads a checkpoint back with [`decode_checkpoint`]
//! (`recovery.rs`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use vpml_fault_points::fault_point;
use vpml_pml::Result;
use vpml_pml::lanes::LaneMap;
use vpml_pml::recovery::EngineSnapshot;

use super::{Pessimist, fail};

/// What a checkpoint of this protocol holds besides the engine's state.
pub(super) struct SavedCheckpoint {
    /// Id of the last event logged before it (all durable).
    pub(super) event_id: u64,
    /// Messages received from each rank then, per context.
    pub(super) recv_seq: Vec<LaneMap<u64>>,
}

/// Where checkpoint `index` keeps the sender-log records of a memory log.
pub(super) fn spill_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("log-{index:010}.vlog"))
}

/// Encode a checkpoint: last event id, engine snapshot, application bytes.
fn encode_checkpoint(event_id: u64, engine: &EngineSnapshot, app: &[u8]) -> Vec<u8> {
    let e = engine.encode();
    let mut b = Vec::with_capacity(16 + e.len() + app.len());
    vpml_codec::put_u64(&mut b, event_id);
    vpml_codec::put_bytes(&mut b, &e);
    b.extend_from_slice(app);
    b
}

/// Decode what [`encode_checkpoint`] wrote: (last event id, engine
/// snapshot, application bytes).
pub(super) fn decode_checkpoint(
    b: &[u8],
) -> std::result::Result<(u64, EngineSnapshot, Vec<u8>), String> {
    let mut r = vpml_codec::Reader::new(b, "checkpoint payload");
    let (event_id, engine) = (|| {
        let event_id = r.u64()?;
        let len = r.count(1)?;
        Ok::<_, vpml_codec::Error>((event_id, r.bytes(len)?))
    })()
    .map_err(|e| e.to_string())?;
    let (snap, rest) = EngineSnapshot::decode(engine)?;
    if !rest.is_empty() {
        return Err("trailing bytes after the engine state".into());
    }
    Ok((event_id, snap, r.rest().to_vec()))
}

impl Pessimist {
    /// Save a checkpoint (`Protocol::checkpoint`): returns, for each
    /// sender and context, up to which sequence number it may free its log
    /// records to this rank.
    pub(super) fn save_checkpoint(
        &mut self,
        engine: &EngineSnapshot,
        app: &[u8],
    ) -> Result<Vec<(usize, u32, u64)>> {
        let t0 = Instant::now();
        // The checkpoint names its last event; it must be durable so the
        // loggers may later truncate up to it.
        self.client
            .wait_all_durable()
            .map_err(|e| fail("waiting for the event loggers", e))?;
        self.durable = self.last_put;
        // Everything logged so far precedes it — unless this process still
        // re-executes: then the events of its later calls are still to be
        // replayed by any process that restarts from this checkpoint.
        let event_id = match self.replay.first_event_after(&engine.last_calls) {
            Some(first) if self.replaying => first - 1,
            _ => self.last_put,
        };
        let payload = encode_checkpoint(event_id, engine, app);
        if self.log_in_memory {
            // The records peers may still need outlive this process only
            // in a file: written before the checkpoint that relies on it.
            self.log
                .save_kept(&spill_path(self.store.dir(), self.next_checkpoint))
                .map_err(|e| fail("writing the sender log out", e))?;
        }
        // What was printed before the checkpoint leaves before it exists.
        vpml_pml::bootstrap::flush_output();
        self.store
            .save(self.next_checkpoint, &payload)
            .map_err(|e| fail("saving a checkpoint", e))?;
        fault_point!("checkpoint.after_write");
        if self.log_in_memory {
            self.remove_stale_spills()?;
        }
        if self.copies {
            crate::offhost::save(
                self.client.as_ref(),
                &self.store,
                &self.log,
                self.next_checkpoint,
            )?;
        }
        vpml_pml::bootstrap::write_output_mark(
            vpml_pml::bootstrap::CHECKPOINT_MARK,
            self.next_checkpoint,
        );
        fault_point!("checkpoint.before_gc");
        self.next_checkpoint += 1;
        // Free what precedes the older of the two kept checkpoints.
        let older = self.newest.replace(SavedCheckpoint {
            event_id,
            recv_seq: engine.recv_seq.clone(),
        });
        let mut frees = Vec::new();
        if let Some(older) = older.filter(|_| !self.keep_logs) {
            if older.event_id > 0 {
                self.client
                    .truncate(older.event_id)
                    .map_err(|e| fail("truncating the logged events", e))?;
            }
            frees = older
                .recv_seq
                .iter()
                .enumerate()
                .flat_map(|(peer, counts)| counts.iter().map(move |(c, n)| (peer, c, n)))
                .collect();
        }
        self.counters.checkpoints += 1;
        self.counters.checkpoint_ns += t0.elapsed().as_nanos() as u64;
        Ok(frees)
    }

    /// Delete the log spill files of checkpoints that are gone.
    fn remove_stale_spills(&self) -> Result<()> {
        let kept = self
            .store
            .indices()
            .map_err(|e| fail("listing the checkpoints", e))?;
        let oldest = kept.first().copied().unwrap_or(0);
        let dir = self.store.dir();
        let entries =
            std::fs::read_dir(dir).map_err(|e| fail(&format!("listing {}", dir.display()), e))?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let index = name
                .strip_prefix("log-")
                .and_then(|n| n.strip_suffix(".vlog"))
                .and_then(|n| n.parse::<u64>().ok());
            if index.is_some_and(|i| i < oldest) {
                std::fs::remove_file(e.path())
                    .map_err(|err| fail(&format!("removing {}", e.path().display()), err))?;
            }
        }
        Ok(())
    }

    /// Receiver `dest` checkpointed (`Protocol::free_log`): free the
    /// records to it on `context` up to `up_to`.
    pub(super) fn free_records(&mut self, dest: usize, context: u32, up_to: u64) -> Result<()> {
        let before = self.log.records_to(dest as u32) as u64;
        self.log
            .free_up_to(dest as u32, context, up_to)
            .map_err(|e| fail("freeing sender-log records", e))?;
        let after = self.log.records_to(dest as u32) as u64;
        self.counters.records_freed += before - after;
        // The gate stays as it is: freeing never touches the current
        // segment, where the ready room is.
        Ok(())
    }
}
