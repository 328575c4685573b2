//! The flusher of `fsync` mode: one thread doing group commits — one
//! `fdatasync` per file for every put that wrote to it meanwhile — and then
//! acknowledging those puts.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crossbeam_channel::Receiver;
use vpml_fault_points::fault_point;

use super::conn::ConnWriter;
use super::{Shared, lock};
use crate::event::EventId;
use crate::storage::RankLog;
use crate::wire::{ErrorCode, Message};

/// A put waiting for the group commit that makes it durable.
pub(super) struct FlushReq {
    pub(super) file: Arc<File>,
    pub(super) log: Arc<Mutex<RankLog>>,
    pub(super) conn: Arc<ConnWriter>,
    pub(super) id: EventId,
}

pub(super) fn flusher(shared: &Shared, rx: Receiver<FlushReq>) {
    while let Ok(first) = rx.recv() {
        let mut reqs = vec![first];
        reqs.extend(rx.try_iter());
        // One fsync per file covers every put that wrote to it meanwhile.
        let mut synced: HashMap<*const File, Result<(), String>> = HashMap::new();
        for r in &reqs {
            let key = Arc::as_ptr(&r.file);
            if synced.contains_key(&key) {
                continue;
            }
            let outcome = r.file.sync_data().map_err(|e| e.to_string());
            shared.metrics.fsyncs.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = &outcome {
                // After a failed fsync the kernel may have dropped the data:
                // this log can no longer promise anything.
                let why = format!("fsync failed: {e}");
                tracing::error!(error = %e, "fsync failed; the rank's log is marked failed");
                lock(&r.log).fail(why);
            }
            synced.insert(key, outcome);
        }
        let mut acks: HashMap<*const ConnWriter, (Arc<ConnWriter>, EventId)> = HashMap::new();
        for r in reqs {
            match &synced[&Arc::as_ptr(&r.file)] {
                Ok(()) => {
                    let e = acks
                        .entry(Arc::as_ptr(&r.conn))
                        .or_insert_with(|| (Arc::clone(&r.conn), 0));
                    e.1 = e.1.max(r.id);
                }
                Err(e) => r
                    .conn
                    .fail(ErrorCode::Storage, format!("fsync failed: {e}")),
            }
        }
        if !acks.is_empty() {
            fault_point!("logger.before_ack");
        }
        for (_, (conn, id)) in acks {
            // A failed send means the connection is gone; its reader sees it.
            let _ = conn.send(&Message::Ack { highest: id });
        }
    }
}
