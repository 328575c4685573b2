//! Request-mix stress program: random but seeded traffic received through
//! every completion style — `wait_any`, `wait_some`, `test`, `test_any`,
//! `test_some`, `test_all`, `iprobe`, and `probe` with ANY_SOURCE — mixing
//! eager and rendezvous sizes and standard and synchronous sends. It is the
//! hardest case for replay: which request completes first, and which message
//! an ANY_SOURCE receive takes, depend on timing.
//!
//! The printed checksum does not: it combines every received message's
//! content independently of arrival order, so any correct run (and any
//! correct recovery) prints the same line for the same seed and rank count.
//!
//! ```text
//! vpml run -n 4 target/release/examples/request-mix [--seed 1] [--rounds 200]
//! ```

use vpml::{ANY_SOURCE, ANY_TAG, Comm, Completed, Request, Sum};

/// The largest message of the mix.
const MAX_LEN: usize = 48 * 1024;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A message of the plan: who sends what to whom, and how.
#[derive(Clone, Copy)]
struct Msg {
    src: usize,
    dst: usize,
    k: usize,
    tag: i32,
    len: usize,
    sync: bool,
}

/// Every message of one round, identical on every rank.
fn plan(seed: u64, round: u64, n: usize) -> Vec<Msg> {
    let mut out = Vec::new();
    for src in 0..n {
        for dst in (0..n).filter(|&d| d != src) {
            let r = splitmix(seed ^ splitmix(round * 1_000_003 + (src * n + dst) as u64));
            for k in 0..(r % 3) as usize {
                let m = splitmix(r + k as u64);
                let len = if m.is_multiple_of(8) {
                    20_000 + (m >> 8) as usize % (MAX_LEN - 20_000)
                } else {
                    (m >> 8) as usize % 200
                };
                out.push(Msg {
                    src,
                    dst,
                    k,
                    tag: (m >> 40) as i32 % 4,
                    len: len.max(24),
                    sync: m.is_multiple_of(5),
                });
            }
        }
    }
    out
}

/// The bytes of a message: its identity, then a pattern.
fn payload(seed: u64, round: u64, m: &Msg) -> Vec<u8> {
    let mut v = Vec::with_capacity(m.len);
    v.extend_from_slice(&round.to_le_bytes());
    v.extend_from_slice(&(m.src as u64).to_le_bytes());
    v.extend_from_slice(&(m.k as u64).to_le_bytes());
    let mut x = splitmix(seed ^ round ^ ((m.src * 977 + m.dst * 31 + m.k) as u64));
    while v.len() < m.len {
        x = splitmix(x);
        v.push(x as u8);
    }
    v
}

fn hash(bytes: &[u8], tag: i32) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64 ^ tag as u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
}

struct Checker {
    seed: u64,
    round: u64,
    expected: Vec<Msg>,
    sum: u64,
    got: usize,
}

impl Checker {
    /// Check a received message against the plan and fold it into the checksum.
    fn take(&mut self, source: usize, tag: i32, data: &[u8]) -> Result<(), String> {
        let word = |i: usize| {
            data.get(i * 8..i * 8 + 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        };
        let (Some(round), Some(src), Some(k)) = (word(0), word(1), word(2)) else {
            return Err(format!(
                "message of {} bytes from {source} is too short",
                data.len()
            ));
        };
        let i = self
            .expected
            .iter()
            .position(|m| {
                m.src == source
                    && m.src as u64 == src
                    && m.k as u64 == k
                    && m.tag == tag
                    && round == self.round
            })
            .ok_or_else(|| {
                format!("unexpected message from {source} tag {tag} (round {round}, k {k})")
            })?;
        let m = self.expected.swap_remove(i);
        if data != payload(self.seed, self.round, &m).as_slice() {
            return Err(format!("message {k} from {source} has wrong content"));
        }
        self.sum = self.sum.wrapping_add(hash(data, tag));
        self.got += 1;
        Ok(())
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("request-mix: {e}");
        std::process::exit(1);
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let seed = arg("--seed", 1);
    let rounds = arg("--rounds", 200);
    let world = vpml::init()?;
    let (rank, n) = (world.rank(), world.size());
    let mut total = 0u64;
    let mut received = 0u64;
    for round in 0..rounds {
        let all = plan(seed, round, n);
        let mut sends: Vec<Option<Request<Vec<u8>>>> = Vec::new();
        for m in all.iter().filter(|m| m.src == rank) {
            let data = payload(seed, round, m);
            sends.push(Some(if m.sync {
                world.issend(m.dst, m.tag, data)?
            } else {
                world.isend(m.dst, m.tag, data)?
            }));
        }
        let mut check = Checker {
            seed,
            round,
            expected: all.iter().filter(|m| m.dst == rank).copied().collect(),
            sum: 0,
            got: 0,
        };
        let count = check.expected.len();
        let style = (splitmix(seed ^ round ^ (rank as u64) << 20) % 7) as usize;
        receive_round(&world, style, count, &mut check)?;
        if check.got != count || !check.expected.is_empty() {
            return Err(
                format!("round {round}: received {} of {count} messages", check.got).into(),
            );
        }
        vpml::wait_all(&mut sends)?;
        total = total.wrapping_add(check.sum);
        received += count as u64;
        // Keep rounds apart: the wildcard receives of the next round must
        // not take this round's messages.
        world.barrier()?;
    }
    let mut sums = [0u64; 3];
    world.reduce(
        &[total, received, world.stats().messages_sent],
        &mut sums,
        &Sum,
        0,
    )?;
    if rank == 0 {
        println!("request-mix: {n} ranks, seed {seed}, {rounds} rounds");
        println!("messages_received {}", sums[1]);
        println!("checksum {:016x}", sums[0]);
    }
    world.finalize()?;
    Ok(())
}

fn post_all(world: &Comm, count: usize) -> Result<Vec<Option<Request<Vec<u8>>>>, vpml::Error> {
    (0..count)
        .map(|_| {
            world
                .irecv(ANY_SOURCE, ANY_TAG, vec![0u8; MAX_LEN])
                .map(Some)
        })
        .collect()
}

fn take(check: &mut Checker, c: &Completed<Vec<u8>>) -> Result<(), String> {
    check.take(c.status.source(), c.status.tag(), &c.buf[..c.status.len()])
}

/// Receive this round's `count` messages in one of seven styles.
fn receive_round(
    world: &Comm,
    style: usize,
    count: usize,
    check: &mut Checker,
) -> Result<(), Box<dyn std::error::Error>> {
    match style {
        0 => {
            let mut reqs = post_all(world, count)?;
            while let Some((_, c)) = vpml::wait_any(&mut reqs)? {
                take(check, &c)?;
            }
        }
        1 => {
            let mut reqs = post_all(world, count)?;
            loop {
                let done = vpml::wait_some(&mut reqs)?;
                if done.is_empty() {
                    break;
                }
                for (_, c) in &done {
                    take(check, c)?;
                }
            }
        }
        2 => {
            let mut reqs = post_all(world, count)?;
            while reqs.iter().any(Option::is_some) {
                if let Some((_, c)) = vpml::test_any(&mut reqs)? {
                    take(check, &c)?;
                }
            }
        }
        3 => {
            let mut reqs = post_all(world, count)?;
            while reqs.iter().any(Option::is_some) {
                for (_, c) in vpml::test_some(&mut reqs)? {
                    take(check, &c)?;
                }
            }
        }
        4 => {
            let mut reqs = post_all(world, count)?;
            let done = loop {
                if let Some(done) = vpml::test_all(&mut reqs)? {
                    break done;
                }
            };
            for c in &done {
                take(check, c)?;
            }
        }
        5 => {
            // Probe first, then receive exactly the probed message.
            for i in 0..count {
                let st = if i % 2 == 0 {
                    world.probe(ANY_SOURCE, ANY_TAG)?
                } else {
                    loop {
                        if let Some(st) = world.iprobe(ANY_SOURCE, ANY_TAG)? {
                            break st;
                        }
                    }
                };
                let mut buf = vec![0u8; st.len()];
                let got = world.recv(st.source(), st.tag(), &mut buf)?;
                check.take(got.source(), got.tag(), &buf)?;
            }
        }
        _ => {
            // One test() loop per request, in posting order.
            let mut reqs = post_all(world, count)?;
            for slot in reqs.iter_mut() {
                let c = loop {
                    if let Some(c) = vpml::test(slot)? {
                        break c;
                    }
                };
                take(check, &c)?;
            }
        }
    }
    Ok(())
}
