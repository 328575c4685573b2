//! A sender log written by one process is read back byte-exact by another.

use std::path::PathBuf;
use std::process::Command;

use vpml_sender_log::{RecordHeader, SenderLog};

const CHILD_ENV: &str = "VPML_SENDER_LOG_CHILD_DIR";

fn payload(dest: u32, seq: u64) -> Vec<u8> {
    (0..(seq as usize * 97) % 5000)
        .map(|i| (i as u64 ^ seq ^ u64::from(dest) << 3) as u8)
        .collect()
}

#[test]
fn another_process_reads_every_record_byte_exact() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        // Child: print one line per record with a digest of its bytes.
        let log = SenderLog::open_read_only(&PathBuf::from(dir)).expect("open");
        // libtest has printed "test … " without a newline: start a fresh line.
        println!();
        for dest in log.destinations() {
            for r in log.iter_from(dest, 0, 0).map(|r| r.unwrap()) {
                let ok = r.payload == payload(dest, r.header.seq).as_slice();
                println!("record {dest} {} {} {ok}", r.header.seq, r.payload.len());
            }
        }
        return;
    }
    let tmp = tempfile::Builder::new()
        .prefix("vpml-slog-xproc-")
        .tempdir()
        .expect("a temporary directory");
    let dir = tmp.path().join("log");
    let mut log = SenderLog::create(&dir, 2, 1 << 16).expect("create");
    let mut want = Vec::new();
    for seq in 1..=40u64 {
        for dest in [0u32, 1, 3] {
            log.append(
                RecordHeader {
                    dest,
                    context: 0,
                    tag: 1,
                    seq,
                },
                &payload(dest, seq),
            )
            .expect("append");
            want.push(format!(
                "record {dest} {seq} {} true",
                payload(dest, seq).len()
            ));
        }
    }
    // The writer is still alive and mapped: the reader sees its records.
    let out = Command::new(std::env::current_exe().expect("exe"))
        .args([
            "another_process_reads_every_record_byte_exact",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, &dir)
        .output()
        .expect("spawn reader");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut got: Vec<String> = stdout
        .lines()
        .filter(|l| l.starts_with("record "))
        .map(str::to_string)
        .collect();
    got.sort();
    want.sort();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got, want);
    drop(log);
}
