//! Tests of the shared-memory rings (`ring.rs`).
use super::*;

struct Mem(Vec<u64>);
impl Mem {
    fn new(cap: usize) -> Self {
        // +8 words so the base can be 64-byte aligned.
        Mem(vec![0u64; (RING_CONTROL + cap) / 8 + 8])
    }
    fn base(&mut self) -> *mut u8 {
        let p = self.0.as_mut_ptr() as *mut u8;
        // SAFETY: offset < 64 stays inside the allocation's slack.
        unsafe { p.add(p.align_offset(64)) }
    }
    /// The writer and the reader of a ring of `cap` bytes in this
    /// memory (the test keeps `self` alive while it uses them).
    fn ends(&mut self, cap: usize) -> (RingWriter, RingReader) {
        let base = self.base();
        // SAFETY: the memory is aligned, zeroed and large enough for
        // `cap`, and outlives both ends (the caller's contract above).
        unsafe { (RingWriter::new(base, cap), RingReader::new(base, cap)) }
    }
}

fn eager(seq: u64) -> FrameHeader {
    let mut h = FrameHeader::new(kind::EAGER);
    h.seq = seq;
    h
}

#[test]
fn frames_come_out_in_order_across_many_laps() {
    let cap = 1024;
    let mut mem = Mem::new(cap);
    let (mut w, mut r) = mem.ends(cap);
    let mut next_read = 0u64;
    for seq in 0..2000u64 {
        let payload = vec![seq as u8; (seq as usize * 7) % 150];
        while !w.try_write(&eager(seq), &payload) {
            let h = r.peek().unwrap().unwrap();
            assert_eq!(h.seq, next_read);
            let want = vec![next_read as u8; (next_read as usize * 7) % 150];
            assert_eq!(r.payload(&h, want.len()).unwrap(), &want[..]);
            r.consume(&h);
            r.publish();
            next_read += 1;
        }
    }
    while let Some(h) = r.peek().unwrap() {
        assert_eq!(h.seq, next_read);
        r.consume(&h);
        next_read += 1;
    }
    assert_eq!(next_read, 2000);
}

#[test]
fn every_header_field_reaches_the_reader() {
    let cap = 1024;
    let mut mem = Mem::new(cap);
    let (mut w, mut r) = mem.ends(cap);
    // Every byte of every field distinct, for each frame shape (an
    // EAGER frame has no `aux1`: its payload starts there).
    for k in [kind::EAGER, kind::RTS, kind::EAGER] {
        let mut h = FrameHeader::new(k);
        h.flags = 0xa5;
        h.context = 0x1122_3344;
        h.tag = -0x5566_7788;
        h.seq = 0x0102_0304_0506_0708;
        h.msg_len = 0x1112_1314_1516_1718;
        h.aux0 = 0x2122_2324_2526_2728;
        h.aux1 = if k == kind::EAGER {
            0
        } else {
            0x3132_3334_3536_3738
        };
        assert!(w.try_write(&h, b"payload"));
        let got = r.peek().unwrap().unwrap();
        let fields =
            |h: &FrameHeader| (h.kind, h.flags, h.context, h.tag, h.seq, h.msg_len, h.aux0);
        assert_eq!(fields(&got), fields(&h));
        assert_eq!(got.frame_len, 64 + if k == kind::EAGER { 0 } else { 64 });
        if k != kind::EAGER {
            assert_eq!(got.aux1, h.aux1);
        }
        assert_eq!(r.payload(&got, 7).unwrap(), b"payload");
        r.consume(&got);
    }
}

#[test]
fn stale_payload_bytes_are_never_taken_for_a_stamp() {
    // Fill the ring with payloads made of every plausible stamp value,
    // then check the reader stops exactly where the writer stopped
    // (a ring of 1 KiB: the 192-byte frames may take up to a quarter).
    let cap = 1024;
    let mut mem = Mem::new(cap);
    let (mut w, mut r) = mem.ends(cap);
    let poison: Vec<u8> = (0..40u64)
        .flat_map(|i| (i * 64 + 1).to_le_bytes())
        .collect();
    let mut written = 0;
    let mut read = 0;
    for _ in 0..50 {
        while w.try_write(&eager(written), &poison[..100]) {
            written += 1;
        }
        while let Some(h) = r.peek().unwrap() {
            assert_eq!(h.seq, read);
            r.consume(&h);
            read += 1;
        }
        r.publish();
        assert_eq!(read, written);
    }
}

#[test]
fn payloads_holding_later_laps_stamps_are_never_taken_for_them() {
    // Every word of every payload holds the stamp a frame starting on
    // its line would carry one or two laps later; frames of varied
    // lengths end on every line, and the reader catches up with the
    // writer often, polling exactly where the next stamp goes (the
    // line starts the reader zeroes are what keeps these apart).
    let cap = 1024u64;
    let mut mem = Mem::new(cap as usize);
    let (mut w, mut r) = mem.ends(cap as usize);
    let (mut written, mut read) = (0u64, 0u64);
    for round in 0..400u64 {
        for _ in 0..(round % 5) {
            // Up to 184 bytes: within a quarter of the ring less a header.
            let len = ((round * 53 + written * 29) % 184 + 8) as usize / 8 * 8;
            let start = w.tail + EAGER_PAYLOAD as u64;
            let payload: Vec<u8> = (0..len as u64 / 8)
                .flat_map(|i| {
                    let line = (start + i * 8) / 64 * 64;
                    (line + cap * (1 + i % 2) + 1).to_le_bytes()
                })
                .collect();
            if !w.try_write(&eager(written), &payload) {
                break;
            }
            written += 1;
        }
        while let Some(h) = r.peek().unwrap() {
            assert_eq!(h.seq, read, "round {round}");
            r.consume(&h);
            read += 1;
        }
        r.publish();
        assert_eq!(read, written, "round {round}");
    }
    assert!(written > 500, "{written} frames");
}

#[test]
fn a_drained_ring_takes_the_largest_frame_without_a_publish() {
    let cap = 4096;
    let mut mem = Mem::new(cap);
    let (mut w, mut r) = mem.ends(cap);
    let largest = vec![7u8; cap / 4 - HEADER_LEN];
    for round in 0..50u64 {
        // Fill with frames of varied sizes, then read them all; the
        // reader publishes only when its rule says so.
        let mut seq = 0;
        while w.try_write(
            &eager(seq),
            &vec![1u8; ((round * 37 + seq * 101) % 900) as usize],
        ) {
            seq += 1;
        }
        while let Some(h) = r.peek().unwrap() {
            r.consume(&h);
        }
        r.publish();
        assert!(
            w.try_write(&eager(seq), &largest),
            "round {round}: no room in a drained ring"
        );
        let h = r.peek().unwrap().unwrap();
        assert_eq!(r.payload(&h, largest.len()).unwrap(), &largest[..]);
        r.consume(&h);
        r.publish();
    }
}

#[test]
fn a_waiting_writer_is_told_and_fits_before_the_reader_runs_dry() {
    // The reader publishes only once a quarter of the ring is read
    // (`publish`); a writer waiting for room must still get it while
    // frames remain to read, at any frame size and ring position.
    let cap = 4096;
    let mut mem = Mem::new(cap);
    let (mut w, mut r) = mem.ends(cap);
    let frame = |seq: u64, len: usize| {
        let mut h = eager(seq);
        h.msg_len = len as u64;
        h
    };
    let mut seq = 0u64;
    for round in 0..200u64 {
        let want = vec![3u8; (round as usize * 97) % (cap / 4 - HEADER_LEN + 1)];
        // Fill with small frames until the wanted one does not fit.
        loop {
            let filler = vec![1u8; ((round + seq) % 5 * 40) as usize];
            if !w.try_write(&frame(seq, filler.len()), &filler) {
                break;
            }
            seq += 1;
        }
        if w.announce_waiting(kind::EAGER, want.len()) {
            assert!(w.try_write(&frame(seq, want.len()), &want));
        } else {
            let mut told = false;
            loop {
                let Some(h) = r.peek().unwrap() else {
                    panic!("round {round}: the reader ran dry while the writer waited");
                };
                r.consume(&h);
                told |= r.publish();
                if w.try_write(&frame(seq, want.len()), &want) {
                    break;
                }
            }
            assert!(
                told,
                "round {round}: room came without a word to the writer"
            );
        }
        seq += 1;
        // Drain; the wanted frame comes out whole, last.
        let mut last = None;
        while let Some(h) = r.peek().unwrap() {
            last = Some((h.seq, r.payload(&h, h.msg_len as usize).unwrap().to_vec()));
            r.consume(&h);
        }
        r.publish();
        assert_eq!(last, Some((seq - 1, want)), "round {round}");
    }
}

#[test]
fn answered_messages_cycle_through_a_short_lap_and_bursts_go_past_it() {
    let cap = 64 * 1024;
    let mut mem = Mem::new(cap);
    let (mut w, mut r) = mem.ends(cap);
    let mut furthest = 0;
    for seq in 0..2000u64 {
        // One message, read before the next (a ping-pong); every 7th
        // larger than the short lap, up to the largest frame.
        let len = if seq % 7 == 0 {
            (cap / 4 - HEADER_LEN) >> (seq % 3)
        } else {
            (seq as usize * 13) % 300
        };
        let payload = vec![seq as u8; len];
        assert!(w.has_room(kind::EAGER, len), "frame {seq}");
        assert!(w.try_write(&eager(seq), &payload), "frame {seq}");
        furthest = furthest.max(offset(w.tail, cap as u64));
        let h = r.peek().unwrap().unwrap();
        assert_eq!(h.seq, seq);
        assert_eq!(r.payload(&h, payload.len()).unwrap(), &payload[..]);
        r.consume(&h);
        r.publish();
    }
    assert!(
        furthest <= SHORT_LAP + cap as u64 / 4,
        "answered messages went {furthest} bytes into the lap"
    );
    // The largest frame, when the writer looks next: the early lap must
    // leave it room.
    let largest = vec![9u8; cap / 4 - HEADER_LEN];
    for round in 0..3u64 {
        let mut seq = 0;
        while offset(w.tail, cap as u64) < SHORT_LAP || seq == 0 {
            assert!(w.try_write(&eager(seq), &[1u8; 100]));
            let h = r.peek().unwrap().unwrap();
            r.consume(&h);
            seq += 1;
        }
        assert!(w.has_room(kind::EAGER, largest.len()));
        assert!(w.try_write(&eager(seq), &largest), "round {round}");
        let h = r.peek().unwrap().unwrap();
        assert_eq!(r.payload(&h, largest.len()).unwrap(), &largest[..]);
        r.consume(&h);
        r.publish();
    }
    // A burst the reader does not keep up with goes past the short lap.
    let mut seq = 0;
    while w.try_write(&eager(seq), &[1u8; 200]) {
        seq += 1;
    }
    // (Not the whole ring: the last early SKIP is unread, so the room
    // is what that lap had used, 8-24 KiB; past the short lap all the
    // same.)
    assert!(seq * 256 > SHORT_LAP, "{seq} frames of a burst fit");
    for want in 0..seq {
        let h = r.peek().unwrap().unwrap();
        assert_eq!(h.seq, want);
        r.consume(&h);
    }
    assert!(r.peek().unwrap().is_none());
}

#[test]
fn two_threads_stream_through_a_small_ring() {
    // Writer and reader on different threads, as in two processes: every
    // frame arrives once, in order, with its payload intact.
    let cap = 2048;
    let mut mem = Mem::new(cap);
    let base = mem.base() as usize;
    // Miri checks the same protocol for data races, on fewer frames.
    let n = if cfg!(miri) { 300 } else { 200_000u64 };
    let writer = std::thread::spawn(move || {
        // SAFETY: `mem` outlives both threads (joined below); one writer.
        let mut w = unsafe { RingWriter::new(base as *mut u8, cap) };
        for seq in 0..n {
            let payload = vec![seq as u8; (seq % 200) as usize];
            while !w.try_write(&eager(seq), &payload) {
                std::hint::spin_loop();
            }
        }
    });
    // SAFETY: as above; one reader.
    let mut r = unsafe { RingReader::new(base as *mut u8, cap) };
    let mut next = 0u64;
    while next < n {
        match r.peek().unwrap() {
            Some(h) => {
                assert_eq!(h.seq, next);
                let len = (next % 200) as usize;
                assert!(r.payload(&h, len).unwrap().iter().all(|&b| b == next as u8));
                r.consume(&h);
                r.publish();
                next += 1;
            }
            None => std::hint::spin_loop(),
        }
    }
    writer.join().unwrap();
    drop(mem);
}

#[test]
fn corrupt_frame_length_is_an_error_in_the_first_frame_and_later() {
    // The first frame goes through the out-of-line path (`prefault`),
    // later ones through the inlined check: both must refuse.
    for frame in [0usize, 1] {
        let cap = 512;
        let mut mem = Mem::new(cap);
        let (mut w, mut r) = mem.ends(cap);
        let base = mem.base();
        for seq in 0..2 {
            assert!(w.try_write(&eager(seq), &[1, 2, 3]));
        }
        if frame == 1 {
            let first = r.peek().unwrap().unwrap();
            r.consume(&first);
        }
        let at = 64 * frame;
        for bad in [0u32, 100, 4096] {
            // SAFETY: frame_len (offset 8 of that frame, which starts
            // at `at`) lies inside `mem`.
            unsafe { *(base.add(RING_CONTROL + at + 8) as *mut u32) = bad };
            let e = r.peek().unwrap_err();
            assert!(
                e.contains(&format!("frame length {bad} at ring offset {at}")),
                "{e}"
            );
        }
    }
}
