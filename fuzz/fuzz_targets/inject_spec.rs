//! `--inject-failure` specs (one per line, at most four): a plan or an
//! error, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let specs: Vec<&str> = text.lines().take(4).collect();
    vpml_launcher::fuzzing::inject_specs(&specs);
});
