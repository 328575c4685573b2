//! Tests of bounded logs: segments moving to disk, memory reused, records
//! read back from disk, reopened, lent, and the error when nothing can
//! move.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;
use crate::tests::hdr;

const SEGMENT: usize = 8192;

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("vpml-slog-spill-")
        .tempdir()
        .expect("a temporary directory")
}

fn payload(dest: u32, seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 * 131 + seq * 7 + u64::from(dest)) as u8)
        .collect()
}

/// A bounded log of either kind in `t`: (log, its directory if a file
/// log, the spill directory).
fn bounded(t: &Path, file: bool, limit: usize) -> (SenderLog, Option<PathBuf>, PathBuf) {
    let spill = t.join("disk");
    let (mut log, dir) = if file {
        let dir = t.join("log");
        (SenderLog::create(&dir, 3, SEGMENT).unwrap(), Some(dir))
    } else {
        (SenderLog::create_in_memory(3, SEGMENT), None)
    };
    log.bound(limit, &spill).unwrap();
    (log, dir, spill)
}

fn segment_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("seg-"))
                .collect()
        })
        .unwrap_or_default()
}

fn segment_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("seg-"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_bounded_log_moves_full_segments_to_disk_and_reuses_their_memory() {
    for file in [true, false] {
        let t = tmp();
        let limit = 4 * SEGMENT;
        let (mut log, dir, spill) = bounded(t.path(), file, limit);
        let mut sent = Vec::new();
        // About 65 segments' worth, to three destinations.
        for seq in 1..=400u64 {
            for dest in 0..3 {
                let len = 100 + (seq as usize * 37 + dest as usize * 11) % 400;
                log.append(hdr(dest, seq), &payload(dest, seq, len))
                    .unwrap();
                sent.push((dest, seq, len));
                assert!(
                    log.memory_bytes() <= limit,
                    "{} > {limit}",
                    log.memory_bytes()
                );
            }
        }
        let (spilled, _, over) = log.spill_counts();
        assert!(spilled >= 30, "only {spilled} segments moved to disk");
        assert_eq!(over, 0);
        assert!(log.disk_bytes() > 30 * SEGMENT as u64 / 2);
        assert!(segment_files(&spill) >= 30);
        // Memory was taken for at most the limit's segments; the rest
        // reused it.
        let (fresh, reused) = log.segments_started();
        assert!(fresh as usize <= limit / SEGMENT, "{fresh} fresh segments");
        assert!(reused >= 30, "{reused}");
        for &(dest, seq, len) in &sent {
            let r = log.get(dest, 0, seq).unwrap().unwrap();
            assert_eq!(r.payload, payload(dest, seq, len).as_slice());
            assert_eq!(r.header, hdr(dest, seq));
        }
        for dest in 0..3 {
            let seqs: Vec<u64> = log
                .iter_from(dest, 0, 150)
                .map(|r| r.unwrap())
                .map(|r| r.header.seq)
                .collect();
            assert_eq!(seqs, (150..=400).collect::<Vec<_>>());
            assert_eq!(log.records_to(dest), 400);
        }
        // The index of a segment on disk is a run per destination, not a
        // record each.
        let indexed: usize = (0..3)
            .map(|d| log.index.get(d, 0).map_or(0, |q| q.entries.len()))
            .sum();
        assert!(
            indexed < 3 * 400 / 4,
            "{indexed} records indexed one by one"
        );
        if let Some(dir) = dir {
            // A reader finds the segments on disk through the log's
            // `spilled` link.
            assert_eq!(std::fs::read_link(dir.join(SPILL_DIR)).unwrap(), spill);
            drop(log);
            let read = SenderLog::open_read_only(&dir).unwrap();
            for &(dest, seq, len) in &sent {
                assert_eq!(
                    read.get(dest, 0, seq).unwrap().map(|r| r.payload.to_vec()),
                    Some(payload(dest, seq, len)),
                    "{dest}/{seq}"
                );
            }
        }
    }
}

#[test]
fn freeing_records_on_disk_deletes_their_files() {
    let t = tmp();
    let (mut log, _, spill) = bounded(t.path(), true, 2 * SEGMENT);
    for seq in 1..=100u64 {
        log.append(hdr(1, seq), &payload(1, seq, 900)).unwrap();
    }
    assert!(segment_files(&spill) > 5);
    log.free_up_to(1, 0, 60).unwrap();
    assert_eq!(log.records_to(1), 40);
    assert_eq!(
        log.iter_from(1, 0, 0)
            .map(|r| r.unwrap())
            .next()
            .map(|r| r.header.seq),
        Some(61)
    );
    log.free_up_to(1, 0, 100).unwrap();
    assert_eq!(log.records_to(1), 0);
    assert_eq!(log.disk_bytes(), 0);
    // Only copies of segments still in memory may remain.
    assert!(segment_files(&spill) <= 2, "{}", segment_files(&spill));
}

#[test]
fn memory_lent_to_the_engine_is_not_reused_until_it_is_returned() {
    let t = tmp();
    let limit = 2 * SEGMENT;
    let (mut log, _, _) = bounded(t.path(), false, limit);
    let first = log.append(hdr(0, 1), &payload(0, 1, 500)).unwrap();
    let loan = log
        .lend(first.segment)
        .expect("the current segment is memory");
    let kept = log.payload(&first).unwrap().as_ptr();
    for seq in 2..=60u64 {
        log.append(hdr(0, seq), &payload(0, seq, 500)).unwrap();
    }
    // The lent bytes are still there, at the same address, unchanged.
    // SAFETY: the loan keeps the memory mapped and unwritten.
    let still = unsafe { std::slice::from_raw_parts(kept, 500) };
    assert_eq!(still, payload(0, 1, 500).as_slice());
    let (_, _, over) = log.spill_counts();
    assert!(over > 0, "the log should have gone past its limit");
    drop(loan);
    let before = log.segments_started().1;
    for seq in 61..=120u64 {
        log.append(hdr(0, seq), &payload(0, seq, 500)).unwrap();
    }
    assert!(log.segments_started().1 > before);
    assert!(log.memory_bytes() <= limit + SEGMENT);
    for seq in 1..=120u64 {
        assert_eq!(
            log.get(0, 0, seq).unwrap().unwrap().payload,
            payload(0, seq, 500).as_slice()
        );
    }
}

#[test]
fn a_log_that_cannot_move_anything_to_disk_says_so_at_its_limit() {
    let t = tmp();
    let (mut log, _, spill) = bounded(t.path(), false, 2 * SEGMENT);
    // Where the copies go is not a directory any more.
    std::fs::remove_dir_all(&spill).unwrap();
    std::fs::write(&spill, b"in the way").unwrap();
    let mut err = None;
    for seq in 1..=40u64 {
        if let Err(e) = log.append(hdr(0, seq), &payload(0, seq, 1000)) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the log should be full").to_string();
    assert!(
        err.starts_with(
            "the sender log is full: 16 KiB in memory (its limit) and nothing more can move to "
        ),
        "{err}"
    );
    assert!(err.contains(&spill.display().to_string()), "{err}");
    assert!(err.contains("Not a directory"), "{err}");
}

#[test]
fn a_restarted_process_reopens_records_in_memory_and_on_disk() {
    let t = tmp();
    let (mut log, dir, spill) = bounded(t.path(), true, 3 * SEGMENT);
    let dir = dir.unwrap();
    for seq in 1..=80u64 {
        log.append(hdr(2, seq), &payload(2, seq, 700)).unwrap();
    }
    assert!(segment_files(&spill) > 3);
    drop(log);
    // The checkpoint kept 50: the rest is logged again.
    let mut again = SenderLog::reopen(&dir, 3, SEGMENT, |_, _| 50).unwrap();
    again.bound(3 * SEGMENT, &spill).unwrap();
    assert_eq!(again.records_to(2), 50);
    for seq in 51..=90u64 {
        again.append(hdr(2, seq), &payload(2, seq, 333)).unwrap();
    }
    let got: Vec<(u64, usize)> = again
        .iter_from(2, 0, 0)
        .map(|r| r.unwrap())
        .map(|r| (r.header.seq, r.payload.len()))
        .collect();
    let want: Vec<(u64, usize)> = (1..=90)
        .map(|s| (s, if s <= 50 { 700 } else { 333 }))
        .collect();
    assert_eq!(got, want);
    for seq in 1..=90u64 {
        let len = if seq <= 50 { 700 } else { 333 };
        assert_eq!(
            again.get(2, 0, seq).unwrap().unwrap().payload,
            payload(2, seq, len).as_slice()
        );
    }
    // The receiver checkpointed past everything: every file goes, those
    // the earlier process moved to disk included (reached through the
    // log's link to the spill directory).
    again.free_up_to(2, 0, 90).unwrap();
    assert_eq!(again.records_to(2), 0);
    drop(again);
    assert_eq!(segment_files(&spill), 0);
}

#[test]
fn a_segment_both_in_memory_and_on_disk_after_a_crash_is_read_from_disk() {
    let t = tmp();
    let (mut log, dir, spill) = bounded(t.path(), true, 8 * SEGMENT);
    let dir = dir.unwrap();
    for seq in 1..=30u64 {
        log.append(hdr(0, seq), &payload(0, seq, 1000)).unwrap();
    }
    // Let the copies finish without reusing the memory: the state a
    // process killed now leaves.
    while log.copies_under_way() {
        assert!(log.wait_copy());
    }
    drop(log);
    let in_memory = segment_names(&dir);
    let on_disk = segment_names(&spill);
    let both = in_memory.intersection(&on_disk).count();
    // At least the last full segment: copied after the last new one began.
    assert!(both >= 1, "{in_memory:?} in memory, {on_disk:?} on disk");
    let read = SenderLog::open_read_only(&dir).unwrap();
    assert_eq!(read.records_to(0), 30);
    drop(read);
    // A restarted writer keeps the copies and frees the memory.
    let again = SenderLog::reopen(&dir, 3, SEGMENT, |_, _| u64::MAX).unwrap();
    let left: BTreeSet<String> = in_memory.difference(&on_disk).cloned().collect();
    assert_eq!(segment_names(&dir), left);
    assert_eq!(again.memory_bytes(), left.len() * SEGMENT);
    for seq in 1..=30u64 {
        assert_eq!(
            again.get(0, 0, seq).unwrap().unwrap().payload,
            payload(0, seq, 1000).as_slice()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn a_bounded_log_keeps_what_a_model_keeps(
        ops in prop::collection::vec((0u32..3, 0usize..3000, any::<bool>()), 1..150),
        file in any::<bool>(),
    ) {
        let t = tmp();
        let (mut log, dir, _) = bounded(t.path(), file, 3 * SEGMENT);
        let mut model: BTreeMap<(u32, u64), Vec<u8>> = BTreeMap::new();
        let mut next = [0u64; 3];
        for (dest, len, free) in ops {
            if free && next[dest as usize] > 1 {
                let upto = next[dest as usize] / 2;
                log.free_up_to(dest, 0, upto).unwrap();
                model.retain(|&(d, s), _| d != dest || s > upto);
            } else {
                next[dest as usize] += 1;
                let seq = next[dest as usize];
                let p = payload(dest, seq, len);
                log.append(hdr(dest, seq), &p).unwrap();
                model.insert((dest, seq), p);
            }
            prop_assert!(log.memory_bytes() <= 3 * SEGMENT);
        }
        for dest in 0..3 {
            let got: Vec<(u64, Vec<u8>)> = log.iter_from(dest, 0, 0).map(|r| r.unwrap()).map(|r| (r.header.seq, r.payload.to_vec())).collect();
            let want: Vec<(u64, Vec<u8>)> = model.iter().filter(|((d, _), _)| *d == dest).map(|((_, s), p)| (*s, p.clone())).collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!(log.records_to(dest), model.keys().filter(|(d, _)| *d == dest).count());
        }
        if let Some(dir) = dir {
            drop(log);
            let again = SenderLog::reopen(&dir, 3, SEGMENT, |_, _| u64::MAX).unwrap();
            for ((dest, seq), p) in &model {
                prop_assert_eq!(again.get(*dest, 0, *seq).unwrap().map(|r| r.payload.to_vec()), Some(p.clone()));
            }
        }
    }
}

#[test]
fn a_relative_spill_directory_is_linked_by_its_absolute_path() {
    let t = tmp();
    let dir = t.path().join("log");
    let mut log = SenderLog::create(&dir, 3, SEGMENT).unwrap();
    // Relative to the process's working directory, as `--spill-dir d`.
    let relative = t
        .path()
        .join("disk")
        .strip_prefix(std::env::current_dir().unwrap())
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| {
            // The temporary directory is not under the working one: a
            // relative path reaching it through `..` works as well.
            let depth = std::env::current_dir().unwrap().components().count() - 1;
            let mut up = PathBuf::new();
            for _ in 0..depth {
                up.push("..");
            }
            up.join(t.path().join("disk").strip_prefix("/").unwrap())
        });
    assert!(relative.is_relative());
    log.bound(2 * SEGMENT, &relative).unwrap();
    for seq in 1..=60u64 {
        log.append(hdr(0, seq), &payload(0, seq, 900)).unwrap();
    }
    drop(log);
    let link = std::fs::read_link(dir.join(SPILL_DIR)).unwrap();
    assert!(link.is_absolute(), "{}", link.display());
    let again = SenderLog::reopen(&dir, 3, SEGMENT, |_, _| u64::MAX).unwrap();
    assert_eq!(again.records_to(0), 60);
}

#[test]
fn an_earlier_jobs_spilled_directory_gives_way_to_the_link_and_a_dangling_link_is_an_error() {
    let t = tmp();
    let dir = t.path().join("log");
    let disk = t.path().join("disk");
    // An earlier job kept its moved segments under the log directory.
    {
        let mut log = SenderLog::create(&dir, 3, SEGMENT).unwrap();
        log.bound(2 * SEGMENT, &dir.join(SPILL_DIR)).unwrap();
        for seq in 1..=40u64 {
            log.append(hdr(0, seq), &payload(0, seq, 900)).unwrap();
        }
    }
    assert!(segment_files(&dir.join(SPILL_DIR)) > 0);
    // This one moves them elsewhere: its link replaces the directory
    // (`create` emptied it), and a restart finds every record through it.
    {
        let mut log = SenderLog::create(&dir, 3, SEGMENT).unwrap();
        log.bound(2 * SEGMENT, &disk).unwrap();
        for seq in 1..=40u64 {
            log.append(hdr(0, seq), &payload(0, seq, 900)).unwrap();
        }
    }
    assert_eq!(std::fs::read_link(dir.join(SPILL_DIR)).unwrap(), disk);
    let again = SenderLog::reopen(&dir, 3, SEGMENT, |_, _| u64::MAX).unwrap();
    assert_eq!(again.records_to(0), 40);
    drop(again);
    // Segments on disk that are gone are lost records: an error, not a
    // shorter log.
    std::fs::remove_dir_all(&disk).unwrap();
    let err = SenderLog::reopen(&dir, 3, SEGMENT, |_, _| u64::MAX)
        .err()
        .expect("a dangling link to the spill directory")
        .to_string();
    assert!(err.contains("listing the segments moved to disk"), "{err}");
}

#[test]
fn a_log_restored_from_a_checkpoint_copy_drops_older_copies_on_disk_and_can_move_it_out() {
    let t = tmp();
    let dir = t.path().join("log");
    let disk = t.path().join("disk");
    let saved = t.path().join("checkpoint-log.vlog");
    {
        let mut log = SenderLog::create(&dir, 3, SEGMENT).unwrap();
        log.bound(2 * SEGMENT, &disk).unwrap();
        for seq in 1..=40u64 {
            log.append(hdr(0, seq), &payload(0, seq, 900)).unwrap();
        }
        log.free_up_to(0, 0, 30).unwrap();
        log.save_kept(&saved).unwrap();
    }
    assert!(segment_files(&disk) > 0);
    // The host is lost with the log directory, not the spill directory:
    // the restart adopts the checkpoint's copy as segment 0.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    SenderLog::adopt_saved(&saved, &dir).unwrap();
    let mut log = SenderLog::reopen(&dir, 3, SEGMENT, |_, _| u64::MAX).unwrap();
    log.bound(2 * SEGMENT, &disk).unwrap();
    // Only this log's segments remain there: none (segment 0 is in memory).
    assert_eq!(segment_files(&disk), 0);
    // The adopted segment (not a whole number of pages long) moves to
    // disk like any other.
    for seq in 41..=100u64 {
        log.append(hdr(0, seq), &payload(0, seq, 900)).unwrap();
    }
    assert_eq!(log.spill_counts().2, 0);
    drop(log);
    let again = SenderLog::reopen(&dir, 3, SEGMENT, |_, _| u64::MAX).unwrap();
    let seqs: Vec<u64> = again
        .iter_from(0, 0, 0)
        .map(|r| r.unwrap().header.seq)
        .collect();
    assert_eq!(seqs, (31..=100).collect::<Vec<_>>());
}

#[test]
fn a_segment_lent_longer_does_not_keep_later_ones_indexed_record_by_record() {
    let t = tmp();
    let (mut log, _, _) = bounded(t.path(), false, 3 * SEGMENT);
    let first = log.append(hdr(0, 1), &payload(0, 1, 900)).unwrap();
    let loan = log.lend(first.segment).unwrap();
    for seq in 2..=100u64 {
        log.append(hdr(0, seq), &payload(0, seq, 900)).unwrap();
    }
    drop(loan);
    for seq in 101..=200u64 {
        log.append(hdr(0, seq), &payload(0, seq, 900)).unwrap();
    }
    let indexed = log.index.get(0, 0).map_or(0, |q| q.entries.len());
    assert!(indexed < 40, "{indexed} records indexed one by one");
    let seqs: Vec<u64> = log
        .iter_from(0, 0, 0)
        .map(|r| r.unwrap().header.seq)
        .collect();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
}
