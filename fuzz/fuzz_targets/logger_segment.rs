//! An event logger's stored segment, damaged any way: reading it back
//! (`read_stored_events`, as `vpml replay` and a restarted logger do) gives
//! the events or an error naming the file and offset, never a panic.

#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let root = common::scratch("logger_segment");
    let dir = root.join("jobs").join("job").join("0");
    std::fs::create_dir_all(&dir).expect("rank directory");
    std::fs::write(dir.join(format!("seg-{:020}.log", 1)), data).expect("segment");
    if let Err(e) = vpml_event_logger::read_stored_events(root, "job", 0) {
        assert!(!e.to_string().is_empty());
    }
});
