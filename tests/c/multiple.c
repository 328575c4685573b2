/* MPI_THREAD_MULTIPLE on 4 ranks: threads call MPI at the same time, with
   no lock of their own.
   - Each of 4 threads per rank has its own duplicate of MPI_COMM_WORLD and
     runs rings of blocking Sendrecv, Send/Recv, Ssend, Probe + Recv and
     collectives (Allreduce, Bcast, Allgather, Barrier) on it: a thread
     blocked in a receive or a collective must not stop the others, whose
     partners on other ranks wait for them.
   - Two threads of one rank talk to each other through MPI_COMM_SELF (a
     receive completed by a sibling's send wakes the blocked thread).
   - Waitany over requests of several threads' communicators.
   - Threads make communicators at once (Comm_dup, Comm_split,
     Comm_create, Comm_idup, Comm_create_group, Intercomm_create, the
     intercommunicator's dup and merge) from their own communicators, 20
     times each:
     their members agree on contexts while the other threads run; and
     rank 0 duplicates two communicators from two threads at once while
     the other ranks duplicate them one after the other, in the opposite
     order.
   - Threads put and flush on one window at once, each into its own slots
     of every rank, under one lock_all (MPICH's threads/rma/multirma).
   - Partitioned communication: threads fill and mark their partitions
     while the main thread already waits for the send, and poll
     MPI_Parrived on the receive (MPICH's threads/part/parrived_wait).
   Every result is checked against the value it must have; rank 0 prints
   "multiple ok <checks>" or FAIL lines. Built with `vpml mpicc` or MPICH's
   mpicc.mpich. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
static int ROUNDS = 50;

static int rank, size;
static long checks, failed;

#define CHECK(cond, ...)                                            \
    do {                                                            \
        __atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);           \
        if (!(cond)) {                                              \
            __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);       \
            printf("FAIL rank %d line %d: ", rank, __LINE__);       \
            printf(__VA_ARGS__);                                    \
            printf("\n");                                           \
        }                                                           \
    } while (0)

static MPI_Comm comms[THREADS];

/* One thread's work on its own communicator. */
static void *ring(void *arg) {
    int id = (int)(long)arg;
    MPI_Comm c = comms[id];
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < ROUNDS; i++) {
        long out = rank * 1000 + id * 100 + i, in = -1;
        MPI_Sendrecv(&out, 1, MPI_LONG, right, i, &in, 1, MPI_LONG, left, i, c, MPI_STATUS_IGNORE);
        CHECK(in == left * 1000 + id * 100 + i, "thread %d sendrecv %d got %ld", id, i, in);

        /* Even ranks send first, odd ranks receive first (blocking). */
        long got = -1;
        MPI_Status st;
        if (rank % 2 == 0) {
            MPI_Ssend(&out, 1, MPI_LONG, right, 7, c);
            MPI_Probe(MPI_ANY_SOURCE, 7, c, &st);
            CHECK(st.MPI_SOURCE == left, "thread %d probe source %d", id, st.MPI_SOURCE);
            MPI_Recv(&got, 1, MPI_LONG, st.MPI_SOURCE, 7, c, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&got, 1, MPI_LONG, left, 7, c, &st);
            MPI_Send(&out, 1, MPI_LONG, right, 7, c);
        }
        CHECK(got == left * 1000 + id * 100 + i, "thread %d round %d got %ld", id, i, got);

        long sum = 0;
        MPI_Allreduce(&out, &sum, 1, MPI_LONG, MPI_SUM, c);
        long want = 1000L * size * (size - 1) / 2 + (long)size * (id * 100 + i);
        CHECK(sum == want, "thread %d allreduce %d: %ld, not %ld", id, i, sum, want);

        int root = i % size, b = rank == root ? id * 7 + i : -1;
        MPI_Bcast(&b, 1, MPI_INT, root, c);
        CHECK(b == id * 7 + i, "thread %d bcast %d: %d", id, i, b);

        int all[64], me = rank + id;
        MPI_Allgather(&me, 1, MPI_INT, all, 1, MPI_INT, c);
        for (int r = 0; r < size; r++) CHECK(all[r] == r + id, "thread %d allgather[%d] %d", id, r, all[r]);
        MPI_Barrier(c);
    }
    return NULL;
}

/* Two threads of this rank: one receives on MPI_COMM_SELF what the other
   sends, ROUNDS times, with blocking calls. */
static void *self_receiver(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        int v = -1;
        MPI_Recv(&v, 1, MPI_INT, 0, i, MPI_COMM_SELF, MPI_STATUS_IGNORE);
        CHECK(v == i * 3, "self receive %d: %d", i, v);
    }
    return NULL;
}

static void *self_sender(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        int v = i * 3;
        MPI_Ssend(&v, 1, MPI_INT, 0, i, MPI_COMM_SELF);
    }
    return NULL;
}

/* Each thread receives from the rank on its left on its own communicator
   and the main thread waits for any of the sends. */
static void *any_receiver(void *arg) {
    int id = (int)(long)arg, v = -1;
    int left = (rank + size - 1) % size;
    MPI_Recv(&v, 1, MPI_INT, left, 3, comms[id], MPI_STATUS_IGNORE);
    CHECK(v == left * 10 + id, "waitany thread %d got %d", id, v);
    return NULL;
}

/* Each thread makes communicators from its own one, many times (more
   than a communicator's reserve of duplicates), and uses them. */
static void *creator(void *arg) {
    int id = (int)(long)arg;
    MPI_Comm c = comms[id];
    for (int i = 0; i < 20; i++) {
        MPI_Comm d, half, made, idup;
        MPI_Comm_dup(c, &d);
        MPI_Comm_split(d, rank % 2, -rank, &half);
        int hs = -1, hr = -1;
        MPI_Comm_size(half, &hs);
        MPI_Comm_rank(half, &hr);
        int want_size = (size + 1 - rank % 2) / 2;
        CHECK(hs == want_size, "thread %d split size %d, not %d", id, hs, want_size);
        /* Keys -rank: ranks in reverse order. */
        CHECK(hr == want_size - 1 - rank / 2, "thread %d split rank %d", id, hr);
        MPI_Group g;
        MPI_Comm_group(half, &g);
        MPI_Comm_create(d, g, &made);
        long v = rank, sum = 0;
        MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, made);
        long want = 0;
        for (int r = rank % 2; r < size; r += 2) want += r;
        CHECK(sum == want, "thread %d allreduce on a made communicator: %ld, not %ld", id, sum, want);
        MPI_Request rq;
        MPI_Comm_idup(made, &idup, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        MPI_Barrier(idup);
        MPI_Comm_free(&idup);
        /* The same group by Comm_create_group: its members alone agree,
           by the thread's tag. */
        MPI_Comm grouped;
        MPI_Comm_create_group(d, g, id, &grouped);
        sum = 0;
        MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, grouped);
        CHECK(sum == want, "thread %d allreduce on Comm_create_group's: %ld, not %ld", id, sum, want);
        /* An intercommunicator between the halves (led by their rank 0,
           the highest world rank of each parity, through d), duplicated
           and merged. */
        MPI_Comm inter, inter_dup, merged;
        int other_leader = (size - 1) % 2 == 1 - rank % 2 ? size - 1 : size - 2;
        MPI_Intercomm_create(half, 0, d, other_leader, 100 + id, &inter);
        MPI_Comm_dup(inter, &inter_dup);
        MPI_Intercomm_merge(inter_dup, rank % 2, &merged);
        int ms = -1, mr = -1;
        MPI_Comm_size(merged, &ms);
        MPI_Comm_rank(merged, &mr);
        CHECK(ms == size && (rank % 2 ? mr >= want_size : mr < want_size), "thread %d merged: size %d rank %d", id, ms, mr);
        sum = 0;
        MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, merged);
        CHECK(sum == (long)size * (size - 1) / 2, "thread %d allreduce on the merged: %ld", id, sum);
        MPI_Comm_free(&merged);
        MPI_Comm_free(&inter_dup);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&grouped);
        MPI_Group_free(&g);
        MPI_Comm_free(&made);
        MPI_Comm_free(&half);
        MPI_Comm_free(&d);
    }
    return NULL;
}

/* Rank 0's threads: duplicate comms[id] (ids 0 and 1 at once). */
/* One-sided from several threads at once: thread t puts into slot
   (origin * THREADS + t) of every rank's window and flushes each put. */
static MPI_Win win;
static int *slots;

static void *putter(void *arg) {
    int t = (int)(long)arg;
    for (int round = 1; round <= 10; round++) {
        for (int r = 0; r < size; r++) {
            int v = 1000 * round + rank * THREADS + t;
            MPI_Put(&v, 1, MPI_INT, r, rank * THREADS + t, 1, MPI_INT, win);
            MPI_Win_flush(r, win);
        }
    }
    return NULL;
}

/* Partitioned: thread t owns partitions 2t and 2t+1 of 8 (4 ints each). */
static int part_out[32], part_in[32];
static MPI_Request part_send, part_recv;

static void *marker(void *arg) {
    int t = (int)(long)arg;
    for (int i = 8 * t; i < 8 * t + 8; i++) part_out[i] = 100 * rank + i;
    MPI_Pready_range(2 * t, 2 * t + 1, part_send);
    return NULL;
}

static void *arrival(void *arg) {
    int t = (int)(long)arg, left = (rank + size - 1) % size, flag = 0;
    while (!flag) MPI_Parrived(part_recv, 2 * t + 1, &flag);
    for (int i = 8 * t; i < 8 * t + 8; i++)
        CHECK(part_in[i] == 100 * left + i, "partition of thread %d: in[%d] = %d", t, i, part_in[i]);
    return NULL;
}

static void partitioned(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Psend_init(part_out, 8, 4, MPI_INT, right, 21, MPI_COMM_WORLD, MPI_INFO_NULL, &part_send);
    MPI_Precv_init(part_in, 8, 4, MPI_INT, left, 21, MPI_COMM_WORLD, MPI_INFO_NULL, &part_recv);
    pthread_t th[2 * THREADS];
    for (int round = 0; round < 5; round++) {
        MPI_Start(&part_recv);
        MPI_Start(&part_send);
        for (long t = 0; t < THREADS; t++) {
            pthread_create(&th[t], NULL, marker, (void *)t);
            pthread_create(&th[THREADS + t], NULL, arrival, (void *)t);
        }
        /* Waits while the markers may not have marked yet. */
        MPI_Wait(&part_send, MPI_STATUS_IGNORE);
        for (int t = 0; t < 2 * THREADS; t++) pthread_join(th[t], NULL);
        MPI_Wait(&part_recv, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Request_free(&part_send);
    MPI_Request_free(&part_recv);
}

static MPI_Comm dups[2];

static void *dupper(void *arg) {
    int id = (int)(long)arg;
    MPI_Comm_dup(comms[id], &dups[id]);
    return NULL;
}

static void crossed_duplicates(void) {
    if (rank == 0) {
        pthread_t th[2];
        for (long t = 0; t < 2; t++) pthread_create(&th[t], NULL, dupper, (void *)t);
        for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    } else {
        MPI_Comm_dup(comms[1], &dups[1]);
        MPI_Comm_dup(comms[0], &dups[0]);
    }
    for (int i = 0; i < 2; i++) {
        int v = rank + i, sum = 0;
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, dups[i]);
        CHECK(sum == size * (size - 1) / 2 + size * i, "crossed duplicate %d: sum %d", i, sum);
        MPI_Comm_free(&dups[i]);
    }
}

int main(int argc, char **argv) {
    int provided = -1, queried = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (argc > 1) ROUNDS = atoi(argv[1]);
    MPI_Query_thread(&queried);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(provided == MPI_THREAD_MULTIPLE && queried == provided, "thread level %d %d", provided, queried);
    for (int t = 0; t < THREADS; t++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);

    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, ring, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);

    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, creator, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);

    crossed_duplicates();

    pthread_create(&th[0], NULL, self_receiver, NULL);
    pthread_create(&th[1], NULL, self_sender, NULL);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);

    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, any_receiver, (void *)t);
    MPI_Request rq[THREADS];
    int vals[THREADS], right = (rank + 1) % size;
    for (int t = 0; t < THREADS; t++) {
        vals[t] = rank * 10 + t;
        MPI_Isend(&vals[t], 1, MPI_INT, right, 3, comms[t], &rq[t]);
    }
    int seen = 0;
    for (int k = 0; k < THREADS; k++) {
        int idx = -1;
        MPI_Waitany(THREADS, rq, &idx, MPI_STATUS_IGNORE);
        CHECK(idx >= 0 && idx < THREADS && !(seen & (1 << idx)), "waitany index %d", idx);
        if (idx >= 0 && idx < THREADS) seen |= 1 << idx;
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);

    MPI_Win_allocate(size * THREADS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &slots, &win);
    MPI_Win_lock_all(0, win);
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, putter, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < size * THREADS; i++) CHECK(slots[i] == 10000 + i, "slot %d holds %d", i, slots[i]);
    MPI_Win_free(&win);

    partitioned();

    for (int t = 0; t < THREADS; t++) MPI_Comm_free(&comms[t]);
    long fails = failed, total_fails = 0, total_checks = 0, mine = checks;
    MPI_Reduce(&fails, &total_fails, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &total_checks, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && total_fails == 0) printf("multiple ok %ld\n", total_checks);
    MPI_Finalize();
    return 0;
}
