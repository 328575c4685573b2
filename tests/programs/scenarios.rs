//! Rank program for the integration tests: `scenarios NAME`, started by
//! `vpml run`. Each scenario checks its own results and panics (non-zero
//! exit) on the first wrong one; on success rank 0 prints `ok NAME`.

use std::time::Duration;

use vpml::{ANY_SOURCE, ANY_TAG, Comm, Completed, Error, Persistent, Request, Status};

type R = Result<(), Box<dyn std::error::Error>>;

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let world = vpml::init().unwrap_or_else(|e| {
        eprintln!("scenarios: init failed: {e}");
        std::process::exit(3)
    });
    let result = match name.as_str() {
        "order" => order(&world),
        "any" => any_source(&world),
        "probe" => probe(&world),
        "some" => wait_test_family(&world),
        "truncate" => truncate(&world),
        "persistent" => persistent(&world),
        "ssend" => ssend(&world),
        "cancel" => cancel(&world),
        "large" => large(&world),
        "huge" => huge(&world),
        "big-ring" => big_ring(&world),
        "clock" => clock(&world),
        "self" => self_messages(&world),
        "alltoall" => alltoall(&world),
        "idle-cpu" => idle_cpu(&world),
        "invalid" => invalid(&world),
        "sendrecv" => sendrecv(&world),
        "hello" => {
            println!("hello from rank {} of {}", world.rank(), world.size());
            Ok(())
        }
        "crash" => {
            if world.rank() == 1 {
                // SAFETY: raising a signal against ourselves.
                unsafe { libc::raise(libc::SIGKILL) };
            }
            block_forever(&world)
        }
        "exit-code" => {
            if world.rank() == 1 {
                std::process::exit(3);
            }
            block_forever(&world)
        }
        "no-finalize" => {
            if world.rank() == 1 {
                std::process::exit(0);
            }
            block_forever(&world)
        }
        "abort" => {
            if world.rank() == 1 {
                world.abort(7);
            }
            block_forever(&world)
        }
        "hang" => {
            println!("ready {}", std::process::id());
            block_forever(&world)
        }
        other => {
            eprintln!("scenarios: unknown scenario {other:?}");
            std::process::exit(2)
        }
    };
    if let Err(e) = result {
        eprintln!("scenario {name} failed on rank {}: {e}", world.rank());
        std::process::exit(1);
    }
    let rank = world.rank();
    if let Err(e) = world.finalize() {
        eprintln!("finalize failed: {e}");
        std::process::exit(1);
    }
    if rank == 0 {
        println!("ok {name}");
    }
}

/// Wait for a message that never comes (until the launcher stops the job).
fn block_forever(world: &Comm) -> R {
    let mut b = [0u8; 1];
    world.recv(ANY_SOURCE, 12345, &mut b)?;
    Err("a message came that nobody sent".into())
}

fn check(cond: bool, what: impl FnOnce() -> String) -> R {
    if cond { Ok(()) } else { Err(what().into()) }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Messages between one pair never overtake each other, whatever the tags
/// and sizes; a receive by tag takes the earliest message with that tag.
fn order(w: &Comm) -> R {
    let sizes = [0usize, 8, 100, 20_000, 3, 200_000, 64];
    if w.rank() == 1 {
        for i in 0..300u64 {
            let len = sizes[i as usize % sizes.len()];
            let mut m = pattern(i, len.max(8));
            m[..8].copy_from_slice(&i.to_le_bytes());
            w.send(0, (i % 4) as i32, &m[..len.max(8)])?;
        }
        for i in 0..100u64 {
            w.send(0, 10 + (i % 2) as i32, &[i])?;
        }
    } else if w.rank() == 0 {
        let mut buf = vec![0u8; 200_008];
        for i in 0..300u64 {
            let st = w.recv(1, ANY_TAG, &mut buf)?;
            let got = u64::from_le_bytes(buf[..8].try_into()?);
            check(got == i, || {
                format!("message {got} arrived in place of {i}")
            })?;
            check(st.tag() == (i % 4) as i32, || {
                format!("tag {} for message {i}", st.tag())
            })?;
            let len = sizes[i as usize % sizes.len()].max(8);
            check(st.len() == len, || {
                format!("length {} for message {i}", st.len())
            })?;
            check(buf[8..len] == pattern(i, len)[8..], || {
                format!("payload of {i} differs")
            })?;
        }
        // All tag-11 messages first, then the tag-10 ones: each stream in order.
        for tag in [11, 10] {
            for k in 0..50u64 {
                let mut v = [0u64];
                w.recv(1, tag, &mut v)?;
                let want = 2 * k + (tag - 10) as u64;
                check(v[0] == want, || {
                    format!("tag {tag}: got {} want {want}", v[0])
                })?;
            }
        }
    }
    Ok(())
}

/// ANY_SOURCE/ANY_TAG receive everything, each source's stream in order,
/// and the status names the true source and tag.
fn any_source(w: &Comm) -> R {
    let per = 50u64;
    if w.rank() > 0 {
        for i in 0..per {
            w.send(0, w.rank() as i32, &[w.rank() as u64, i])?;
        }
        return any_source_reply(w);
    }
    let mut next = vec![0u64; w.size()];
    for _ in 0..per * (w.size() as u64 - 1) {
        let mut m = [0u64; 2];
        let st = w.recv(ANY_SOURCE, ANY_TAG, &mut m)?;
        check(st.source() as u64 == m[0], || {
            format!("status source {} for a message from {}", st.source(), m[0])
        })?;
        check(st.tag() as u64 == m[0], || {
            format!("status tag {}", st.tag())
        })?;
        check(m[1] == next[st.source()], || {
            format!(
                "from {}: {} before {}",
                st.source(),
                m[1],
                next[st.source()]
            )
        })?;
        check(st.sequence() == m[1] + 1, || {
            format!("channel sequence {} for message {}", st.sequence(), m[1])
        })?;
        next[st.source()] += 1;
    }
    // Nonblocking ANY_SOURCE too.
    for r in 1..w.size() {
        w.send(r, 1, &[0u8])?;
    }
    let mut reqs: Vec<Option<Request<Vec<u64>>>> = (1..w.size())
        .map(|_| w.irecv(ANY_SOURCE, 2, vec![0u64; 1]).map(Some))
        .collect::<Result<_, _>>()?;
    let mut seen: Vec<u64> = vpml::wait_all(&mut reqs)?
        .into_iter()
        .map(|c| c.buf[0])
        .collect();
    seen.sort();
    let want: Vec<u64> = (1..w.size() as u64).collect();
    check(seen == want, || {
        format!("nonblocking ANY_SOURCE got {seen:?}")
    })?;
    Ok(())
}

/// Sub-protocol of `any_source` for ranks > 0 (second phase).
fn any_source_reply(w: &Comm) -> R {
    let mut go = [0u8];
    w.recv(0, 1, &mut go)?;
    w.send(0, 2, &[w.rank() as u64])?;
    Ok(())
}

/// probe then receive gets exactly the probed message; iprobe finds
/// nothing when nothing was sent.
fn probe(w: &Comm) -> R {
    if w.rank() > 0 {
        for i in 0..20usize {
            let len = 1 + (i * 37 + w.rank() * 1000) % 30_000;
            let mut m = pattern((w.rank() * 100 + i) as u64, len);
            m[0] = w.rank() as u8;
            w.send(0, (i % 3) as i32, &m)?;
        }
        let mut done = [0u8];
        w.recv(0, 9, &mut done)?;
        return Ok(());
    }
    check(w.iprobe(ANY_SOURCE, 77)?.is_none(), || {
        "iprobe found a message on an unused tag".into()
    })?;
    let mut got = vec![0usize; w.size()];
    for k in 0..20 * (w.size() - 1) {
        let st = if k % 2 == 0 {
            w.probe(ANY_SOURCE, ANY_TAG)?
        } else {
            loop {
                if let Some(st) = w.iprobe(ANY_SOURCE, ANY_TAG)? {
                    break st;
                }
            }
        };
        let mut buf = vec![0u8; st.len()];
        let st2 = w.recv(st.source(), st.tag(), &mut buf)?;
        check(
            st2.source() == st.source() && st2.tag() == st.tag() && st2.len() == st.len(),
            || format!("probed {st:?}, received {st2:?}"),
        )?;
        let i = got[st.source()];
        let len = 1 + (i * 37 + st.source() * 1000) % 30_000;
        let mut want = pattern((st.source() * 100 + i) as u64, len);
        want[0] = st.source() as u8;
        check(buf == want, || {
            format!("payload {i} from {} differs", st.source())
        })?;
        got[st.source()] += 1;
    }
    for r in 1..w.size() {
        w.send(r, 9, &[0u8])?;
    }
    Ok(())
}

/// wait_some/test_some report every completed request at once;
/// wait_any/test_any/test_all/test/wait behave as MPI's.
fn wait_test_family(w: &Comm) -> R {
    let k = 8usize;
    if w.rank() > 0 {
        let mut go = [0u8];
        for round in 0..3 {
            w.recv(0, 100 + round, &mut go)?;
            for i in 0..k {
                w.send(0, i as i32, &[(w.rank() * 1000 + i) as u32])?;
            }
            w.send(0, 50, &[0u8])?;
        }
        return Ok(());
    }
    let post = || -> Result<Vec<Option<Request<Vec<u32>>>>, Error> {
        let mut v = Vec::new();
        for r in 1..w.size() {
            for i in 0..k {
                v.push(Some(w.irecv(r, i as i32, vec![0u32; 1])?));
            }
        }
        Ok(v)
    };
    let arrived = |round: i32| -> R {
        for r in 1..w.size() {
            w.send(r, 100 + round, &[0u8])?;
        }
        // The "done" messages come after every data message of each sender,
        // so once they are received every request above has completed.
        for r in 1..w.size() {
            w.recv(r, 50, &mut [0u8])?;
        }
        Ok(())
    };
    let n = k * (w.size() - 1);
    let expect = |idx: usize, c: &Completed<Vec<u32>>| -> R {
        let (r, i) = (1 + idx / k, idx % k);
        check(c.buf[0] as usize == r * 1000 + i, || {
            format!("request {idx} got {}", c.buf[0])
        })
    };

    // wait_some: everything already done comes back in one call.
    let mut reqs = post()?;
    check(vpml::test_some(&mut reqs)?.is_empty(), || {
        "test_some completed a receive before any send".into()
    })?;
    arrived(0)?;
    let done = vpml::wait_some(&mut reqs)?;
    check(done.len() == n, || {
        format!(
            "wait_some reported {} of {n} completed requests",
            done.len()
        )
    })?;
    for (idx, c) in &done {
        expect(*idx, c)?;
    }
    check(reqs.iter().all(Option::is_none), || {
        "completed slots must become None".into()
    })?;
    check(vpml::wait_some(&mut reqs)?.is_empty(), || {
        "wait_some on no active request".into()
    })?;
    check(vpml::wait_any(&mut reqs)?.is_none(), || {
        "wait_any on no active request".into()
    })?;

    // test_some the same way.
    let mut reqs = post()?;
    arrived(1)?;
    let done = vpml::test_some(&mut reqs)?;
    check(done.len() == n, || {
        format!("test_some reported {} of {n}", done.len())
    })?;
    for (idx, c) in &done {
        expect(*idx, c)?;
    }

    // test_all, test_any, wait_any, test, wait on a third round.
    let mut reqs = post()?;
    check(vpml::test_all(&mut reqs)?.is_none(), || {
        "test_all before any message".into()
    })?;
    check(vpml::test_any(&mut reqs)?.is_none(), || {
        "test_any before any message".into()
    })?;
    arrived(2)?;
    let (first, c) = vpml::wait_any(&mut reqs)?.ok_or("wait_any returned nothing")?;
    check(first == 0, || {
        format!("wait_any picked {first}, the lowest done index is 0")
    })?;
    expect(first, &c)?;
    let (second, c) = vpml::test_any(&mut reqs)?.ok_or("test_any returned nothing")?;
    check(second == 1, || format!("test_any picked {second}"))?;
    expect(second, &c)?;
    let c = vpml::test(&mut reqs[2])?.ok_or("test of a completed request")?;
    expect(2, &c)?;
    let c = vpml::wait(&mut reqs[3])?.ok_or("wait of an active request")?;
    expect(3, &c)?;
    check(vpml::wait(&mut reqs[3])?.is_none(), || {
        "wait on an empty slot".into()
    })?;
    let rest = vpml::test_all(&mut reqs)?.ok_or("test_all after all arrived")?;
    check(rest.len() == n - 4, || {
        format!("test_all returned {}", rest.len())
    })?;
    Ok(())
}

/// A message longer than the buffer is an error value that names both
/// lengths; the buffer holds the message's first bytes.
fn truncate(w: &Comm) -> R {
    if w.rank() == 1 {
        w.send(0, 1, &pattern(1, 100))?;
        w.send(0, 2, &pattern(2, 100))?;
        w.send(0, 3, &pattern(3, 300_000))?;
        w.send(0, 4, &[7u8; 3])?;
        return Ok(());
    }
    let mut small = [0u8; 10];
    match w.recv(1, 1, &mut small) {
        Err(Error::Truncated {
            message_len: 100,
            buffer_len: 10,
            source_rank: 1,
            tag: 1,
        }) => {}
        other => return Err(format!("expected a truncation error, got {other:?}").into()),
    }
    check(small[..] == pattern(1, 100)[..10], || {
        "truncated prefix differs".into()
    })?;
    let c = w.irecv(1, 2, vec![0u8; 50])?.wait()?;
    check(
        matches!(c.status.error(), Some(Error::Truncated { .. })),
        || format!("status {:?}", c.status),
    )?;
    check(c.buf[..] == pattern(2, 100)[..50], || {
        "nonblocking truncated prefix differs".into()
    })?;
    let mut mid = vec![0u8; 1000];
    check(
        matches!(
            w.recv(1, 3, &mut mid),
            Err(Error::Truncated {
                message_len: 300_000,
                ..
            })
        ),
        || "large truncated message".into(),
    )?;
    check(mid[..] == pattern(3, 300_000)[..1000], || {
        "large truncated prefix differs".into()
    })?;
    // A byte count that is not a whole number of elements.
    let st = w.recv(1, 4, &mut [0u8; 4])?;
    check(st.count::<u32>().is_err() && st.count::<u8>()? == 3, || {
        "count of a partial element".into()
    })?;
    Ok(())
}

/// A persistent request is started, completed and reused; its buffer is
/// reachable only while it is inactive.
fn persistent(w: &Comm) -> R {
    let rounds = 100u64;
    if w.rank() == 0 {
        let mut p = w.send_init(1, 5, vec![0u8; 32])?;
        let mut big = w.send_init(1, 6, vec![0u8; 100_000])?;
        for i in 0..rounds {
            p.buffer_mut().ok_or("inactive buffer")?.fill(i as u8);
            big.buffer_mut().ok_or("inactive buffer")?.fill(i as u8);
            let mut both = [p, big];
            vpml::start_all(&mut both)?;
            check(both[0].buffer().is_none(), || {
                "buffer reachable while active".into()
            })?;
            check(both[0].start().is_err(), || {
                "starting an active request must fail".into()
            })?;
            let sts = vpml::wait_all(&mut both)?;
            check(sts.len() == 2 && sts[0].source() == 1, || {
                format!("send statuses {sts:?}")
            })?;
            [p, big] = both;
        }
        let got = p.into_buffer()?;
        check(got == vec![(rounds - 1) as u8; 32], || {
            "buffer after the last use".into()
        })?;
    } else if w.rank() == 1 {
        let mut p: Persistent<Vec<u8>> = w.recv_init(0, 5, vec![0u8; 32])?;
        let mut big = w.recv_init(0, 6, vec![0u8; 100_000])?;
        for i in 0..rounds {
            p.start()?;
            big.start()?;
            let st: Status = p.wait()?;
            check(st.len() == 32, || format!("length {}", st.len()))?;
            check(p.buffer() == Some(&vec![i as u8; 32]), || {
                format!("round {i}: {:?}", p.buffer())
            })?;
            let mut one = [big];
            let (idx, st) = loop {
                if let Some(x) = vpml::test_any(&mut one)? {
                    break x;
                }
            };
            check(idx == 0 && st.len() == 100_000, || {
                "large persistent receive".into()
            })?;
            [big] = one;
            check(
                big.buffer()
                    .is_some_and(|b| b.iter().all(|&x| x == i as u8)),
                || "large payload".into(),
            )?;
        }
    }
    Ok(())
}

/// A synchronous send completes only once the receive has matched: its
/// message may sit in the receiver's unexpected queue without completing it.
fn ssend(w: &Comm) -> R {
    for (len, tag) in [(16usize, 1), (500_000, 2)] {
        if w.rank() == 0 {
            let mut s = Some(w.issend(1, tag, pattern(tag as u64, len))?);
            // Rank 1 tells us once our message is in its unexpected queue.
            w.recv(1, 20, &mut [0u8])?;
            for _ in 0..1000 {
                check(vpml::test(&mut s)?.is_none(), || {
                    format!("issend of {len} bytes completed before the receive was posted")
                })?;
            }
            w.send(1, 21, &[0u8])?;
            let c = vpml::wait(&mut s)?.ok_or("active")?;
            check(c.status.len() == len, || "send status length".into())?;
            // The blocking form returns at all.
            w.ssend(1, tag + 10, &pattern(7, len))?;
        } else if w.rank() == 1 {
            loop {
                if w.iprobe(0, tag)?.is_some() {
                    break;
                }
            }
            w.send(0, 20, &[0u8])?;
            w.recv(0, 21, &mut [0u8])?;
            let mut buf = vec![0u8; len];
            w.recv(0, tag, &mut buf)?;
            check(buf == pattern(tag as u64, len), || "issend payload".into())?;
            w.recv(0, tag + 10, &mut buf)?;
            check(buf == pattern(7, len), || "ssend payload".into())?;
        }
    }
    Ok(())
}

/// cancel withdraws a pending receive, and does nothing to a matched one.
fn cancel(w: &Comm) -> R {
    if w.rank() == 1 {
        w.send(0, 2, &[42u32])?;
        w.send(0, 5, &[0u8])?;
        w.recv(0, 3, &mut [0u8])?;
        w.send(0, 4, &[43u32])?;
        return Ok(());
    }
    let never = w.irecv(1, 1, vec![0u32; 1])?;
    check(never.cancel()?, || "cancel of a pending receive".into())?;
    let c = never.wait()?;
    check(c.status.is_cancelled(), || {
        "status must say cancelled".into()
    })?;
    // A matched receive cannot be cancelled: the tag-5 message comes after
    // the tag-2 one, so once it is in, the receive below has matched.
    let got = w.irecv(1, 2, vec![0u32; 1])?;
    w.recv(1, 5, &mut [0u8])?;
    check(!got.cancel()?, || {
        "cancel of a matched receive succeeded".into()
    })?;
    let c = got.wait()?;
    check(!c.status.is_cancelled() && c.buf == [42], || {
        format!("matched receive: {:?}", c.buf)
    })?;
    // A cancelled persistent receive can be started again.
    let mut p = w.recv_init(1, 4, vec![0u32; 1])?;
    p.start()?;
    check(p.cancel()?, || "cancel of a persistent receive".into())?;
    check(p.wait()?.is_cancelled(), || {
        "persistent cancelled status".into()
    })?;
    w.send(1, 3, &[0u8])?;
    p.start()?;
    check(
        !p.wait()?.is_cancelled() && p.buffer() == Some(&vec![43]),
        || "reused after cancel".into(),
    )?;
    Ok(())
}

/// Large messages in both directions, expected and unexpected, around the
/// eager limit and far above it (rendezvous or fragments).
/// Not piecewise deterministic on purpose: rank 1 sends rank 0 three
/// messages, the third holding the wall-clock time. A replay of rank 1
/// must report its third send to rank 0 as the divergence.
fn clock(w: &Comm) -> R {
    match w.rank() {
        1 => {
            w.send(0, 1, b"first")?;
            w.send(0, 1, b"second")?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos();
            w.send(0, 1, &now.to_le_bytes())?;
        }
        0 => {
            let mut buf = [0u8; 16];
            for _ in 0..3 {
                w.recv(1, 1, &mut buf)?;
            }
            println!("ok clock");
        }
        _ => {}
    }
    Ok(())
}

/// Every rank passes 4 MiB messages around the ring for 12 rounds (so
/// most of the time some large message is in transit), folds what it
/// receives into a checksum, and rank 0 prints the combined checksum —
/// for recovery tests that kill senders mid-transfer.
fn big_ring(w: &Comm) -> R {
    let (rank, size) = (w.rank(), w.size());
    let (right, left) = ((rank + 1) % size, (rank + size - 1) % size);
    let len = 4 << 20;
    let mut sum: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0..12u64 {
        let mine = pattern(round * 1000 + rank as u64, len);
        let r = w.irecv(left, 9, vec![0u8; len])?;
        let s = w.isend(right, 9, mine)?;
        let got = r.wait()?;
        s.wait()?;
        sum = got.buf.iter().step_by(61).fold(sum ^ round, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        check(got.buf == pattern(round * 1000 + left as u64, len), || {
            format!("round {round}: the message from {left} differs")
        })?;
    }
    let mut all = if rank == 0 {
        vec![0u64; size]
    } else {
        Vec::new()
    };
    w.gather(&[sum], &mut all, 0)?;
    if rank == 0 {
        let total = all.iter().fold(0u64, |h, &x| h.rotate_left(9) ^ x);
        println!("big-ring checksum {total:016x}");
    }
    Ok(())
}

fn large(w: &Comm) -> R {
    let sizes = [
        16 * 1024 - 1,
        16 * 1024,
        16 * 1024 + 1,
        (1 << 20) + 3,
        64 << 20,
    ];
    if w.rank() > 1 {
        return Ok(());
    }
    let peer = 1 - w.rank();
    for (i, &len) in sizes.iter().enumerate() {
        let tag = i as i32;
        let mine = pattern((w.rank() * 100 + i) as u64, len);
        let theirs = pattern((peer * 100 + i) as u64, len);
        // Expected both ways at once (nonblocking).
        let r = w.irecv(peer, tag, vec![0u8; len])?;
        let s = w.isend(peer, tag, mine.clone())?;
        let got = r.wait()?;
        s.wait()?;
        check(got.buf == theirs, || format!("{len}-byte message differs"))?;
        // Unexpected: rank 1 sends large then small; rank 0 receives small
        // first. (A blocking large send may wait for its match, so isend.)
        if w.rank() == 1 {
            let big = w.isend(0, 1000 + tag, mine)?;
            w.send(0, 2000 + tag, &[1u8])?;
            big.wait()?;
        } else {
            w.recv(1, 2000 + tag, &mut [0u8])?;
            check(
                w.iprobe(1, 1000 + tag)?.is_some_and(|st| st.len() == len),
                || "probe of a large unexpected message".into(),
            )?;
            let mut buf = vec![0u8; len];
            let st = w.recv(ANY_SOURCE, 1000 + tag, &mut buf)?;
            check(st.len() == len && buf == theirs, || {
                format!("unexpected {len}-byte message differs")
            })?;
        }
    }
    Ok(())
}

/// A 1 GiB message goes through.
fn huge(w: &Comm) -> R {
    let len = 1usize << 30;
    if w.rank() == 1 {
        let mut m = vec![0u8; len];
        for (i, chunk) in m.chunks_mut(4096).enumerate() {
            chunk[0] = i as u8;
            chunk[4095] = (i >> 8) as u8;
        }
        w.send(0, 0, &m)?;
    } else if w.rank() == 0 {
        let mut m = vec![0u8; len];
        let st = w.recv(1, 0, &mut m)?;
        check(st.len() == len, || format!("received {} bytes", st.len()))?;
        for (i, chunk) in m.chunks(4096).enumerate() {
            check(chunk[0] == i as u8 && chunk[4095] == (i >> 8) as u8, || {
                format!("page {i} differs")
            })?;
        }
    }
    Ok(())
}

/// Messages to oneself, blocking and not, small and large, synchronous.
fn self_messages(w: &Comm) -> R {
    let me = w.rank();
    for len in [0usize, 5, 100_000] {
        let data = pattern(len as u64, len);
        w.send(me, 1, &data)?;
        let mut buf = vec![0u8; len];
        let st = w.recv(me, 1, &mut buf)?;
        check(buf == data && st.source() == me, || {
            format!("self message of {len} bytes")
        })?;
        let r = w.irecv(ANY_SOURCE, 2, vec![0u8; len])?;
        let s = w.issend(me, 2, data.clone())?;
        let got = r.wait()?;
        s.wait()?;
        check(got.buf == data, || "self issend".into())?;
    }
    Ok(())
}

/// Every rank exchanges with every other, many rounds (oversubscription test).
fn alltoall(w: &Comm) -> R {
    let (me, n) = (w.rank(), w.size());
    let rounds: u64 = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    for round in 0..rounds {
        let mut reqs: Vec<Option<Request<Vec<u64>>>> = Vec::with_capacity(2 * n);
        for p in (0..n).filter(|&p| p != me) {
            reqs.push(Some(w.irecv(p, 0, vec![0u64; 2])?));
        }
        for p in (0..n).filter(|&p| p != me) {
            reqs.push(Some(w.isend(p, 0, vec![round, me as u64])?));
        }
        let out = vpml::wait_all(&mut reqs)?;
        for (k, c) in out.iter().take(n - 1).enumerate() {
            let p = if k < me { k } else { k + 1 };
            check(c.buf[..] == [round, p as u64], || {
                format!("round {round}: from {p} got {:?}", c.buf)
            })?;
        }
    }
    Ok(())
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills a plain struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// A rank blocked in recv for 2 s uses less than 0.2 s of CPU.
fn idle_cpu(w: &Comm) -> R {
    if w.rank() == 0 {
        w.recv(1, 0, &mut [0u8])?; // rank 1 is about to block
        std::thread::sleep(Duration::from_secs(2));
        w.send(1, 1, &[0u8])?;
        let mut used = [0f64];
        w.recv(1, 2, &mut used)?;
        println!("cpu used while blocked: {:.3} s", used[0]);
        check(used[0] < 0.2, || {
            format!("a blocked rank used {:.3} s of CPU in 2 s", used[0])
        })?;
    } else if w.rank() == 1 {
        w.send(0, 0, &[0u8])?;
        let before = cpu_seconds();
        w.recv(0, 1, &mut [0u8])?;
        let used = cpu_seconds() - before;
        w.send(0, 2, &[used])?;
    }
    Ok(())
}

/// sendrecv shifts values around a ring without deadlock, also with itself.
fn sendrecv(w: &Comm) -> R {
    let (me, n) = (w.rank(), w.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    for len in [1usize, 1000, 100_000] {
        let out = vec![me as u32; len];
        let mut inp = vec![0u32; len];
        let st = w.sendrecv(&out, right, 3, &mut inp, left, 3)?;
        check(
            st.source() == left && inp.iter().all(|&x| x == left as u32),
            || format!("sendrecv of {len} got {} from {}", inp[0], st.source()),
        )?;
        let st = w.sendrecv(&out, me, 4, &mut inp, me, 4)?;
        check(st.source() == me && inp == out, || {
            "sendrecv with itself".into()
        })?;
    }
    Ok(())
}

/// Bad arguments are error values, not panics.
fn invalid(w: &Comm) -> R {
    let n = w.size();
    check(
        matches!(w.send(n, 0, &[1u8]), Err(Error::InvalidRank { .. })),
        || "send to a rank outside".into(),
    )?;
    check(
        matches!(w.send(0, -3, &[1u8]), Err(Error::InvalidTag(-3))),
        || "negative tag".into(),
    )?;
    check(
        matches!(w.recv(n + 5, 0, &mut [0u8]), Err(Error::InvalidRank { .. })),
        || "recv from outside".into(),
    )?;
    check(
        matches!(w.recv(-7, 0, &mut [0u8]), Err(Error::InvalidRank { .. })),
        || "recv from -7".into(),
    )?;
    check(
        matches!(w.iprobe(ANY_SOURCE, -5), Err(Error::InvalidTag(-5))),
        || "probe tag".into(),
    )?;
    check(
        matches!(w.isend(0, ANY_TAG, vec![0u8]), Err(Error::InvalidTag(_))),
        || "ANY_TAG is not a send tag".into(),
    )?;
    check(matches!(vpml::init(), Err(Error::RequestState(_))), || {
        "second init".into()
    })?;
    Ok(())
}
