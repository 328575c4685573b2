//! Host lists (`--hosts`) and host files (`--hostfile`): parsed or refused
//! with a message, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = vpml_launcher::agent::parse_hostfile(&text, None) {
        assert!(!e.to_string().is_empty());
    }
    if let Err(e) = vpml_launcher::agent::parse_hosts(&text, None) {
        assert!(!e.to_string().is_empty());
    }
});
