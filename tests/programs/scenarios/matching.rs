//! Message order, ANY_SOURCE/ANY_TAG matching, probes, and truncated
//! receives.

use vpml::{ANY_SOURCE, ANY_TAG, Comm, Error, Request};

use super::{R, check, pattern};

/// Messages between one pair never overtake each other, whatever the tags
/// and sizes; a receive by tag takes the earliest message with that tag.
pub(crate) fn order(w: &Comm) -> R {
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
pub(crate) fn any_source(w: &Comm) -> R {
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
pub(crate) fn probe(w: &Comm) -> R {
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

/// A message longer than the buffer is an error value that names both
/// lengths; the buffer holds the message's first bytes.
pub(crate) fn truncate(w: &Comm) -> R {
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
