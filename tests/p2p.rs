//! Point-to-point semantics, checked by real rank processes started through
//! `vpml run` (the checks themselves are in `tests/programs/scenarios.rs`).

mod common;

use common::{assert_ok, scenario};

fn run_ok(n: usize, name: &str) {
    assert_ok(&scenario(n, name, &[], &[]), name);
}

/// The same scenario without the single-copy path: large messages travel as
/// fragments through the rings (what happens where the kernel forbids
/// cross-process reads).
fn run_ok_fragments(n: usize, name: &str) {
    assert_ok(
        &scenario(n, name, &[], &[("VPML_SHM_NO_SINGLE_COPY", "1")]),
        name,
    );
}

/// The same scenario with every pair of ranks talking over TCP.
fn run_ok_tcp(n: usize, name: &str) {
    assert_ok(&scenario(n, name, &["--transport", "tcp"], &[]), name);
}

#[test]
fn every_scenario_also_runs_over_tcp() {
    for (n, name) in [
        (2, "order"),
        (4, "any"),
        (3, "probe"),
        (3, "some"),
        (2, "truncate"),
        (2, "persistent"),
        (2, "ssend"),
        (2, "cancel"),
        (2, "large"),
        (2, "self"),
        (3, "sendrecv"),
        (16, "alltoall"),
        (2, "idle-cpu"),
    ] {
        run_ok_tcp(n, name);
    }
}

#[test]
fn ranks_on_two_pseudo_hosts_mix_shared_memory_and_tcp_pairs() {
    // Pairs within a pseudo-host use shared memory, pairs across use TCP,
    // as between real hosts.
    for (n, name) in [
        (4, "order"),
        (4, "any"),
        (4, "probe"),
        (4, "some"),
        (2, "large"),
        (4, "ssend"),
        (5, "sendrecv"),
        (16, "alltoall"),
    ] {
        assert_ok(&scenario(n, name, &["--simulate-hosts", "2"], &[]), name);
    }
}

#[test]
fn a_one_gib_message_crosses_tcp() {
    run_ok_tcp(2, "huge");
}

#[test]
fn non_overtaking_with_mixed_tags_and_sizes() {
    run_ok(2, "order");
    run_ok_fragments(2, "order");
}

#[test]
fn any_source_and_any_tag() {
    run_ok(4, "any");
}

#[test]
fn probe_then_receive_gets_the_probed_message() {
    run_ok(3, "probe");
}

#[test]
fn wait_and_test_family_report_every_completed_request() {
    run_ok(3, "some");
}

#[test]
fn truncation_is_an_error_value() {
    run_ok(2, "truncate");
    run_ok_fragments(2, "truncate");
}

#[test]
fn persistent_requests_are_reused() {
    run_ok(2, "persistent");
}

#[test]
fn ssend_completes_only_after_the_match() {
    run_ok(2, "ssend");
    run_ok_fragments(2, "ssend");
}

#[test]
fn cancel_of_pending_and_matched_receives() {
    run_ok(2, "cancel");
}

#[test]
fn large_messages_expected_and_unexpected() {
    run_ok(2, "large");
    run_ok_fragments(2, "large");
}

#[test]
fn a_one_gib_message_works() {
    run_ok(2, "huge");
    run_ok_fragments(2, "huge");
}

#[test]
fn messages_to_self() {
    run_ok(1, "self");
    run_ok(2, "self");
}

#[test]
fn sendrecv_shifts_around_a_ring() {
    run_ok(3, "sendrecv");
    run_ok(1, "sendrecv");
}

#[test]
fn invalid_arguments_are_errors() {
    run_ok(2, "invalid");
}

#[test]
fn sixteen_ranks_on_two_cores_finish_1000_alltoall_rounds() {
    run_ok(16, "alltoall");
}

#[test]
fn a_blocked_rank_sleeps() {
    let out = scenario(2, "idle-cpu", &[], &[]);
    assert_ok(&out, "idle-cpu");
}
