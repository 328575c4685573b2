//! A checkpoint file, damaged any way: loading it gives its payload or
//! an error naming the file; and any bytes as a pessimist checkpoint's
//! payload (what follows the file's checks) decode or are refused —
//! never a panic.

#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use vpml_vprotocol::checkpoint::CheckpointStore;

fuzz_target!(|data: &[u8]| {
    let dir = common::scratch("checkpoint");
    let store = CheckpointStore::open(dir).expect("store");
    store.install(1, data).expect("install");
    match store.load_latest() {
        Ok(Some(loaded)) => vpml_vprotocol::pessimist::fuzzing::checkpoint_payload(&loaded.payload),
        Ok(None) => {}
        Err(e) => assert!(e.to_string().contains("ckpt-")),
    }
    vpml_vprotocol::pessimist::fuzzing::checkpoint_payload(data);
});
