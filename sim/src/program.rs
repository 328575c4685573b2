//! The programs a simulated job runs: drawn from the seed, non-deterministic
//! at every step, and made so that every later send depends on every
//! earlier outcome.
//!
//! A program is a number of rounds. In each round every rank sends a
//! number of messages (drawn once, for the whole job) to some of the
//! others, with tag = round, then receives the messages addressed to it in
//! a style drawn for that rank and round: blocking ANY_SOURCE receives,
//! `wait_any` or `wait_some` over posted receives, polling with `test_any`
//! and `test_some`, `iprobe` loops, `probe`, or a receive cancelled right
//! after it was posted (which may have matched meanwhile). Each rank folds
//! everything it observes — which message completed which call, how many
//! polls failed first, what a probe found — into a running hash, and every
//! message it sends carries that hash: a re-execution that answered any
//! call differently sends different bytes.

use vpml_pml::{ANY_SOURCE, Request, Status, World};

/// How a rank receives the messages of one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvStyle {
    /// `recv(ANY_SOURCE)` once per message.
    Blocking,
    /// Post every receive, then `wait_any` until all completed.
    WaitAny,
    /// Post every receive, then `wait_some` until all completed.
    WaitSome,
    /// Post every receive, then poll with `test_any`/`test_some`.
    Poll,
    /// `iprobe(ANY_SOURCE)` until one is found, then receive it.
    Iprobe,
    /// `probe(ANY_SOURCE)`, then receive what it found.
    Probe,
    /// Post one ANY_SOURCE receive and cancel it at once (it may have
    /// matched already), then `recv` the rest.
    Cancel,
}

const STYLES: [RecvStyle; 7] = [
    RecvStyle::Blocking,
    RecvStyle::WaitAny,
    RecvStyle::WaitSome,
    RecvStyle::Poll,
    RecvStyle::Iprobe,
    RecvStyle::Probe,
    RecvStyle::Cancel,
];

/// How a rank sends one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendStyle {
    Blocking,
    Isend,
    Issend,
}

/// Words of the largest message: 80 kB, larger than the engine's eager
/// limit and than two of its fragments, so some messages travel as several
/// fragments (and a crash or a restart can fall between them).
const MAX_WORDS: usize = 10_000;
/// Words every message starts with: sender, sequence number, round, hash.
const HEAD_WORDS: usize = 4;

/// One message of the plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlannedSend {
    pub to: usize,
    pub style: SendStyle,
    /// Payload words after the head.
    pub words: usize,
}

/// The whole job's program, drawn from the seed before it starts.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub ranks: usize,
    /// `sends[round][rank]`: what the rank sends in that round, in order.
    pub sends: Vec<Vec<Vec<PlannedSend>>>,
    /// `styles[round][rank]`.
    pub styles: Vec<Vec<RecvStyle>>,
    /// `checkpoint[round][rank]`: checkpoint after the round.
    pub checkpoint: Vec<Vec<bool>>,
}

impl Plan {
    /// Draw a program of `rounds` rounds for `ranks` ranks.
    pub(crate) fn draw(rng: &mut fastrand::Rng, ranks: usize, rounds: usize) -> Plan {
        let mut sends = Vec::with_capacity(rounds);
        let mut styles = Vec::with_capacity(rounds);
        let mut checkpoint = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let mut round = Vec::with_capacity(ranks);
            for from in 0..ranks {
                let mut mine = Vec::new();
                for to in (0..ranks).filter(|&t| t != from) {
                    for _ in 0..rng.usize(0..=2) {
                        let style = match rng.u8(0..3) {
                            0 => SendStyle::Blocking,
                            1 => SendStyle::Isend,
                            _ => SendStyle::Issend,
                        };
                        let words = if rng.u8(0..20) == 0 {
                            MAX_WORDS - HEAD_WORDS
                        } else {
                            rng.usize(0..16)
                        };
                        mine.push(PlannedSend { to, style, words });
                    }
                }
                rng.shuffle(&mut mine);
                round.push(mine);
            }
            sends.push(round);
            styles.push(
                (0..ranks)
                    .map(|_| STYLES[rng.usize(..STYLES.len())])
                    .collect(),
            );
            checkpoint.push((0..ranks).map(|_| rng.u8(0..8) == 0).collect());
        }
        Plan {
            ranks,
            sends,
            styles,
            checkpoint,
        }
    }

    /// Messages rank `me` receives in `round`.
    fn incoming(&self, round: usize, me: usize) -> usize {
        self.sends[round]
            .iter()
            .map(|s| s.iter().filter(|p| p.to == me).count())
            .sum()
    }
}

/// What a rank's program needs from the simulator besides its world.
pub(crate) trait RankEnv {
    /// The program is about to send its message `seq` to `to`, whose
    /// bytes hash to `digest`.
    fn send_begins(&self, to: usize, seq: u64, digest: u64);
    /// That send call returned.
    fn send_ends(&self);
    /// The program received message `seq` from `from`, whose bytes hash
    /// to `digest`.
    fn received(&self, from: usize, seq: u64, digest: u64);
    /// The program polls and found nothing: let others run.
    fn pause(&self);
}

/// Word `i` after a message's head, from the sender's state.
fn filler(state: u64, i: u64) -> u64 {
    state.rotate_left(i as u32) ^ i
}

/// A message's words, hashed (to compare what left with what arrived).
fn digest(words: &[u64]) -> u64 {
    words.iter().fold(0xcbf2_9ce4_8422_2325, |h, &w| mix(h, w))
}

fn mix(h: u64, v: u64) -> u64 {
    // FNV-1a over the eight bytes of v.
    v.to_le_bytes().iter().fold(h, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One rank's run of the plan.
struct Rank<'a> {
    world: &'a World,
    env: &'a dyn RankEnv,
    me: usize,
    state: u64,
    sent_to: Vec<u64>,
    got_from: Vec<u64>,
}

/// Run rank `me`'s part of `plan`; returns the rank's final hash.
pub(crate) fn run(world: &World, env: &dyn RankEnv, plan: &Plan) -> Result<u64, String> {
    let me = world.rank();
    let mut r = Rank {
        world,
        env,
        me,
        state: mix(0xcbf2_9ce4_8422_2325, me as u64),
        sent_to: vec![0; plan.ranks],
        got_from: vec![0; plan.ranks],
    };
    let mut first = 0;
    if let Some(saved) = world.restart_state() {
        first = r.restore(&saved, plan.ranks)?;
    }
    for round in first..plan.sends.len() {
        r.round(plan, round)
            .map_err(|e| format!("round {round}: {e}"))?;
    }
    // Every message was received once: nothing is left over (a duplicate
    // would wait here, unmatched, for ever).
    if let Some(st) = world
        .iprobe(ANY_SOURCE, vpml_pml::ANY_TAG)
        .map_err(|e| format!("the last iprobe: {e}"))?
    {
        return Err(format!(
            "message {} from rank {} (tag {}) was never received: a duplicate",
            st.sequence(),
            st.source(),
            st.tag()
        ));
    }
    Ok(r.state)
}

type Pending = Option<Request<Vec<u64>>>;

impl Rank<'_> {
    /// The state a checkpoint after `round` saves.
    fn save(&self, round: usize) -> Vec<u8> {
        let mut b = Vec::new();
        for w in [round as u64 + 1, self.state]
            .iter()
            .chain(&self.sent_to)
            .chain(&self.got_from)
        {
            vpml_codec::put_u64(&mut b, *w);
        }
        b
    }

    /// Take back what [`Rank::save`] saved; returns the round to go on with.
    fn restore(&mut self, saved: &[u8], ranks: usize) -> Result<usize, String> {
        let mut r = vpml_codec::Reader::new(saved, "the program's checkpoint");
        let mut words = || -> Result<Vec<u64>, vpml_codec::Error> {
            let round = r.u64()?;
            let mut all = vec![round];
            for _ in 0..1 + 2 * ranks {
                all.push(r.u64()?);
            }
            r.finish()?;
            Ok(all)
        };
        let words = words().map_err(|e| e.to_string())?;
        self.state = words[1];
        self.sent_to = words[2..2 + ranks].to_vec();
        self.got_from = words[2 + ranks..].to_vec();
        Ok(words[0] as usize)
    }

    fn round(&mut self, plan: &Plan, round: usize) -> Result<(), String> {
        let tag = round as i32;
        let mut sends: Vec<Pending> = Vec::new();
        for s in &plan.sends[round][self.me] {
            self.sent_to[s.to] += 1;
            let seq = self.sent_to[s.to];
            let mut payload = vec![self.me as u64, seq, round as u64, self.state];
            payload.extend((0..s.words as u64).map(|i| filler(self.state, i)));
            self.env.send_begins(s.to, seq, digest(&payload));
            let sent = match s.style {
                SendStyle::Blocking => self.world.send(s.to, tag, &payload).map(|_| None),
                SendStyle::Isend => self.world.isend(s.to, tag, payload).map(Some),
                SendStyle::Issend => self.world.issend(s.to, tag, payload).map(Some),
            };
            self.env.send_ends();
            sends.push(sent.map_err(|e| format!("send to {}: {e}", s.to))?);
        }
        let incoming = plan.incoming(round, self.me);
        self.receive(plan.styles[round][self.me], tag, incoming)?;
        vpml_pml::wait_all(&mut sends).map_err(|e| format!("waiting for sends: {e}"))?;
        if plan.checkpoint[round][self.me] {
            self.world
                .checkpoint(&self.save(round))
                .map_err(|e| format!("checkpoint: {e}"))?;
        }
        Ok(())
    }

    /// Take in one received message: check it, fold it into the state.
    fn absorb(&mut self, st: &Status, data: &[u64], tag: i32) -> Result<(), String> {
        let words = st.len() / 8;
        let data = &data[..words.min(data.len())];
        let src = st.source();
        if data.len() < HEAD_WORDS || data[0] != src as u64 || data[2] != tag as u64 {
            return Err(format!(
                "a message from {src} with tag {} carries {:?}",
                st.tag(),
                &data[..data.len().min(HEAD_WORDS)]
            ));
        }
        let seq = data[1];
        if seq != self.got_from[src] + 1 || st.sequence() != seq {
            return Err(format!(
                "message {seq} from rank {src} (channel number {}) arrived after message {} (exactly once, in channel order, is broken)",
                st.sequence(),
                self.got_from[src]
            ));
        }
        // Every word is what the sender put there.
        let sent_state = data[3];
        if let Some(i) = (HEAD_WORDS..data.len())
            .find(|&i| data[i] != filler(sent_state, (i - HEAD_WORDS) as u64))
        {
            return Err(format!(
                "message {seq} from rank {src} is damaged at word {i} of {}",
                data.len()
            ));
        }
        self.env.received(src, seq, digest(data));
        self.got_from[src] = seq;
        self.state = data
            .iter()
            .fold(mix(self.state, src as u64), |h, &w| mix(h, w));
        Ok(())
    }

    fn note(&mut self, outcome: u64) {
        self.state = mix(self.state, outcome);
    }

    fn receive(&mut self, style: RecvStyle, tag: i32, count: usize) -> Result<(), String> {
        let buf = || vec![0u64; MAX_WORDS];
        match style {
            RecvStyle::Blocking => self.blocking(tag, count),
            RecvStyle::WaitAny | RecvStyle::WaitSome | RecvStyle::Poll => {
                let mut reqs: Vec<Pending> = (0..count)
                    .map(|_| self.world.irecv(ANY_SOURCE, tag, buf()).map(Some))
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("irecv: {e}"))?;
                let mut left = count;
                let mut failed_polls = 0u64;
                let mut poll_any = true;
                while left > 0 {
                    let done: Vec<(usize, vpml_pml::Completed<Vec<u64>>)> = match style {
                        RecvStyle::WaitAny => vpml_pml::wait_any(&mut reqs)
                            .map(|d| d.into_iter().collect())
                            .map_err(|e| format!("wait_any: {e}"))?,
                        RecvStyle::WaitSome => {
                            vpml_pml::wait_some(&mut reqs).map_err(|e| format!("wait_some: {e}"))?
                        }
                        _ => {
                            poll_any = !poll_any;
                            if poll_any {
                                vpml_pml::test_any(&mut reqs)
                                    .map(|d| d.into_iter().collect())
                                    .map_err(|e| format!("test_any: {e}"))?
                            } else {
                                vpml_pml::test_some(&mut reqs)
                                    .map_err(|e| format!("test_some: {e}"))?
                            }
                        }
                    };
                    if done.is_empty() {
                        failed_polls += 1;
                        self.env.pause();
                        continue;
                    }
                    // How many polls failed, and which requests completed,
                    // are outcomes too.
                    self.note(failed_polls);
                    failed_polls = 0;
                    for (i, c) in done {
                        self.note(i as u64);
                        self.absorb(&c.status, &c.buf, tag)?;
                        left -= 1;
                    }
                }
                Ok(())
            }
            RecvStyle::Iprobe => {
                let mut data = buf();
                for _ in 0..count {
                    let mut failed = 0u64;
                    let st = loop {
                        match self
                            .world
                            .iprobe(ANY_SOURCE, tag)
                            .map_err(|e| format!("iprobe: {e}"))?
                        {
                            Some(st) => break st,
                            None => {
                                failed += 1;
                                self.env.pause();
                            }
                        }
                    };
                    self.note(failed);
                    let got = self
                        .world
                        .recv(st.source(), tag, &mut data)
                        .map_err(|e| format!("recv after iprobe: {e}"))?;
                    self.absorb(&got, &data, tag)?;
                }
                Ok(())
            }
            RecvStyle::Probe => {
                let mut data = buf();
                for _ in 0..count {
                    let st = self
                        .world
                        .probe(ANY_SOURCE, tag)
                        .map_err(|e| format!("probe: {e}"))?;
                    let got = self
                        .world
                        .recv(st.source(), tag, &mut data)
                        .map_err(|e| format!("recv after probe: {e}"))?;
                    self.absorb(&got, &data, tag)?;
                }
                Ok(())
            }
            RecvStyle::Cancel => {
                if count == 0 {
                    return Ok(());
                }
                let req = self
                    .world
                    .irecv(ANY_SOURCE, tag, buf())
                    .map_err(|e| format!("irecv: {e}"))?;
                let cancelled = req.cancel().map_err(|e| format!("cancel: {e}"))?;
                let c = req.wait().map_err(|e| format!("wait after cancel: {e}"))?;
                self.note(u64::from(cancelled));
                let left = if c.status.is_cancelled() {
                    count
                } else {
                    self.absorb(&c.status, &c.buf, tag)?;
                    count - 1
                };
                self.blocking(tag, left)
            }
        }
    }

    fn blocking(&mut self, tag: i32, count: usize) -> Result<(), String> {
        let mut data = vec![0u64; MAX_WORDS];
        for _ in 0..count {
            let st = self
                .world
                .recv(ANY_SOURCE, tag, &mut data)
                .map_err(|e| format!("recv: {e}"))?;
            self.absorb(&st, &data, tag)?;
        }
        Ok(())
    }
}
