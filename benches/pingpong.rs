//! Side-by-side ping-pong: vpml against the reference MPIs installed here.
//!
//! ```text
//! cargo bench --bench pingpong                 # 3 rounds, medians
//! cargo bench --bench pingpong -- --rounds 5 --max 1048576
//! ```
//!
//! Runs `examples/pingpong` under `vpml run` and `benches/c/pingpong.c`
//! (the same method) under Open MPI and MPICH when their `mpicc` wrappers
//! are installed (`apt-get install openmpi-bin libopenmpi-dev mpich
//! libmpich-dev`); a missing one is skipped with a line saying so. The
//! implementations take turns, each round runs every one once, and the table
//! shows per-size medians and the ratios vpml/reference measured in this
//! run. Machine-readable results go to `target/bench-report/pingpong.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// One implementation under test: a name and the command that runs it.
struct Config {
    name: String,
    cmd: Vec<String>,
    envs: Vec<(String, String)>,
}

fn target_dir() -> PathBuf {
    // target/release/deps/pingpong-<hash> -> target/release
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target/release"))
}

fn ensure_example(dir: &Path) -> Result<PathBuf, String> {
    let exe = dir.join("examples").join("pingpong");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--example", "pingpong"])
        .status()
        .map_err(|e| format!("cannot run cargo to build the pingpong example: {e}"))?;
    if !status.success() || !exe.exists() {
        return Err(format!("building {} failed", exe.display()));
    }
    Ok(exe)
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Build the C ping-pong with `mpicc.<flavour>`, if installed.
fn reference(flavour: &str, dir: &Path, max: usize) -> Result<Config, String> {
    let mpicc = which(&format!("mpicc.{flavour}"))
        .ok_or_else(|| format!("mpicc.{flavour} not installed"))?;
    let mpirun = which(&format!("mpirun.{flavour}"))
        .ok_or_else(|| format!("mpirun.{flavour} not installed"))?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/c/pingpong.c");
    let out_dir = dir.join("bench-c");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let exe = out_dir.join(format!("pingpong-{flavour}"));
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
    let mut cmd = vec![mpirun.display().to_string(), "-n".into(), "2".into()];
    let mut envs = Vec::new();
    if flavour == "openmpi" {
        cmd.extend(["--bind-to".into(), "core".into()]);
        envs.push(("OMPI_ALLOW_RUN_AS_ROOT".into(), "1".into()));
        envs.push(("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM".into(), "1".into()));
    } else {
        cmd.extend(["-bind-to".into(), "core".into()]);
    }
    cmd.extend([
        exe.display().to_string(),
        "--json".into(),
        "--name".into(),
        flavour.into(),
        "--max".into(),
        max.to_string(),
    ]);
    Ok(Config {
        name: flavour.into(),
        cmd,
        envs,
    })
}

/// Run one configuration; returns size -> (latency µs, bandwidth MB/s).
fn measure(c: &Config) -> Result<BTreeMap<u64, (f64, f64)>, String> {
    let out = Command::new(&c.cmd[0])
        .args(&c.cmd[1..])
        .envs(c.envs.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|e| format!("{}: {e}", c.cmd[0]))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            c.name,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut rows = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let (Some(b), Some(l), Some(bw)) = (
            v["bytes"].as_u64(),
            v["latency_us"].as_f64(),
            v["bandwidth_mbs"].as_f64(),
        ) {
            rows.insert(b, (l, bw));
        }
    }
    if rows.is_empty() {
        return Err(format!("{} printed no results", c.name));
    }
    Ok(rows)
}

fn median(mut v: Vec<f64>) -> f64 {
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

fn arg(args: &[String], name: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = arg(&args, "--rounds").unwrap_or(3).max(1);
    let max = arg(&args, "--max").unwrap_or(4 << 20);
    let dir = target_dir();
    let example = match ensure_example(&dir) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("pingpong bench: {e}");
            std::process::exit(1);
        }
    };
    let mut configs = vec![Config {
        name: "vpml".into(),
        cmd: vec![
            env!("CARGO_BIN_EXE_vpml").into(),
            "run".into(),
            "-n".into(),
            "2".into(),
            example.display().to_string(),
            "--json".into(),
            "--max".into(),
            max.to_string(),
        ],
        envs: vec![],
    }];
    for flavour in ["openmpi", "mpich"] {
        match reference(flavour, &dir, max) {
            Ok(c) => configs.push(c),
            Err(why) => println!("# skipping {flavour}: {why}"),
        }
    }
    // samples[config][size] = list of (lat, bw) over rounds
    let mut samples: Vec<BTreeMap<u64, Vec<(f64, f64)>>> = vec![BTreeMap::new(); configs.len()];
    for round in 0..rounds {
        for (i, c) in configs.iter().enumerate() {
            eprintln!("# round {}/{rounds}: {}", round + 1, c.name);
            match measure(c) {
                Ok(rows) => {
                    for (size, r) in rows {
                        samples[i].entry(size).or_default().push(r);
                    }
                }
                Err(e) => eprintln!("# {e}"),
            }
        }
    }
    let med = |i: usize, size: u64| -> (f64, f64) {
        let s = samples[i].get(&size).cloned().unwrap_or_default();
        (
            median(s.iter().map(|x| x.0).collect()),
            median(s.iter().map(|x| x.1).collect()),
        )
    };
    let sizes: Vec<u64> = samples[0].keys().copied().collect();
    println!("# ping-pong, 2 ranks, medians of {rounds} round(s); ratio = vpml / reference");
    print!("{:>9} {:>9}", "bytes", "vpml_us");
    for c in &configs[1..] {
        print!(" {:>10} {:>6}", format!("{}_us", c.name), "ratio");
    }
    print!(" {:>10}", "vpml_MB/s");
    for c in &configs[1..] {
        print!(" {:>12} {:>6}", format!("{}_MB/s", c.name), "ratio");
    }
    println!();
    let mut report = Vec::new();
    for &s in &sizes {
        let (vl, vb) = med(0, s);
        print!("{s:>9} {vl:>9.3}");
        let mut row =
            serde_json::json!({"bytes": s, "vpml": {"latency_us": vl, "bandwidth_mbs": vb}});
        for i in 1..configs.len() {
            let (l, _) = med(i, s);
            print!(" {l:>10.3} {:>6.2}", vl / l);
        }
        print!(" {vb:>10.0}");
        for (i, c) in configs.iter().enumerate().skip(1) {
            let (l, b) = med(i, s);
            print!(" {b:>12.0} {:>6.2}", vb / b);
            row[&c.name] = serde_json::json!({"latency_us": l, "bandwidth_mbs": b});
        }
        println!();
        report.push(row);
    }
    let out = dir.parent().unwrap_or(&dir).join("bench-report");
    let path = out.join("pingpong.json");
    let written = std::fs::create_dir_all(&out).and_then(|_| {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&serde_json::json!({"rounds": rounds, "rows": report}))
                .unwrap_or_default(),
        )
    });
    match written {
        Ok(()) => println!("# written {}", path.display()),
        Err(e) => eprintln!("# cannot write {}: {e}", path.display()),
    }
}
