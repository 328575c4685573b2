//! Lines a stranger or a rank sends the launcher's key/value service: each
//! is a HELLO, a request or an error — never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for line in String::from_utf8_lossy(data).lines() {
        vpml_launcher::fuzzing::kv_line(line);
    }
});
