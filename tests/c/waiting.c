/* Nonblocking receives of messages that already wait for them. Ranks
   pair up (0 sends to 1, 2 to 3); the sender tells its receiver that its
   messages are out through a flag in a shared-memory window, which the
   receiver watches without calling MPI, so that its MPI_Irecv calls find
   the messages waiting in the sender's ring (vpml copies such a message
   at once and completes the receive when it starts). Checked: contents,
   statuses (source, tag, count) and order, with receives posted before
   the messages came ahead of them (ANY_SOURCE among them), a receive too
   small, MPI_Request_get_status, MPI_Cancel and MPI_Test on a receive
   complete at start, tags taken out of order, a synchronous message among
   them, MPI_Waitany, MPI_Testsome and MPI_Request_free. Every check that
   fails prints "FAIL <what>"; rank 0 ends with "waiting ok <checks>" and
   the number of receives complete at start (the MPI_T counter
   vpml_receives_complete_at_start, over all ranks). Built with `vpml
   mpicc` or MPICH's mpicc.mpich. */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define N 24
#define ROOM 100

static int peer, sender;
/* Slot 0: the last phase whose messages the sender sent (written by the
   sender into the receiver's flags); slot 1: the last phase the receiver
   is ready for, its earlier phases done and its first receives posted
   (written into the sender's): sent earlier, a message could arrive
   while the receiver still waits in the phase before, and be taken out
   of the ring then. */
static int *my_flags, *peer_flags;
/* Ranks done with every phase (slot 2 of the node's first rank): no rank
   enters the closing collectives before all are, so that no frame of
   another pair arrives while a receiver still counts on a quiet ring. */
static int *done;
static char out[N][ROOM], in[N][ROOM];

static void tell(int slot, int phase) { __atomic_store_n(&peer_flags[slot], phase, __ATOMIC_RELEASE); }

static void await_flag(int slot, int phase) {
    while (__atomic_load_n(&my_flags[slot], __ATOMIC_ACQUIRE) < phase) sched_yield();
}

static int length(int i) { return (i * 7) % ROOM; }

static void fill(char *b, int n, int seed) {
    for (int i = 0; i < n; i++) b[i] = (char)(seed * 31 + i);
}

static int holds(const char *b, int n, int seed) {
    for (int i = 0; i < n; i++)
        if (b[i] != (char)(seed * 31 + i)) return 0;
    return 1;
}

/* The sender's part of a phase: `count` messages, message i of
   length(i) bytes and tag i % 3 (synchronous if i is `sync`), all out
   before the receiver is told. */
static void send_phase(int phase, int count, int sync, MPI_Comm comm) {
    MPI_Request r[N];
    for (int i = 0; i < count; i++) {
        fill(out[i], length(i), phase * N + i);
        if (i == sync) MPI_Issend(out[i], length(i), MPI_CHAR, peer, i % 3, comm, &r[i]);
        else MPI_Isend(out[i], length(i), MPI_CHAR, peer, i % 3, comm, &r[i]);
    }
    tell(0, phase);
    MPI_Waitall(count, r, MPI_STATUSES_IGNORE);
}

/* Message i of `phase` arrived whole in in[i], with status `st`. */
static void check_message(int phase, int i, MPI_Status *st) {
    int count = -1;
    MPI_Get_count(st, MPI_CHAR, &count);
    CHECK(st->MPI_SOURCE == peer, "phase %d message %d: source %d", phase, i, st->MPI_SOURCE);
    CHECK(st->MPI_TAG == i % 3, "phase %d message %d: tag %d", phase, i, st->MPI_TAG);
    CHECK(count == length(i), "phase %d message %d: count %d", phase, i, count);
    CHECK(holds(in[i], length(i), phase * N + i), "phase %d message %d: contents", phase, i);
}

/* Every message waits before its receive is posted. */
static void all_waiting(MPI_Comm comm) {
    if (sender) {
        await_flag(1, 1);
        send_phase(1, N, -1, comm);
        return;
    }
    tell(1, 1);
    await_flag(0, 1);
    MPI_Request r[N];
    MPI_Status st[N];
    for (int i = 0; i < N; i++) MPI_Irecv(in[i], ROOM, MPI_CHAR, peer, MPI_ANY_TAG, comm, &r[i]);
    MPI_Waitall(N, r, st);
    for (int i = 0; i < N; i++) {
        check_message(1, i, &st[i]);
        CHECK(r[i] == MPI_REQUEST_NULL, "message %d: request not freed", i);
    }
}

/* The first receive is posted before anything was sent (from any source
   when `any`), the others once all messages wait: each takes its own. */
static void first_posted_early(MPI_Comm comm, int phase, int any) {
    if (sender) {
        await_flag(1, phase);
        send_phase(phase, N, -1, comm);
        return;
    }
    MPI_Request r[N];
    MPI_Status st[N];
    MPI_Irecv(in[0], ROOM, MPI_CHAR, any ? MPI_ANY_SOURCE : peer, MPI_ANY_TAG, comm, &r[0]);
    tell(1, phase);
    await_flag(0, phase);
    for (int i = 1; i < N; i++) MPI_Irecv(in[i], ROOM, MPI_CHAR, peer, i % 3, comm, &r[i]);
    MPI_Waitall(N, r, st);
    for (int i = 0; i < N; i++) check_message(phase, i, &st[i]);
}

/* A waiting message longer than the receive's buffer: truncated, with
   what fits delivered. */
static void too_small(MPI_Comm comm) {
    if (sender) {
        await_flag(1, 4);
        fill(out[0], ROOM, 4);
        MPI_Send(out[0], ROOM, MPI_CHAR, peer, 7, comm);
        tell(0, 4);
        return;
    }
    tell(1, 4);
    await_flag(0, 4);
    MPI_Request r;
    MPI_Status st;
    memset(in[0], 0, ROOM);
    int rc = MPI_Irecv(in[0], 10, MPI_CHAR, peer, 7, comm, &r);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, &st);
    int class = MPI_SUCCESS;
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_TRUNCATE, "a message too long: class %d", class);
    CHECK(holds(in[0], 10, 4) && in[0][10] == 0, "a message too long: what fits");
}

/* Three waiting messages, tags 1, 2, 3: the first received, then asked
   about, cancelled (too late) and tested; then tag 3 before tag 2. */
static void asked_cancelled_reordered(MPI_Comm comm) {
    if (sender) {
        await_flag(1, 5);
        for (int t = 1; t <= 3; t++) {
            fill(out[t], t * 10, 50 + t);
            MPI_Send(out[t], t * 10, MPI_CHAR, peer, t, comm);
        }
        tell(0, 5);
        return;
    }
    tell(1, 5);
    await_flag(0, 5);
    MPI_Request r, pair[2];
    MPI_Status st;
    int flag = 0, count = -1, cancelled = -1;
    MPI_Irecv(in[1], ROOM, MPI_CHAR, peer, 1, comm, &r);
    MPI_Request_get_status(r, &flag, &st);
    MPI_Get_count(&st, MPI_CHAR, &count);
    CHECK(flag && st.MPI_TAG == 1 && st.MPI_SOURCE == peer && count == 10,
          "get_status: flag %d tag %d source %d count %d", flag, st.MPI_TAG, st.MPI_SOURCE, count);
    CHECK(r != MPI_REQUEST_NULL, "get_status freed the request");
    MPI_Cancel(&r);
    flag = 0;
    MPI_Test(&r, &flag, &st);
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(flag && r == MPI_REQUEST_NULL, "test: flag %d", flag);
    CHECK(cancelled == 0, "a receive complete at start reported cancelled");
    CHECK(st.MPI_TAG == 1 && holds(in[1], 10, 51), "test: tag %d or contents", st.MPI_TAG);
    MPI_Irecv(in[3], ROOM, MPI_CHAR, peer, 3, comm, &pair[0]);
    MPI_Irecv(in[2], ROOM, MPI_CHAR, peer, 2, comm, &pair[1]);
    MPI_Status sts[2];
    MPI_Waitall(2, pair, sts);
    CHECK(sts[0].MPI_TAG == 3 && holds(in[3], 30, 53), "tag 3 first: tag %d or contents", sts[0].MPI_TAG);
    CHECK(sts[1].MPI_TAG == 2 && holds(in[2], 20, 52), "tag 2 after: tag %d or contents", sts[1].MPI_TAG);
}

/* Three receives posted before their messages came, then two more once
   all wait; the second message is synchronous: the later receives stop
   at it, and each still takes its own message. */
static void several_early_one_synchronous(MPI_Comm comm) {
    if (sender) {
        await_flag(1, 6);
        send_phase(6, 5, 1, comm);
        return;
    }
    MPI_Request r[5];
    MPI_Status st[5];
    MPI_Irecv(in[0], ROOM, MPI_CHAR, peer, MPI_ANY_TAG, comm, &r[0]);
    MPI_Irecv(in[1], ROOM, MPI_CHAR, peer, 1, comm, &r[1]);
    MPI_Irecv(in[2], ROOM, MPI_CHAR, peer, 2, comm, &r[2]);
    tell(1, 6);
    await_flag(0, 6);
    MPI_Irecv(in[3], ROOM, MPI_CHAR, peer, 0, comm, &r[3]);
    MPI_Irecv(in[4], ROOM, MPI_CHAR, peer, 1, comm, &r[4]);
    MPI_Waitall(5, r, st);
    for (int i = 0; i < 5; i++) check_message(6, i, &st[i]);
}

/* Two receives posted early; of the four after them (each complete at
   start), one is freed, two completed by MPI_Waitany and MPI_Testsome. */
static void early_then_any_some_free(MPI_Comm comm) {
    if (sender) {
        await_flag(1, 7);
        send_phase(7, 6, -1, comm);
        return;
    }
    MPI_Request r[6];
    MPI_Status st[6];
    MPI_Irecv(in[0], ROOM, MPI_CHAR, peer, MPI_ANY_TAG, comm, &r[0]);
    MPI_Irecv(in[1], ROOM, MPI_CHAR, peer, 1, comm, &r[1]);
    tell(1, 7);
    await_flag(0, 7);
    for (int i = 2; i < 6; i++) MPI_Irecv(in[i], ROOM, MPI_CHAR, peer, i % 3, comm, &r[i]);
    MPI_Request_free(&r[3]);
    CHECK(r[3] == MPI_REQUEST_NULL, "request_free left the handle");
    int index = -1, outcount = -1, indices[2] = {-1, -1};
    MPI_Waitany(2, &r[4], &index, &st[4]);
    CHECK(index == 0 || index == 1, "waitany index %d", index);
    if (index == 0 || index == 1) check_message(7, 4 + index, &st[4]);
    MPI_Testsome(2, &r[4], &outcount, indices, &st[5]);
    CHECK(outcount == 1 && indices[0] == 1 - index, "testsome: %d requests, first %d", outcount, indices[0]);
    if (outcount == 1 && indices[0] == 1 - index) check_message(7, 4 + indices[0], &st[5]);
    MPI_Waitall(3, r, st);
    for (int i = 0; i < 3; i++) check_message(7, i, &st[i]);
    /* Its message came before the ones received after it. */
    CHECK(holds(in[3], length(3), 7 * N + 3), "the freed receive's message");
}

/* This rank's count of receives complete at start (MPI_T). */
static unsigned long long at_start(void) {
    int provided, index;
    unsigned long long n = 0;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (MPI_T_pvar_get_index("vpml_receives_complete_at_start", MPI_T_PVAR_CLASS_COUNTER, &index) == MPI_SUCCESS) {
        MPI_T_pvar_session ps;
        MPI_T_pvar_handle ph;
        int count;
        MPI_T_pvar_session_create(&ps);
        MPI_T_pvar_handle_alloc(ps, index, NULL, &ph, &count);
        MPI_T_pvar_read(ps, ph, &n);
        MPI_T_pvar_handle_free(ps, &ph);
        MPI_T_pvar_session_free(&ps);
    }
    MPI_T_finalize();
    return n;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size % 2) {
        if (rank == 0) printf("FAIL waiting.c needs an even number of ranks\n");
        MPI_Finalize();
        return 1;
    }
    peer = rank ^ 1;
    sender = rank % 2 == 0;
    MPI_Comm node, comm;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Win win;
    int *base;
    MPI_Win_allocate_shared(3 * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &base, &win);
    MPI_Aint qsize;
    int qunit, node_peer;
    MPI_Group wg, ng;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Comm_group(node, &ng);
    MPI_Group_translate_ranks(wg, 1, &peer, ng, &node_peer);
    MPI_Group_free(&wg);
    MPI_Group_free(&ng);
    MPI_Win_shared_query(win, node_peer, &qsize, &qunit, &peer_flags);
    MPI_Win_shared_query(win, 0, &qsize, &qunit, &done);
    my_flags = base;
    my_flags[0] = my_flags[1] = my_flags[2] = 0;
    MPI_Barrier(MPI_COMM_WORLD);

    all_waiting(comm);
    first_posted_early(comm, 2, 0);
    first_posted_early(comm, 3, 1);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    too_small(comm);
    asked_cancelled_reordered(comm);
    several_early_one_synchronous(comm);
    early_then_any_some_free(comm);
    __atomic_fetch_add(&done[2], 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&done[2], __ATOMIC_ACQUIRE) < size) sched_yield();

    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    int all_failed = 0, all_checks = 0;
    MPI_Reduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&checks, &all_checks, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    unsigned long long mine = at_start(), all_at_start = 0;
    MPI_Reduce(&mine, &all_at_start, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && all_failed == 0) printf("waiting ok %d\nreceives complete at start: %llu\n", all_checks, all_at_start);
    MPI_Comm_free(&comm);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return all_failed != 0;
}
