//! Events logged per message received for the NAS-like patterns under
//! the pessimist protocol, next to seed 002's Table I.

use serde_json::{Value, json};

use super::common::{example, vpml_run_with};

/// Events logged per message received for the NAS-like patterns under
/// pessimist, next to seed 002's Table I. Returns JSON rows.
pub(crate) fn patterns() -> Vec<Value> {
    let mut rows = Vec::new();
    println!(
        "\n## patterns — events logged / messages received under pessimist (seed 002, Table I)"
    );
    println!(
        "{:>12} {:>5} {:>10} {:>10} {:>8} {:>12}",
        "program", "ranks", "received", "events", "percent", "paper"
    );
    for (name, ranks, paper, args) in [
        ("cg-pattern", 4, "0 %", vec!["--iterations", "100"]),
        ("mg-pattern", 8, "20-40 %", vec!["--cycles", "10"]),
        ("lu-pattern", 4, "~1 %", vec!["--iterations", "10"]),
    ] {
        let program = match example(name) {
            Ok(p) => p,
            Err(e) => {
                println!("# {name}: {e}");
                continue;
            }
        };
        let mut cmd = vpml_run_with(ranks, &["--protocol", "pessimist", "--stats"], &program);
        cmd.extend(args.iter().map(|a| a.to_string()));
        let out = match std::process::Command::new(&cmd[0]).args(&cmd[1..]).output() {
            Ok(o) if o.status.success() => o,
            Ok(o) => {
                println!(
                    "# {name} failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                continue;
            }
            Err(e) => {
                println!("# {name}: {e}");
                continue;
            }
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        let sum = |key: &str| -> u64 {
            stderr
                .lines()
                .filter(|l| l.starts_with("vpml stats:"))
                .flat_map(|l| l.split_whitespace())
                .filter_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
                .sum()
        };
        let (received, events) = (sum("messages_received"), sum("events_total"));
        let pct = 100.0 * events as f64 / received.max(1) as f64;
        println!("{name:>12} {ranks:>5} {received:>10} {events:>10} {pct:>7.1}% {paper:>12}");
        rows.push(json!({"program": name, "ranks": ranks, "messages_received": received, "events": events, "percent": pct, "paper": paper}));
    }
    rows
}
