//! Side-by-side collectives: vpml against the reference MPIs installed here.
//!
//! ```text
//! cargo bench --bench collectives                 # 3 rounds, medians
//! cargo bench --bench collectives -- --rounds 5
//! ```
//!
//! allreduce of 8 B and 1 MiB and bcast of 1 MiB on 2, 4 and 8 ranks
//! (`examples/collbench.rs` and `benches/c/collectives.c`, same method).
//! Implementations take turns within each round; the table shows medians
//! and the ratio vpml/reference. A reference that is missing, fails or
//! exceeds its time limit is reported and skipped. Results also go to
//! `target/bench-report/collectives.json`.

mod common;

use std::collections::BTreeMap;

use common::{
    Config, FLAVOURS, arg, example, json_lines, median, reference, vpml_run, write_report,
};

fn main() {
    let rounds = arg("--rounds").unwrap_or(3).max(1);
    let program = match example("collbench") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("collectives bench: {e}");
            std::process::exit(1);
        }
    };
    let mut report = Vec::new();
    // (ranks, impl, op, bytes) -> samples in µs
    let mut samples: BTreeMap<(usize, String, String, u64), Vec<f64>> = BTreeMap::new();
    let mut names = vec!["vpml".to_string()];
    for ranks in [2usize, 4, 8] {
        let mut configs = vec![Config {
            name: "vpml".into(),
            cmd: [vpml_run(ranks, &program), vec!["--json".into()]].concat(),
            envs: vec![],
        }];
        for f in FLAVOURS {
            match reference(f, "collectives.c", ranks) {
                Ok(c) => configs.push(c),
                Err(why) => println!("# skipping {f}: {why}"),
            }
        }
        for c in &configs[1..] {
            if !names.contains(&c.name) {
                names.push(c.name.clone());
            }
        }
        for round in 0..rounds {
            for c in &configs {
                eprintln!("# {ranks} ranks, round {}/{rounds}: {}", round + 1, c.name);
                match json_lines(c, 120) {
                    Ok(rows) => {
                        for v in rows {
                            if let (Some(op), Some(b), Some(us)) =
                                (v["op"].as_str(), v["bytes"].as_u64(), v["us"].as_f64())
                            {
                                samples
                                    .entry((ranks, c.name.clone(), op.into(), b))
                                    .or_default()
                                    .push(us);
                            }
                        }
                    }
                    Err(e) => println!("# {ranks} ranks: {e}"),
                }
            }
        }
    }
    println!(
        "# collectives, medians of {rounds} round(s), µs per call (slowest rank); ratio = vpml / reference"
    );
    print!("{:>5} {:>10} {:>8} {:>10}", "ranks", "op", "bytes", "vpml");
    for n in &names[1..] {
        print!(" {:>10} {:>6}", n, "ratio");
    }
    println!();
    for ranks in [2usize, 4, 8] {
        for (op, bytes) in [
            ("allreduce", 8u64),
            ("allreduce", 1 << 20),
            ("bcast", 1 << 20),
        ] {
            let get = |name: &str| {
                median(
                    samples
                        .get(&(ranks, name.to_string(), op.to_string(), bytes))
                        .cloned()
                        .unwrap_or_default(),
                )
            };
            let v = get("vpml");
            print!("{ranks:>5} {op:>10} {bytes:>8} {v:>10.2}");
            let mut row =
                serde_json::json!({"ranks": ranks, "op": op, "bytes": bytes, "vpml_us": v});
            for n in &names[1..] {
                let r = get(n);
                print!(" {r:>10.2} {:>6.2}", v / r);
                row[format!("{n}_us")] = serde_json::json!(r);
            }
            println!();
            report.push(row);
        }
    }
    write_report(
        "collectives.json",
        &serde_json::json!({"rounds": rounds, "rows": report}),
    );
}
