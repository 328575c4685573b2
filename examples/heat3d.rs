//! 3-D heat equation, the benchmark of the fault-tolerant solver paper
//! (seed 004): ∂u/∂t = Δu + F on (0,1)³, implicit Euler in time, each step
//! solved by conjugate gradient with diagonal preconditioning to a relative
//! residual of 1e-7, domain decomposition over a 3-D process grid with halo
//! exchange. Exact solution u = cos(q1(x+y+z))·(sin(q2 t) + ½cos(q2 t)),
//! q1 = 2.35, q2 = 1.37; F and the boundary values follow from it.
//!
//! ```text
//! vpml run -n 4 target/release/examples/heat3d [--size small|medium|large | --points 10x10x50]
//!     [--steps 100] [--dt SECONDS] [--output-interval 10] [--timing]
//!     [--checkpoint-every STEPS | --checkpoint-interval SECONDS]
//! ```
//!
//! With a fault-tolerance protocol (`vpml run --protocol pessimist`), each
//! rank checkpoints its field every `--checkpoint-every` steps (or when
//! `--checkpoint-interval` seconds have passed); a rank that crashes is
//! restarted from its last checkpoint and the run still prints exactly the
//! same lines.
//!
//! The output is bit-for-bit reproducible for given inputs and rank count
//! (the reductions are deterministic): rank 0 prints the L2 error against the
//! exact solution and a checksum of the final field's bits. `--timing` adds
//! the elapsed time (which of course is not reproducible).

use std::time::Instant;

use vpml::{Comm, Request, Sum};

const Q1: f64 = 2.35;
const Q2: f64 = 1.37;

fn exact(x: f64, y: f64, z: f64, t: f64) -> f64 {
    (Q1 * (x + y + z)).cos() * ((Q2 * t).sin() + 0.5 * (Q2 * t).cos())
}

fn source(x: f64, y: f64, z: f64, t: f64) -> f64 {
    let g = (Q2 * t).sin() + 0.5 * (Q2 * t).cos();
    let dg = Q2 * ((Q2 * t).cos() - 0.5 * (Q2 * t).sin());
    (Q1 * (x + y + z)).cos() * (dg + 3.0 * Q1 * Q1 * g)
}

struct Options {
    points: [usize; 3],
    steps: usize,
    dt: Option<f64>,
    interval: usize,
    timing: bool,
    checkpoint_every: usize,
    checkpoint_interval: Option<f64>,
}

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        points: [10, 10, 50],
        steps: 100,
        dt: None,
        interval: 0,
        timing: false,
        checkpoint_every: 0,
        checkpoint_interval: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let value = |i: usize| {
        args.get(i + 1)
            .cloned()
            .ok_or(format!("{} needs a value", args[i]))
    };
    while i < args.len() {
        match args[i].as_str() {
            "--size" => {
                o.points = match value(i)?.as_str() {
                    "small" => [10, 10, 50],
                    "medium" => [15, 15, 76],
                    "large" => [18, 18, 98],
                    other => return Err(format!("unknown size {other:?} (small, medium, large)")),
                };
                i += 1;
            }
            "--points" => {
                let v = value(i)?;
                let p: Vec<usize> = v
                    .split('x')
                    .map(|s| s.parse().map_err(|_| format!("bad --points {v:?}")))
                    .collect::<Result<_, _>>()?;
                if p.len() != 3 || p.contains(&0) {
                    return Err(format!("--points wants NXxNYxNZ, got {v:?}"));
                }
                o.points = [p[0], p[1], p[2]];
                i += 1;
            }
            "--steps" => {
                o.steps = value(i)?.parse().map_err(|_| "bad --steps".to_string())?;
                i += 1;
            }
            "--dt" => {
                o.dt = Some(value(i)?.parse().map_err(|_| "bad --dt".to_string())?);
                i += 1;
            }
            "--output-interval" => {
                o.interval = value(i)?
                    .parse()
                    .map_err(|_| "bad --output-interval".to_string())?;
                i += 1;
            }
            "--timing" => o.timing = true,
            "--checkpoint-every" => {
                o.checkpoint_every = value(i)?
                    .parse()
                    .map_err(|_| "bad --checkpoint-every".to_string())?;
                i += 1;
            }
            "--checkpoint-interval" => {
                let v: f64 = value(i)?
                    .parse()
                    .map_err(|_| "bad --checkpoint-interval".to_string())?;
                if !(v.is_finite() && v > 0.0 && v < 1e9) {
                    return Err(
                        "--checkpoint-interval wants a positive number of seconds below 1e9".into(),
                    );
                }
                o.checkpoint_interval = Some(v);
                i += 1;
            }
            other => return Err(format!("unknown option {other:?}")),
        }
        i += 1;
    }
    Ok(o)
}

/// Split `n` ranks into a 3-D grid as cubic as possible (like MPI_Dims_create).
fn dims(n: usize) -> [usize; 3] {
    let mut best = [n, 1, 1];
    let mut best_score = usize::MAX;
    for a in 1..=n {
        if !n.is_multiple_of(a) {
            continue;
        }
        for b in 1..=n / a {
            if !(n / a).is_multiple_of(b) {
                continue;
            }
            let c = n / a / b;
            let score = a.max(b).max(c) - a.min(b).min(c);
            if score < best_score {
                best_score = score;
                best = [a, b, c];
            }
        }
    }
    best.sort_unstable_by(|x, y| y.cmp(x));
    best
}

/// This rank's block of the global grid and its neighbours.
struct Block {
    n: [usize; 3],
    /// Global index of the first interior point in each dimension.
    offset: [usize; 3],
    h: [f64; 3],
    /// Neighbour rank below / above in each dimension.
    lower: [Option<usize>; 3],
    upper: [Option<usize>; 3],
}

impl Block {
    fn new(rank: usize, grid: [usize; 3], n: [usize; 3]) -> Block {
        let coord = [
            rank / (grid[1] * grid[2]),
            (rank / grid[2]) % grid[1],
            rank % grid[2],
        ];
        let to_rank = |c: [usize; 3]| (c[0] * grid[1] + c[1]) * grid[2] + c[2];
        let mut lower = [None; 3];
        let mut upper = [None; 3];
        for d in 0..3 {
            if coord[d] > 0 {
                let mut c = coord;
                c[d] -= 1;
                lower[d] = Some(to_rank(c));
            }
            if coord[d] + 1 < grid[d] {
                let mut c = coord;
                c[d] += 1;
                upper[d] = Some(to_rank(c));
            }
        }
        Block {
            n,
            offset: [coord[0] * n[0], coord[1] * n[1], coord[2] * n[2]],
            h: [0, 1, 2].map(|d| 1.0 / ((grid[d] * n[d] + 1) as f64)),
            lower,
            upper,
        }
    }

    /// Index in an array with one layer of ghost points; i, j, k in 0..n+2.
    fn idx(&self, i: usize, j: usize, k: usize) -> usize {
        (i * (self.n[1] + 2) + j) * (self.n[2] + 2) + k
    }

    fn len(&self) -> usize {
        (self.n[0] + 2) * (self.n[1] + 2) * (self.n[2] + 2)
    }

    /// Coordinates of array point (i, j, k).
    fn xyz(&self, i: usize, j: usize, k: usize) -> (f64, f64, f64) {
        (
            (self.offset[0] + i) as f64 * self.h[0],
            (self.offset[1] + j) as f64 * self.h[1],
            (self.offset[2] + k) as f64 * self.h[2],
        )
    }

    fn interior(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let n = self.n;
        (1..=n[0])
            .flat_map(move |i| (1..=n[1]).flat_map(move |j| (1..=n[2]).map(move |k| (i, j, k))))
    }

    /// Points of the face of dimension `d` at layer `layer` (0..n+2).
    fn face(&self, d: usize, layer: usize) -> Vec<usize> {
        let n = self.n;
        let mut out = Vec::new();
        match d {
            0 => (1..=n[1]).for_each(|j| (1..=n[2]).for_each(|k| out.push(self.idx(layer, j, k)))),
            1 => (1..=n[0]).for_each(|i| (1..=n[2]).for_each(|k| out.push(self.idx(i, layer, k)))),
            _ => (1..=n[0]).for_each(|i| (1..=n[1]).for_each(|j| out.push(self.idx(i, j, layer)))),
        }
        out
    }

    /// Fill the ghost layers of `v` from the neighbours (physical boundary
    /// ghosts are left alone).
    fn halo(&self, c: &Comm, v: &mut [f64]) -> Result<(), vpml::Error> {
        for d in 0..3 {
            let mut reqs: Vec<Option<Request<Vec<f64>>>> = Vec::new();
            let mut targets = Vec::new();
            for (nb, send_layer, recv_layer, tag) in [
                (self.lower[d], 1, 0, 2 * d as i32),
                (self.upper[d], self.n[d], self.n[d] + 1, 2 * d as i32 + 1),
            ] {
                let Some(nb) = nb else { continue };
                let send: Vec<f64> = self.face(d, send_layer).iter().map(|&p| v[p]).collect();
                let recv_pts = self.face(d, recv_layer);
                // Tag by direction of travel: what goes down is received from above.
                let recv_tag = tag ^ 1;
                reqs.push(Some(c.irecv(nb, recv_tag, vec![0f64; recv_pts.len()])?));
                targets.push(Some(recv_pts));
                reqs.push(Some(c.isend(nb, tag, send)?));
                targets.push(None);
            }
            for (done, pts) in vpml::wait_all(&mut reqs)?.into_iter().zip(targets) {
                if let Some(pts) = pts {
                    for (&p, &x) in pts.iter().zip(&done.buf) {
                        v[p] = x;
                    }
                }
            }
        }
        Ok(())
    }

    /// out = (I − dt·Δh) v on interior points (ghosts of `v` are used as is).
    fn apply(&self, v: &[f64], out: &mut [f64], dt: f64) {
        let inv = self.h.map(|h| dt / (h * h));
        let diag = 1.0 + 2.0 * (inv[0] + inv[1] + inv[2]);
        let (sj, si) = (self.n[2] + 2, (self.n[1] + 2) * (self.n[2] + 2));
        for (i, j, k) in self.interior() {
            let p = self.idx(i, j, k);
            out[p] = diag * v[p]
                - inv[0] * (v[p - si] + v[p + si])
                - inv[1] * (v[p - sj] + v[p + sj])
                - inv[2] * (v[p - 1] + v[p + 1]);
        }
    }

    fn dot(&self, c: &Comm, a: &[f64], b: &[f64]) -> Result<f64, vpml::Error> {
        let local: f64 = self
            .interior()
            .map(|(i, j, k)| {
                let p = self.idx(i, j, k);
                a[p] * b[p]
            })
            .sum();
        let mut total = [0f64];
        c.allreduce(&[local], &mut total, &Sum)?;
        Ok(total[0])
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("heat3d: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let opts = parse_options()?;
    let world = vpml::init()?;
    let (rank, size) = (world.rank(), world.size());
    let grid = dims(size);
    let b = Block::new(rank, grid, opts.points);
    let h_min = b.h.iter().copied().fold(f64::INFINITY, f64::min);
    let dt = opts.dt.unwrap_or(0.5 * h_min);
    // A restarted rank resumes from its last checkpoint: what it printed
    // before it is not printed again.
    let restart = world.restart_state();
    if rank == 0 && restart.is_none() {
        let g = [0, 1, 2].map(|d| grid[d] * opts.points[d]);
        println!(
            "heat3d: {size} ranks ({}x{}x{}), {}x{}x{} points per rank, global {}x{}x{}, dt {dt:e}, {} steps",
            grid[0],
            grid[1],
            grid[2],
            opts.points[0],
            opts.points[1],
            opts.points[2],
            g[0],
            g[1],
            g[2],
            opts.steps
        );
    }
    let start = Instant::now();
    let len = b.len();
    // u with ghosts; boundary ghosts hold the exact solution.
    let mut u = vec![0f64; len];
    for (i, j, k) in b.interior() {
        let (x, y, z) = b.xyz(i, j, k);
        u[b.idx(i, j, k)] = exact(x, y, z, 0.0);
    }
    let mut rhs = vec![0f64; len];
    let (mut r, mut z, mut p, mut q) = (
        vec![0f64; len],
        vec![0f64; len],
        vec![0f64; len],
        vec![0f64; len],
    );
    let inv = b.h.map(|h| dt / (h * h));
    let diag = 1.0 + 2.0 * (inv[0] + inv[1] + inv[2]);
    let mut total_iters = 0usize;
    let mut first_step = 1;
    if let Some(state) = &restart {
        let (step, iters, field) = decode_state(state, len)?;
        first_step = step + 1;
        total_iters = iters;
        u = field;
    }
    for step in first_step..=opts.steps {
        let t = step as f64 * dt;
        // Right-hand side: u^n + dt·F^{n+1}, plus the Dirichlet boundary values.
        let mut bound = vec![0f64; len];
        for d in 0..3 {
            for (nb, layer) in [(b.lower[d], 0), (b.upper[d], b.n[d] + 1)] {
                if nb.is_some() {
                    continue;
                }
                for pt in b.face(d, layer) {
                    let (i, rest) = (
                        pt / ((b.n[1] + 2) * (b.n[2] + 2)),
                        pt % ((b.n[1] + 2) * (b.n[2] + 2)),
                    );
                    let (j, k) = (rest / (b.n[2] + 2), rest % (b.n[2] + 2));
                    let (x, y, zz) = b.xyz(i, j, k);
                    bound[pt] = exact(x, y, zz, t);
                }
            }
        }
        // A applied to the boundary-only vector gives −dt·Σ g/h² next to the boundary.
        b.apply(&bound, &mut q, dt);
        for (i, j, k) in b.interior() {
            let pt = b.idx(i, j, k);
            let (x, y, zz) = b.xyz(i, j, k);
            rhs[pt] = u[pt] + dt * source(x, y, zz, t) - q[pt];
        }
        // CG with diagonal preconditioning, starting from u^n. The ghosts of
        // u, x and p on the physical boundary stay zero: the boundary values
        // are in the right-hand side.
        let mut x = u.clone();
        b.halo(&world, &mut x)?;
        b.apply(&x, &mut q, dt);
        for (i, j, k) in b.interior() {
            let pt = b.idx(i, j, k);
            r[pt] = rhs[pt] - q[pt];
            z[pt] = r[pt] / diag;
            p[pt] = z[pt];
        }
        let bnorm = b.dot(&world, &rhs, &rhs)?.sqrt().max(f64::MIN_POSITIVE);
        let mut rz = b.dot(&world, &r, &z)?;
        let mut iters = 0;
        loop {
            let rnorm = b.dot(&world, &r, &r)?.sqrt();
            if rnorm / bnorm < 1e-7 || iters >= 10_000 {
                break;
            }
            iters += 1;
            b.halo(&world, &mut p)?;
            b.apply(&p, &mut q, dt);
            let alpha = rz / b.dot(&world, &p, &q)?;
            for (i, j, k) in b.interior() {
                let pt = b.idx(i, j, k);
                x[pt] += alpha * p[pt];
                r[pt] -= alpha * q[pt];
                z[pt] = r[pt] / diag;
            }
            let rz_new = b.dot(&world, &r, &z)?;
            let beta = rz_new / rz;
            rz = rz_new;
            for (i, j, k) in b.interior() {
                let pt = b.idx(i, j, k);
                p[pt] = z[pt] + beta * p[pt];
            }
        }
        total_iters += iters;
        for (i, j, k) in b.interior() {
            let pt = b.idx(i, j, k);
            u[pt] = x[pt];
        }
        if opts.interval > 0 && (step % opts.interval == 0 || step == opts.steps) {
            let err = l2_error(&world, &b, &u, t)?;
            if rank == 0 {
                println!("step {step:>6} t {t:.6e} cg_iterations {iters:>4} l2_error {err:.6e}");
            }
        }
        let state = || encode_state(step, total_iters, &u);
        if opts.checkpoint_every > 0 && step % opts.checkpoint_every == 0 {
            world.checkpoint(&state())?;
        } else if let Some(s) = opts.checkpoint_interval {
            world.checkpoint_if_due(std::time::Duration::from_secs_f64(s), state)?;
        }
    }
    let t_end = opts.steps as f64 * dt;
    let err = l2_error(&world, &b, &u, t_end)?;
    let local_hash = b.interior().fold(0xcbf2_9ce4_8422_2325u64, |h, (i, j, k)| {
        (h ^ u[b.idx(i, j, k)].to_bits()).wrapping_mul(0x100_0000_01b3)
    });
    let mut hashes = if rank == 0 {
        vec![0u64; size]
    } else {
        Vec::new()
    };
    world.gather(&[local_hash], &mut hashes, 0)?;
    let mut iters_all = [0u64];
    world.reduce(&[total_iters as u64], &mut iters_all, &Sum, 0)?;
    if rank == 0 {
        let checksum = hashes.iter().fold(0u64, |h, &x| h.rotate_left(7) ^ x);
        println!("cg_iterations_total {}", iters_all[0] / size as u64);
        println!("l2_error {err:.6e}");
        println!("checksum {checksum:016x}");
        if opts.timing {
            println!("elapsed_s {:.6}", start.elapsed().as_secs_f64());
        }
    }
    world.finalize()?;
    Ok(())
}

/// A rank's checkpoint: the last finished step, the CG iterations so far,
/// and the field.
fn encode_state(step: usize, iters: usize, u: &[f64]) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + 8 * u.len());
    b.extend_from_slice(&(step as u64).to_le_bytes());
    b.extend_from_slice(&(iters as u64).to_le_bytes());
    for x in u {
        b.extend_from_slice(&x.to_bits().to_le_bytes());
    }
    b
}

fn decode_state(b: &[u8], len: usize) -> Result<(usize, usize, Vec<f64>), String> {
    if b.len() != 16 + 8 * len {
        return Err(format!(
            "checkpoint holds {} bytes, expected {} (different options?)",
            b.len(),
            16 + 8 * len
        ));
    }
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    let u = (0..len).map(|i| f64::from_bits(word(2 + i))).collect();
    Ok((word(0) as usize, word(1) as usize, u))
}

/// sqrt(Σ (u − exact)² · hx·hy·hz) over the whole domain.
fn l2_error(c: &Comm, b: &Block, u: &[f64], t: f64) -> Result<f64, vpml::Error> {
    let local: f64 = b
        .interior()
        .map(|(i, j, k)| {
            let (x, y, z) = b.xyz(i, j, k);
            let e = u[b.idx(i, j, k)] - exact(x, y, z, t);
            e * e
        })
        .sum();
    let mut total = [0f64];
    c.allreduce(&[local * b.h[0] * b.h[1] * b.h[2]], &mut total, &Sum)?;
    Ok(total[0].sqrt())
}
