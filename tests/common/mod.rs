//! Helpers shared by the integration tests: run real jobs through the real
//! `vpml` binary and the `scenarios` rank program.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// heat3d arguments for recovery tests: small, 40 steps, a line every 5
/// and a checkpoint every 5.
pub const HEAT: &[&str] = &[
    "--points",
    "6x6x24",
    "--steps",
    "40",
    "--output-interval",
    "5",
    "--checkpoint-every",
    "5",
];

/// The `vpml` command built for this test run.
pub fn vpml() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vpml"))
}

/// An example program of this package (built by `cargo test` with the tests).
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test> -> target/<profile>/examples/<name>
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build --examples` (cargo test does)",
        path.display()
    );
    path
}

/// Jobs of one test binary run one at a time: the machine has 2 cores and
/// every job already oversubscribes it.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// `vpml run -n N --timeout 300 <extra> scenarios <name>`.
pub fn scenario(n: usize, name: &str, extra: &[&str], envs: &[(&str, &str)]) -> Output {
    let _guard = serial();
    let mut cmd = Command::new(vpml());
    cmd.args(["run", "-n", &n.to_string(), "--timeout", "300"])
        .args(extra)
        .arg(example("scenarios"))
        .arg(name);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("run vpml")
}

/// Assert that a scenario printed `ok NAME` and exited 0; show its output otherwise.
pub fn assert_ok(out: &Output, name: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == format!("ok {name}")),
        "scenario {name} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

/// `tests/c/<name>.c` built with `vpml mpicc -O2` into a temporary file
/// (removed when the returned guard is dropped).
pub fn mpicc(name: &str) -> tempfile::TempPath {
    let out = tempfile::Builder::new()
        .prefix(&format!("vpml-{name}-"))
        .tempfile()
        .expect("temporary file")
        .into_temp_path();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let built = Command::new(vpml())
        .args(["mpicc", "-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("run vpml mpicc");
    assert!(
        built.status.success(),
        "vpml mpicc failed on {name}.c: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// The seed of a test's random choices: `VPML_TEST_SEED` if set (to replay
/// a failure), else the clock. Tests print it.
pub fn seed() -> u64 {
    match std::env::var("VPML_TEST_SEED") {
        Ok(s) => s.parse().expect("VPML_TEST_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}
