//! Large transfers (around the eager limit, 1 GiB, a ring of 4 MiB
//! messages), messages to oneself, all-to-all exchanges, sendrecv.

use vpml::{ANY_SOURCE, Comm, Request};

use super::{R, check, pattern};

/// Every rank passes 4 MiB messages around the ring for 12 rounds (so
/// most of the time some large message is in transit), folds what it
/// receives into a checksum, and rank 0 prints the combined checksum —
/// for recovery tests that kill senders mid-transfer.
pub(crate) fn big_ring(w: &Comm) -> R {
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

/// Large messages in both directions, expected and unexpected, around the
/// eager limit and far above it (rendezvous or fragments).
pub(crate) fn large(w: &Comm) -> R {
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
pub(crate) fn huge(w: &Comm) -> R {
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
pub(crate) fn self_messages(w: &Comm) -> R {
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
pub(crate) fn alltoall(w: &Comm) -> R {
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

/// sendrecv shifts values around a ring without deadlock, also with itself.
pub(crate) fn sendrecv(w: &Comm) -> R {
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
