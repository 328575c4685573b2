//! The communication pattern of NAS CG: named sources only (0 % of
//! receives are non-deterministic in seed 002's Table I).
//!
//! Ranks form a rows × cols grid (cols a power of two). Each iteration
//! does a row-wise reduction by recursive doubling with named partners, an
//! exchange with a partner half the job away (NAS CG's transpose
//! exchange), and two global dot products.
//!
//! ```text
//! vpml run -n 4 target/release/examples/cg-pattern [--iterations 200] [--len 2000]
//! ```

use vpml::Sum;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), vpml::Error> {
    let iterations = arg("--iterations", 200);
    let len = arg("--len", 2000);
    let world = vpml::init()?;
    let (rank, n) = (world.rank(), world.size());
    // The largest power-of-two column count with cols² ≤ 4n, as NAS CG.
    let mut cols = 1;
    while cols * 2 <= n && n % (cols * 2) == 0 && cols * 2 * cols * 2 <= 4 * n {
        cols *= 2;
    }
    let rows = n / cols;
    let (row, col) = (rank / cols, rank % cols);
    let row_comm = world
        .split(Some(row as u32), col as i64)?
        .ok_or(vpml::Error::RequestState("split"))?;
    let mut v: Vec<f64> = (0..len)
        .map(|i| ((rank * len + i) as f64 * 1e-3).sin())
        .collect();
    let mut tmp = vec![0f64; len];
    for _ in 0..iterations {
        // Row reduction by recursive doubling (named partners).
        let mut mask = 1;
        while mask < cols {
            let partner = col ^ mask;
            row_comm.sendrecv(&v, partner, 1, &mut tmp, partner, 1)?;
            let (lo, hi) = if partner < col {
                (&tmp, &v)
            } else {
                (&v, &tmp)
            };
            let combined: Vec<f64> = lo
                .iter()
                .zip(hi.iter())
                .map(|(a, b)| 0.5 * (a + b))
                .collect();
            v = combined;
            mask <<= 1;
        }
        // Exchange with the "transpose" partner (an involution pairing
        // ranks half the job apart; with an odd count the last rank rests).
        let even = n - n % 2;
        let t = if rank < even {
            (rank + even / 2) % even
        } else {
            rank
        };
        if t != rank {
            world.sendrecv(&v, t, 2, &mut tmp, t, 2)?;
            for (a, b) in v.iter_mut().zip(&tmp) {
                *a = 0.75 * *a + 0.25 * b;
            }
        }
        // Two dot products.
        let local = [v.iter().map(|x| x * x).sum::<f64>(), v.iter().sum::<f64>()];
        let mut global = [0f64; 2];
        world.allreduce(&local, &mut global, &Sum)?;
        let scale = 1.0 / global[0].sqrt().max(1e-300);
        for a in v.iter_mut() {
            *a = *a * scale * (len as f64).sqrt() + 1e-3 * global[1].tanh();
        }
    }
    let checksum = v.iter().fold(0u64, |h, x| (h ^ x.to_bits()).rotate_left(5));
    let mut sums = [0u64; 3];
    let mine = [checksum, world.stats().messages_sent, world.events_logged()];
    world.reduce(&mine, &mut sums, &Sum, 0)?;
    if rank == 0 {
        println!("cg-pattern: {n} ranks ({rows}x{cols}), {iterations} iterations");
        println!("messages_sent {}", sums[1]);
        if world.protocol() != "none" {
            println!("events_logged {}", sums[2]);
        }
        println!("checksum {:016x}", sums[0]);
    }
    world.finalize()
}
