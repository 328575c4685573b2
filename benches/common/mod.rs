//! Helpers shared by the side-by-side benchmarks: find the build, build the
//! C reference programs with the installed MPIs, run commands that print
//! JSON lines, and take medians.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// One implementation under test: a name and the command that runs it.
pub struct Config {
    /// Name in tables and JSON (`vpml`, `openmpi`, `mpich`).
    pub name: String,
    /// Program and arguments.
    pub cmd: Vec<String>,
    /// Extra environment.
    pub envs: Vec<(String, String)>,
}

/// `target/release` (the directory holding this benchmark's build).
pub fn target_dir() -> PathBuf {
    // target/release/deps/<bench>-<hash> -> target/release
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target/release"))
}

/// Build (if needed) and locate the release build of example `name`.
pub fn example(name: &str) -> Result<PathBuf, String> {
    let exe = target_dir().join("examples").join(name);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--example", name])
        .status()
        .map_err(|e| format!("cannot run cargo to build example {name}: {e}"))?;
    if !status.success() || !exe.exists() {
        return Err(format!("building {} failed", exe.display()));
    }
    Ok(exe)
}

/// Build vpml's MPI library (`libvpml_mpich.so`, which `vpml run` gives
/// MPICH-built programs) in release mode: the benchmark does not depend on
/// it, so `cargo bench` alone would run C programs on a stale or missing
/// build.
pub fn build_mpi_library() -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "vpml-mpi-abi"])
        .status()
        .map_err(|e| format!("cannot run cargo to build vpml's MPI library: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err("building vpml's MPI library failed".into())
    }
}

/// The `vpml run -n N` prefix for a program.
pub fn vpml_run(ranks: usize, program: &Path) -> Vec<String> {
    vpml_run_with(ranks, &[], program)
}

/// The `vpml run -n N OPTIONS…` prefix for a program.
pub fn vpml_run_with(ranks: usize, options: &[&str], program: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec![
        env!("CARGO_BIN_EXE_vpml").into(),
        "run".into(),
        "-n".into(),
        ranks.to_string(),
    ];
    v.extend(options.iter().map(|o| o.to_string()));
    v.push(program.display().to_string());
    v
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// The reference MPIs this benchmark knows.
pub const FLAVOURS: [&str; 2] = ["openmpi", "mpich"];

/// Compile `benches/c/<source>` with `mpicc.<flavour>` (unless the build
/// is newer than the source); the program.
pub fn build_c(flavour: &str, source: &str) -> Result<PathBuf, String> {
    let mpicc = which(&format!("mpicc.{flavour}"))
        .ok_or_else(|| format!("mpicc.{flavour} not installed"))?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/c")
        .join(source);
    let out_dir = target_dir().join("bench-c");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let exe = out_dir.join(format!("{}-{flavour}", source.trim_end_matches(".c")));
    // Built already from this source (a part asks for it more than once).
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(built), Some(written)) = (modified(&exe), modified(&src))
        && built > written
    {
        return Ok(exe);
    }
    let st = Command::new(&mpicc)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .map_err(|e| format!("{}: {e}", mpicc.display()))?;
    if !st.success() {
        return Err(format!(
            "{} failed to compile {}",
            mpicc.display(),
            src.display()
        ));
    }
    Ok(exe)
}

/// Compile `benches/c/<source>` with `mpicc.<flavour>` and return the
/// command prefix that runs it on `ranks` ranks (binding to cores unless
/// oversubscribed), or why it cannot.
pub fn reference(flavour: &str, source: &str, ranks: usize) -> Result<Config, String> {
    let mpirun = which(&format!("mpirun.{flavour}"))
        .ok_or_else(|| format!("mpirun.{flavour} not installed"))?;
    let exe = build_c(flavour, source)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if flavour == "mpich" && ranks > cores {
        return Err(format!(
            "MPICH busy-polls with more ranks ({ranks}) than cores ({cores}) and does not finish in reasonable time"
        ));
    }
    let mut cmd = vec![mpirun.display().to_string(), "-n".into(), ranks.to_string()];
    let mut envs = Vec::new();
    if flavour == "openmpi" {
        if ranks > cores {
            cmd.extend(["--oversubscribe".into(), "--bind-to".into(), "none".into()]);
        } else {
            cmd.extend(["--bind-to".into(), "core".into()]);
        }
        // One-sided on one host through its shared-memory component:
        // the default (osc/rdma) crashes in MPI_Compare_and_swap in Open
        // MPI 4.1.4 (signal 11, also in a 20-line program).
        cmd.extend(["--mca".into(), "osc".into(), "sm,pt2pt".into()]);
        envs.push(("OMPI_ALLOW_RUN_AS_ROOT".into(), "1".into()));
        envs.push(("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM".into(), "1".into()));
    } else if ranks <= cores {
        cmd.extend(["-bind-to".into(), "core".into()]);
    }
    cmd.extend([exe.display().to_string(), "--name".into(), flavour.into()]);
    Ok(Config {
        name: flavour.into(),
        cmd,
        envs,
    })
}

/// Run a configuration (killed after `timeout_s`) and parse its JSON lines.
pub fn json_lines(c: &Config, timeout_s: u64) -> Result<Vec<Value>, String> {
    let out = Command::new("timeout")
        .arg(timeout_s.to_string())
        .args(&c.cmd)
        .envs(c.envs.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|e| format!("{}: {e}", c.cmd[0]))?;
    if !out.status.success() {
        let why = if out.status.code() == Some(124) {
            format!("timed out after {timeout_s} s")
        } else {
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        };
        return Err(format!("{} failed ({why})", c.name));
    }
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if rows.is_empty() {
        return Err(format!("{} printed no results", c.name));
    }
    Ok(rows)
}

/// CPU-bound processes competing with a benchmark for the cores, stopped
/// when dropped.
pub struct Busy(Vec<std::process::Child>);

impl Busy {
    /// Start `n` busy loops (`sh -c 'while :; do :; done'`).
    pub fn start(n: usize) -> Busy {
        Busy(
            (0..n)
                .filter_map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .map_err(|e| eprintln!("# cannot start a busy loop: {e}"))
                        .ok()
                })
                .collect(),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Median of the samples (NaN if none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The value after `--name` on the command line, parsed.
pub fn arg(name: &str) -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

/// Write `value` as pretty JSON to `target/bench-report/<file>`.
pub fn write_report(file: &str, value: &Value) {
    let dir = target_dir();
    let out = dir.parent().unwrap_or(&dir).join("bench-report");
    let path = out.join(file);
    let written = std::fs::create_dir_all(&out).and_then(|_| {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(value).unwrap_or_default(),
        )
    });
    match written {
        Ok(()) => println!("# written {}", path.display()),
        Err(e) => eprintln!("# cannot write {}: {e}", path.display()),
    }
}
