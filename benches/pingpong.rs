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

mod common;

use std::collections::BTreeMap;

use common::{
    Config, FLAVOURS, arg, example, json_lines, median, reference, vpml_run, write_report,
};

/// Run one configuration; returns size -> (latency µs, bandwidth MB/s).
fn measure(c: &Config) -> Result<BTreeMap<u64, (f64, f64)>, String> {
    let mut rows = BTreeMap::new();
    for v in json_lines(c, 600)? {
        if let (Some(b), Some(l), Some(bw)) = (
            v["bytes"].as_u64(),
            v["latency_us"].as_f64(),
            v["bandwidth_mbs"].as_f64(),
        ) {
            rows.insert(b, (l, bw));
        }
    }
    Ok(rows)
}

fn main() {
    let rounds = arg("--rounds").unwrap_or(3).max(1);
    let max = arg("--max").unwrap_or(4 << 20);
    let example = match example("pingpong") {
        Ok(e) => e,
        Err(e) => {
            eprintln!("pingpong bench: {e}");
            std::process::exit(1);
        }
    };
    let extra = vec!["--json".to_string(), "--max".into(), max.to_string()];
    let mut configs = vec![Config {
        name: "vpml".into(),
        cmd: [vpml_run(2, &example), extra.clone()].concat(),
        envs: vec![],
    }];
    for flavour in FLAVOURS {
        match reference(flavour, "pingpong.c", 2) {
            Ok(mut c) => {
                c.cmd.extend(extra.iter().cloned());
                configs.push(c);
            }
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
    write_report(
        "pingpong.json",
        &serde_json::json!({"rounds": rounds, "rows": report}),
    );
}
