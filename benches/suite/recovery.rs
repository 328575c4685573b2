//! Recovery: heat3d with a rank killed halfway, the stages of its recovery
//! and the job's extra time.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::common::{example, median, vpml_run_with};

/// The number after `prefix` in `text` (e.g. `"detected "` → 5.8 from
/// "detected 5.8 ms").
pub(crate) fn number_after(text: &str, prefix: &str) -> Option<f64> {
    let at = text.find(prefix)? + prefix.len();
    let rest = &text[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// heat3d with rank 2 killed halfway through, `rounds` times, against
/// failure-free runs in the same rounds: detection and respawn (launcher),
/// the restarted process's stages (its "caught up" line), restarts per
/// kill, and the job's extra wall time.
pub(crate) fn recovery(rounds: usize) -> Vec<Value> {
    println!(
        "\n## recovery — heat3d, 4 ranks, pessimist, checkpoint every 20 of 200 steps, rank 2 killed halfway"
    );
    let program = match example("heat3d") {
        Ok(p) => p,
        Err(e) => {
            println!("# recovery: {e}");
            return Vec::new();
        }
    };
    let heat = [
        "--size",
        "small",
        "--steps",
        "200",
        "--checkpoint-every",
        "20",
    ];
    let run = |extra: &[&str]| -> Option<(f64, String, String)> {
        let mut launcher = vec!["--protocol", "pessimist"];
        launcher.extend_from_slice(extra);
        let mut cmd = vpml_run_with(4, &launcher, &program);
        cmd.extend(heat.iter().map(|a| a.to_string()));
        let t = std::time::Instant::now();
        let out = std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .output()
            .ok()?;
        let took = t.elapsed().as_secs_f64();
        if !out.status.success() {
            println!(
                "# recovery: run failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some((
            took,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    let keys = [
        ("detection_ms", "detected "),
        ("respawn_ms", "spawned in "),
        ("process_start_ms", "process start "),
        ("join_ms", "join "),
        ("checkpoint_and_events_ms", " events "),
        ("connect_and_resend_ms", "connect and re-send "),
        ("reexecution_ms", "re-execution "),
        ("caught_up_ms", "caught up "),
    ];
    let mut values: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 1..=rounds {
        eprintln!("# round {round}/{rounds}: recovery");
        let Some((base, base_out, _)) = run(&[]) else {
            continue;
        };
        let kill = format!("2@{:.3}", base / 2.0);
        let Some((took, out, err)) = run(&["--inject-failure", &kill]) else {
            continue;
        };
        let checksum = |s: &str| {
            s.lines()
                .find(|l| l.starts_with("checksum"))
                .map(str::to_string)
        };
        if checksum(&out) != checksum(&base_out) || checksum(&out).is_none() {
            println!("# recovery: round {round}: checksums differ!");
            continue;
        }
        values.entry("job_failure_free_s").or_default().push(base);
        values.entry("job_with_kill_s").or_default().push(took);
        values.entry("extra_s").or_default().push(took - base);
        values
            .entry("restarted_ranks")
            .or_default()
            .push(err.matches("restarted it as incarnation").count() as f64);
        for (name, prefix) in keys {
            if let Some(v) = err.lines().find_map(|l| number_after(l, prefix)) {
                values.entry(name).or_default().push(v);
            }
        }
    }
    let mut rows = Vec::new();
    for (name, v) in &values {
        let m = median(v.clone());
        println!("{name:>26} {m:>12.3}   (median of {})", v.len());
        rows.push(json!({"part": "recovery", "metric": name, "median": m, "samples": v}));
    }
    rows
}
