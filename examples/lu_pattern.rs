//! The communication pattern of NAS LU: a pipelined wavefront sweeping a
//! 2-D process grid plane by plane (receive from north and west, compute,
//! send south and east), then the reverse sweep, with about 1 % of the
//! receives posted with ANY_SOURCE (seed 002, Table I).
//!
//! With `--checkpoint-every K` every rank calls `world.checkpoint` after
//! each K-th iteration (its state: the iteration, the counters and the
//! line), so the pattern runs under `--protocol coordinated` and
//! restarts from a checkpoint under `pessimist`.
//!
//! ```text
//! vpml run -n 4 target/release/examples/lu-pattern [--iterations 20] [--planes 50]
//!     [--checkpoint-every K]
//! ```

use vpml::{ANY_SOURCE, Source, Sum};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

#[path = "common/pattern_state.rs"]
mod pattern_state;

fn main() -> Result<(), vpml::Error> {
    let iterations = arg("--iterations", 20);
    let planes = arg("--planes", 50);
    let checkpoint_every = arg("--checkpoint-every", 0);
    let line = 64;
    let world = vpml::init()?;
    let (rank, n) = (world.rank(), world.size());
    let mut px = (n as f64).sqrt() as usize;
    while n % px != 0 {
        px -= 1;
    }
    let py = n / px;
    let (x, y) = (rank / py, rank % py);
    let at = |x: usize, y: usize| x * py + y;
    let mut state: Vec<f64> = (0..line)
        .map(|i| ((rank * line + i) as f64 * 0.01).sin())
        .collect();
    let mut edge = vec![0f64; line];
    let (mut receives, mut wild) = (0u64, 0u64);
    // Messages sent before this process started (restarted from a
    // checkpoint): added to the engine's count. (Events logged are this
    // process's own: a restarted rank replays its events, logging none.)
    let mut sent_before = 0u64;
    let mut first = 0;
    if let Some(saved) = world.restart_state() {
        let ([it, r, w, sent], line) = pattern_state::decode("lu-pattern", &saved, line)
            .unwrap_or_else(|why| pattern_state::exit_with(&why));
        (first, receives, wild, state) = (it as usize, r, w, line);
        sent_before = sent - world.stats().messages_sent.min(sent);
    }
    let recv_from = |from: usize, tag: i32, buf: &mut [f64], receives: &mut u64, wild: &mut u64| {
        *receives += 1;
        // Every 100th receive waits for ANY_SOURCE (the tag still names the plane).
        let src: Source = if (*receives).is_multiple_of(100) {
            *wild += 1;
            ANY_SOURCE
        } else {
            from.into()
        };
        world.recv(src, tag, buf).map(|_| ())
    };
    for it in first..iterations {
        for sweep in 0..2 {
            let forward = sweep == 0;
            for plane in 0..planes {
                let tag = ((it * 2 + sweep) * planes + plane) as i32;
                let (prev_x, prev_y) = if forward {
                    (x.checked_sub(1), y.checked_sub(1))
                } else {
                    ((x + 1 < px).then_some(x + 1), (y + 1 < py).then_some(y + 1))
                };
                let (next_x, next_y) = if forward {
                    ((x + 1 < px).then_some(x + 1), (y + 1 < py).then_some(y + 1))
                } else {
                    (x.checked_sub(1), y.checked_sub(1))
                };
                if let Some(nx) = prev_x {
                    recv_from(at(nx, y), tag, &mut edge, &mut receives, &mut wild)?;
                    state
                        .iter_mut()
                        .zip(&edge)
                        .for_each(|(s, e)| *s = 0.6 * *s + 0.4 * e);
                }
                if let Some(ny) = prev_y {
                    recv_from(at(x, ny), tag, &mut edge, &mut receives, &mut wild)?;
                    state
                        .iter_mut()
                        .zip(&edge)
                        .for_each(|(s, e)| *s = 0.6 * *s + 0.4 * e);
                }
                // A chaotic map: the line never settles, so the checksum
                // depends on every message received.
                state
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, s)| *s = (2.9 * *s + 0.01 * (i % 7) as f64).sin());
                if let Some(nx) = next_x {
                    world.send(at(nx, y), tag, &state)?;
                }
                if let Some(ny) = next_y {
                    world.send(at(x, ny), tag, &state)?;
                }
            }
        }
        let mut norm = [0f64];
        world.allreduce(&[state.iter().map(|s| s * s).sum::<f64>()], &mut norm, &Sum)?;
        state
            .iter_mut()
            .for_each(|s| *s /= norm[0].sqrt().max(1e-300) / (line as f64).sqrt());
        if checkpoint_every > 0 && (it + 1) % checkpoint_every == 0 && it + 1 < iterations {
            let sent = sent_before + world.stats().messages_sent;
            world.checkpoint(&pattern_state::encode(
                [it as u64 + 1, receives, wild, sent],
                &state,
            ))?;
        }
    }
    let checksum = state
        .iter()
        .fold(0u64, |h, x| (h ^ x.to_bits()).rotate_left(11));
    let mut sums = [0u64; 5];
    let mine = [
        checksum,
        sent_before + world.stats().messages_sent,
        receives,
        wild,
        world.events_logged(),
    ];
    world.reduce(&mine, &mut sums, &Sum, 0)?;
    if rank == 0 {
        println!("lu-pattern: {n} ranks ({px}x{py}), {iterations} iterations of {planes} planes");
        println!("messages_sent {}", sums[1]);
        // (A protocol that logs events: not none, not coordinated.)
        if !matches!(world.protocol(), "none" | "coordinated") {
            println!("events_logged {}", sums[4]);
        }
        println!(
            "any_source_receives {} of {} ({:.1} %)",
            sums[3],
            sums[2],
            100.0 * sums[3] as f64 / sums[2].max(1) as f64
        );
        println!("checksum {:016x}", sums[0]);
    }
    world.finalize()
}
