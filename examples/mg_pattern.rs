//! The communication pattern of NAS MG: halo exchanges on a 3-D process
//! grid over the levels of a V-cycle, with about a third of the receives
//! posted with ANY_SOURCE (seed 002, Table I: 20–40 % non-deterministic).
//!
//! Each receive has a tag naming the direction it comes from, so an
//! ANY_SOURCE receive can match only one message and the result does not
//! depend on timing — but a message-logging protocol must still log it.
//!
//! With `--checkpoint-every K` every rank calls `world.checkpoint` after
//! each K-th cycle (its state: the cycle, the counters and the field), so
//! the pattern runs under `--protocol coordinated` and restarts from a
//! checkpoint under `pessimist`.
//!
//! ```text
//! vpml run -n 8 target/release/examples/mg-pattern [--cycles 20] [--size 32]
//!     [--checkpoint-every K]
//! ```

use vpml::{ANY_SOURCE, Request, Source, Sum};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

/// Factor n into a 3-D grid, largest dimension first.
fn grid(n: usize) -> [usize; 3] {
    let mut g = [1usize; 3];
    let mut rest = n;
    let mut d = 0;
    let mut f = 2;
    while rest > 1 {
        if rest.is_multiple_of(f) {
            g[d % 3] *= f;
            rest /= f;
            d += 1;
        } else {
            f += 1;
        }
    }
    g
}

#[path = "common/pattern_state.rs"]
mod pattern_state;

fn main() -> Result<(), vpml::Error> {
    let cycles = arg("--cycles", 20);
    let size = arg("--size", 32);
    let checkpoint_every = arg("--checkpoint-every", 0);
    let world = vpml::init()?;
    let (rank, n) = (world.rank(), world.size());
    let g = grid(n);
    let c = [rank / (g[1] * g[2]), (rank / g[2]) % g[1], rank % g[2]];
    let at = |c: [usize; 3]| (c[0] * g[1] + c[1]) * g[2] + c[2];
    // Periodic neighbours in each dimension.
    let neighbours: Vec<(usize, usize)> = (0..3)
        .flat_map(|d| {
            let mut lo = c;
            lo[d] = (c[d] + g[d] - 1) % g[d];
            let mut hi = c;
            hi[d] = (c[d] + 1) % g[d];
            [(at(lo), 2 * d), (at(hi), 2 * d + 1)]
        })
        .collect();
    let mut field: Vec<f64> = (0..size * size)
        .map(|i| ((rank * 7919 + i) as f64).cos())
        .collect();
    let mut receives = 0u64;
    let mut wild = 0u64;
    // Messages sent before this process started (restarted from a
    // checkpoint): added to the engine's count. (Events logged are this
    // process's own: a restarted rank replays its events, logging none.)
    let mut sent_before = 0u64;
    let mut first = 0;
    if let Some(saved) = world.restart_state() {
        let ([c, r, w, sent], f) = pattern_state::decode("mg-pattern", &saved, field.len())
            .unwrap_or_else(|why| pattern_state::exit_with(&why));
        (first, receives, wild, field) = (c as usize, r, w, f);
        sent_before = sent - world.stats().messages_sent.min(sent);
    }
    for cycle in first..cycles {
        // Down and up the levels: faces shrink by half per level.
        let levels: Vec<usize> = (0..4).chain((0..4).rev()).collect();
        for (step, &level) in levels.iter().enumerate() {
            let face = (size >> level).max(1);
            let mut reqs: Vec<Option<Request<Vec<f64>>>> = Vec::new();
            for (k, &(nb, dir)) in neighbours.iter().enumerate() {
                // The message from neighbour `nb` travels in direction dir ^ 1.
                let tag = (dir ^ 1) as i32;
                let from: Source = if (k + step + cycle) % 3 == 0 {
                    wild += 1;
                    ANY_SOURCE
                } else {
                    nb.into()
                };
                receives += 1;
                reqs.push(Some(world.irecv(from, tag, vec![0f64; face])?));
            }
            for &(nb, dir) in &neighbours {
                let out: Vec<f64> = field
                    .iter()
                    .take(face)
                    .map(|x| x * (1.0 + dir as f64 * 1e-3))
                    .collect();
                reqs.push(Some(world.isend(nb, dir as i32, out)?));
            }
            let done = vpml::wait_all(&mut reqs)?;
            for (k, d) in done.iter().take(neighbours.len()).enumerate() {
                for (i, x) in d.buf.iter().enumerate() {
                    let p = (i * 31 + k) % field.len();
                    field[p] = 0.5 * field[p] + 0.5 * x;
                }
            }
        }
        let mut norm = [0f64];
        world.allreduce(&[field.iter().map(|x| x * x).sum::<f64>()], &mut norm, &Sum)?;
        let s = 1.0 / norm[0].sqrt().max(1e-300);
        field.iter_mut().for_each(|x| *x *= s * (size as f64));
        if checkpoint_every > 0 && (cycle + 1) % checkpoint_every == 0 && cycle + 1 < cycles {
            let sent = sent_before + world.stats().messages_sent;
            world.checkpoint(&pattern_state::encode(
                [cycle as u64 + 1, receives, wild, sent],
                &field,
            ))?;
        }
    }
    let checksum = field
        .iter()
        .fold(0u64, |h, x| (h ^ x.to_bits()).rotate_left(3));
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
        println!(
            "mg-pattern: {n} ranks ({}x{}x{}), {cycles} cycles",
            g[0], g[1], g[2]
        );
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
