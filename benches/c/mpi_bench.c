/* OSU-style measurements of an unmodified MPI program, to run the same
 * binary side by side on several MPIs (the bench suite's `speed` parts:
 * vpml against Open MPI and MPICH) and with and without a logging protocol
 * (its `nocheckpoint` part). Build: mpicc -O2 mpi_bench.c. Sizes: 0 B
 * (with --min 0), 1 B, 4 B, 16 B, ... up to --max (powers of 4).
 *
 *   latency   half the mean round trip of blocking send/recv, ranks 0-1 (us)
 *   latency_mt  the latency test run by 4 threads of ranks 0 and 1 at once,
 *             each pair of threads on its own communicator, under
 *             MPI_THREAD_MULTIPLE (OSU's osu_latency_mt): half the mean
 *             round trip one thread sees (us)
 *   sendrecv  the mean time of one MPI_Sendrecv exchange between ranks 0
 *             and 1, each sending to and receiving from the other (us)
 *   bw        a window of 64 nonblocking sends 0 -> 1, then an empty ack (MB/s)
 *   msgrate   the bw window, counted in messages per second
 *   bibw      both ranks send a window at once (MB/s, both directions)
 *   mrate     every rank in a pair (r, r + n/2) runs the bw window: the
 *             messages per second of all pairs together (OSU's mbw_mr)
 *   put_latency get_latency
 *             one-sided, ranks 0-1 (OSU's osu_put_latency / osu_get_latency
 *             with lock/unlock): rank 0 locks rank 1's window, puts or gets
 *             `bytes`, unlocks; mean time of one such epoch (us), while
 *             rank 1 waits in a barrier
 *   acc_latency get_acc_latency
 *             the same epoch with MPI_Accumulate / MPI_Get_accumulate of
 *             `bytes` (doubles, MPI_SUM; from 8 B on) (OSU's
 *             osu_acc_latency / osu_get_acc_latency) (us)
 *   fop_latency cas_latency
 *             the same epoch with one MPI_Fetch_and_op (MPI_SUM) or
 *             MPI_Compare_and_swap of a 64-bit integer, reported at 8 B
 *             (OSU's osu_fop_latency / osu_cas_latency) (us)
 *   put_bw get_bw
 *             rank 0 locks rank 1's window, puts or gets a window of 64
 *             messages, unlocks (OSU's osu_put_bw / osu_get_bw) (MB/s)
 *   barrier bcast reduce allreduce gather gatherv scatter scatterv
 *   allgather allgatherv alltoall alltoallv alltoallw reduce_scatter
 *   reduce_scatter_block scan
 *             mean time of one collective, slowest rank (us); `bytes` is
 *             each rank's contribution (reductions: from 8 B on, doubles;
 *             barrier: once, at 0 B)
 *   ibarrier ibcast ireduce iallreduce igather igatherv iscatter
 *   iscatterv iallgather iallgatherv ialltoall ialltoallv ialltoallw
 *   ireduce_scatter ireduce_scatter_block iscan
 *             the nonblocking collective started and waited for at once
 *             (OSU's osu_i* "pure communication" time), as above (us)
 *
 * How many repetitions: by default each test moves a bounded volume per
 * size (so that a sender log that only grows stays within memory); with
 * --budget-ms MS each test and size runs for about MS milliseconds within
 * that volume (the count is calibrated on timed calls — one, for a
 * collective — and agreed by all ranks), which keeps slow configurations
 * (oversubscribed, competing processes) short. Untimed calls come first,
 * outside that volume: the latency test's warm-up round, and each
 * collective once (rooted ones once per root).
 *
 * Output: one line per test and size, or JSON with --json:
 *   {"impl":"mpi","ranks":2,"test":"bw","bytes":1024,"value":123.4}
 * Options: --tests a,b,... (default: latency,bw,msgrate,bibw,allreduce,
 * bcast,allgather,allgatherv,alltoall,alltoallv), --min BYTES (default 1),
 * --max BYTES (default 4 MiB), --budget-ms MS, --name NAME, --json. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
/* Payload bytes each test moves per size (each direction for bibw). */
#define VOLUME (96L << 20)

static int rank, nranks, json;
static double budget_ms;
static const char *name = "mpi";
static const char *tests = "latency,bw,msgrate,bibw,allreduce,bcast,allgather,allgatherv,alltoall,alltoallv";

/* A buffer, or the job ends saying why. */
static void *need(void *p) {
    if (!p) {
        fprintf(stderr, "mpi_bench: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

static long clamp(long n, long lo, long hi) { return n < lo ? lo : (n > hi ? hi : n); }

/* Is `test` in the comma-separated list of tests to run? */
static int wanted(const char *test) {
    size_t n = strlen(test);
    for (const char *p = tests; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, test, n)) return 1;
        p += len + (end ? 1 : 0);
    }
    return 0;
}

static void report(const char *test, long bytes, double value) {
    if (rank != 0) return;
    if (json)
        printf("{\"impl\":\"%s\",\"ranks\":%d,\"test\":\"%s\",\"bytes\":%ld,\"value\":%.4f}\n",
               name, nranks, test, bytes, value);
    else
        printf("%-20s %9ld %14.4f\n", test, bytes, value);
    fflush(stdout);
}

/* Repetitions: `by_volume` without a budget; with one, as many as fit in
 * it given that one takes `secs` (the slowest rank's first timed ones),
 * the same on every rank of `comm`. */
static long repetitions(long by_volume, double secs, MPI_Comm comm) {
    if (budget_ms <= 0) return by_volume;
    double worst;
    MPI_Allreduce(&secs, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
    return clamp((long)(budget_ms / 1e3 / (worst > 1e-9 ? worst : 1e-9)), 3, by_volume);
}

/* One window of `s`-byte messages from `from` to `to` (both call it),
 * then an empty acknowledgement. */
static void window_once(char **window, long s, int me, int from, int to, MPI_Comm comm) {
    MPI_Request reqs[WINDOW];
    for (int w = 0; w < WINDOW; w++) {
        if (me == from) MPI_Isend(window[w], s, MPI_BYTE, to, 2, comm, &reqs[w]);
        else MPI_Irecv(window[w], s, MPI_BYTE, from, 2, comm, &reqs[w]);
    }
    MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
    if (me == from) MPI_Recv(NULL, 0, MPI_BYTE, to, 3, comm, MPI_STATUS_IGNORE);
    else MPI_Send(NULL, 0, MPI_BYTE, from, 3, comm);
}

#define MT_THREADS 4

/* One thread's ping-pong for latency_mt. */
struct mt_arg {
    MPI_Comm comm;
    long size, iters;
    double secs;
};

static void *mt_pingpong(void *p) {
    struct mt_arg *a = p;
    char *buf = need(malloc(a->size ? a->size : 1));
    memset(buf, 0, a->size ? a->size : 1);
    int peer = 1 - rank;
    double t0 = 0;
    /* The first tenth warms up. */
    for (long i = -(a->iters / 10 + 1); i < a->iters; i++) {
        if (i == 0) t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, a->size, MPI_BYTE, peer, 1, a->comm);
            MPI_Recv(buf, a->size, MPI_BYTE, peer, 1, a->comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, a->size, MPI_BYTE, peer, 1, a->comm, MPI_STATUS_IGNORE);
            MPI_Send(buf, a->size, MPI_BYTE, peer, 1, a->comm);
        }
    }
    a->secs = MPI_Wtime() - t0;
    free(buf);
    return NULL;
}

/* latency_mt: ranks 0 and 1, MT_THREADS threads each. */
static void latency_mt(long s, MPI_Comm pair) {
    long iters = clamp(VOLUME / 8 / (s ? s : 1), 20, 5000);
    struct mt_arg args[MT_THREADS];
    pthread_t th[MT_THREADS];
    for (int t = 0; t < MT_THREADS; t++) {
        MPI_Comm_dup(pair, &args[t].comm);
        args[t].size = s;
        args[t].iters = iters;
    }
    for (int t = 0; t < MT_THREADS; t++) pthread_create(&th[t], NULL, mt_pingpong, &args[t]);
    double total = 0;
    for (int t = 0; t < MT_THREADS; t++) {
        pthread_join(th[t], NULL);
        total += args[t].secs;
        MPI_Comm_free(&args[t].comm);
    }
    report("latency_mt", s, total / MT_THREADS * 1e6 / (2.0 * iters));
}

/* Ranks 0 and 1 only (the others wait at the next barrier): latency,
 * sendrecv, bw, msgrate, bibw. */
static void point_to_point(char *buf, char **window, long s, MPI_Comm pair) {
    MPI_Request reqs[2 * WINDOW];
    int peer = 1 - rank;
    double t0;
    if (wanted("latency")) {
        long iters = clamp(VOLUME / 8 / (s ? s : 1), 20, 20000), warm = iters / 10 + 1;
        for (int phase = 0; phase < 2; phase++) {
            /* Phase 0 calibrates the count (with a budget) and warms up. */
            long n = phase ? iters : warm;
            t0 = MPI_Wtime();
            for (long i = 0; i < n; i++) {
                if (rank == 0) {
                    MPI_Send(buf, s, MPI_BYTE, peer, 1, pair);
                    MPI_Recv(buf, s, MPI_BYTE, peer, 1, pair, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, s, MPI_BYTE, peer, 1, pair, MPI_STATUS_IGNORE);
                    MPI_Send(buf, s, MPI_BYTE, peer, 1, pair);
                }
            }
            if (!phase) iters = repetitions(iters, (MPI_Wtime() - t0) / n, pair);
        }
        report("latency", s, (MPI_Wtime() - t0) * 1e6 / (2.0 * iters));
    }
    if (wanted("sendrecv")) {
        long iters = clamp(VOLUME / 8 / (s ? s : 1), 20, 20000), warm = iters / 10 + 1;
        char *in = window[WINDOW];
        for (int phase = 0; phase < 2; phase++) {
            long n = phase ? iters : warm;
            t0 = MPI_Wtime();
            for (long i = 0; i < n; i++)
                MPI_Sendrecv(buf, s, MPI_BYTE, peer, 2, in, s, MPI_BYTE, peer, 2, pair, MPI_STATUS_IGNORE);
            if (!phase) iters = repetitions(iters, (MPI_Wtime() - t0) / n, pair);
        }
        report("sendrecv", s, (MPI_Wtime() - t0) * 1e6 / iters);
    }
    long reps = clamp(VOLUME / (WINDOW * (s ? s : 1)), 1, 2000);
    if (wanted("bw") || wanted("msgrate")) {
        t0 = MPI_Wtime();
        window_once(window, s, rank, 0, 1, pair);
        long n = repetitions(reps, MPI_Wtime() - t0, pair);
        t0 = MPI_Wtime();
        for (long r = 0; r < n; r++) window_once(window, s, rank, 0, 1, pair);
        double secs = MPI_Wtime() - t0;
        if (wanted("bw") && s) report("bw", s, (double)s * WINDOW * n / secs / 1e6);
        if (wanted("msgrate")) report("msgrate", s, (double)WINDOW * n / secs);
    }
    if (wanted("bibw") && s) {
        long n = reps;
        for (int phase = 0; phase < 2; phase++) {
            long k = phase ? n : 1;
            t0 = MPI_Wtime();
            for (long r = 0; r < k; r++) {
                /* Both directions: receive into the second half of the slots. */
                for (int w = 0; w < WINDOW; w++) {
                    MPI_Irecv(window[WINDOW + w], s, MPI_BYTE, peer, 4, pair, &reqs[w]);
                    MPI_Isend(window[w], s, MPI_BYTE, peer, 4, pair, &reqs[WINDOW + w]);
                }
                MPI_Waitall(2 * WINDOW, reqs, MPI_STATUSES_IGNORE);
            }
            if (!phase) n = repetitions(reps, MPI_Wtime() - t0, pair);
        }
        report("bibw", s, 2.0 * s * WINDOW * n / (MPI_Wtime() - t0) / 1e6);
    }
}

static const char *const RMA_TESTS[] = {"put_latency", "get_latency", "put_bw", "get_bw",
                                        "acc_latency", "get_acc_latency", "fop_latency",
                                        "cas_latency", NULL};

/* One-sided, ranks 0 and 1 only (rank 1 is the passive target, waiting
 * in a barrier meanwhile): put/get latency and bandwidth on `win`, whose
 * memory at rank 1 holds WINDOW messages of the largest size. */
static void one_sided(char *buf, long s, MPI_Win win, MPI_Comm pair) {
    const char *const *KINDS = RMA_TESTS;
    /* Where fetched values land (get_acc, fop, cas), apart from `buf`. */
    static char *result;
    if (!result) result = need(calloc(1, s > 8 ? s : 8));
    else result = need(realloc(result, s > 8 ? s : 8));
    for (int k = 0; k < 8; k++) {
        if (!wanted(KINDS[k]) || (k >= 2 && !s)) continue;
        if ((k == 4 || k == 5) && s < 8) continue;
        /* One 8-byte integer, once: at the first size of 8 B or more. */
        if (k >= 6 && !(s >= 8 && s < 32)) continue;
        int get = k % 2, many = k == 2 || k == 3 ? WINDOW : 1, dbl = (int)(s / 8);
        long iters = clamp(VOLUME / 8 / ((s ? s : 1) * many), 20, 20000), warm = iters / 10 + 1;
        double t0 = 0;
        for (int phase = 0; phase < 2; phase++) {
            long n = phase ? iters : warm;
            if (rank == 0) {
                t0 = MPI_Wtime();
                for (long i = 0; i < n; i++) {
                    MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
                    for (int m = 0; m < many; m++) {
                        if (k == 4)
                            MPI_Accumulate(buf, dbl, MPI_DOUBLE, 1, 0, dbl, MPI_DOUBLE, MPI_SUM, win);
                        else if (k == 5)
                            MPI_Get_accumulate(buf, dbl, MPI_DOUBLE, result, dbl, MPI_DOUBLE, 1, 0,
                                               dbl, MPI_DOUBLE, MPI_SUM, win);
                        else if (k == 6)
                            MPI_Fetch_and_op(buf, result, MPI_INT64_T, 1, 0, MPI_SUM, win);
                        else if (k == 7)
                            MPI_Compare_and_swap(buf, buf + 8, result, MPI_INT64_T, 1, 0, win);
                        else if (get) MPI_Get(buf + m * s, s, MPI_BYTE, 1, m * s, s, MPI_BYTE, win);
                        else MPI_Put(buf + m * s, s, MPI_BYTE, 1, m * s, s, MPI_BYTE, win);
                    }
                    MPI_Win_unlock(1, win);
                }
            }
            double secs = rank == 0 ? (MPI_Wtime() - t0) / n : 0;
            MPI_Barrier(pair);
            if (!phase) iters = repetitions(iters, secs, pair);
            else if (k == 2 || k == 3) report(KINDS[k], s, (double)s * many / secs / 1e6);
            else report(KINDS[k], k >= 6 ? 8 : s, secs * 1e6);
        }
    }
}

/* Every rank in a pair (r, r + n/2), all pairs at once: messages per
 * second over all pairs (an odd last rank sits out). */
static void multi_pair(char **window, long s) {
    int half = nranks / 2;
    int in_pair = rank < 2 * half;
    int from = rank < half ? rank : rank - half, to = from + half;
    long reps = clamp(VOLUME / (WINDOW * (s ? s : 1) * (half ? half : 1)), 1, 2000);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (in_pair) window_once(window, s, rank, from, to, MPI_COMM_WORLD);
    long n = repetitions(reps, MPI_Wtime() - t0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (in_pair)
        for (long r = 0; r < n; r++) window_once(window, s, rank, from, to, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    report("mrate", s, (double)WINDOW * n * half / (MPI_Wtime() - t0));
}

static const char *COLLECTIVES[] = {
    "barrier", "bcast", "reduce", "allreduce", "gather", "gatherv", "scatter", "scatterv",
    "allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw", "reduce_scatter",
    "reduce_scatter_block", "scan"};
#define NCOLL ((int)(sizeof COLLECTIVES / sizeof *COLLECTIVES))

/* The arguments every collective call takes from. */
struct coll_bufs {
    char *send, *recv;
    int *counts, *displs;
    MPI_Datatype *types;
};

/* One call of collective `t` with `s` bytes per rank; `i` varies the root.
 * With `req`, its nonblocking twin, waited for at once. */
static void collective(int t, long s, long i, const struct coll_bufs *b, MPI_Request *req) {
    int dbl = (int)(s / 8), root = (int)(i % nranks), n = (int)s;
    char *send = b->send, *recv = b->recv;
    int *counts = b->counts, *displs = b->displs;
    MPI_Datatype *types = b->types;
    MPI_Comm w = MPI_COMM_WORLD;
    /* Each rank keeps `s` bytes of the sum of everyone's n·s bytes. */
    int per[64];
    for (int r = 0; r < nranks && r < 64; r++) per[r] = dbl;
    switch (t) {
    case 0: req ? MPI_Ibarrier(w, req) : MPI_Barrier(w); break;
    case 1: req ? MPI_Ibcast(send, n, MPI_BYTE, root, w, req) : MPI_Bcast(send, n, MPI_BYTE, root, w); break;
    case 2:
        req ? MPI_Ireduce(send, recv, dbl, MPI_DOUBLE, MPI_SUM, root, w, req)
            : MPI_Reduce(send, recv, dbl, MPI_DOUBLE, MPI_SUM, root, w);
        break;
    case 3:
        req ? MPI_Iallreduce(send, recv, dbl, MPI_DOUBLE, MPI_SUM, w, req)
            : MPI_Allreduce(send, recv, dbl, MPI_DOUBLE, MPI_SUM, w);
        break;
    case 4:
        req ? MPI_Igather(send, n, MPI_BYTE, recv, n, MPI_BYTE, root, w, req)
            : MPI_Gather(send, n, MPI_BYTE, recv, n, MPI_BYTE, root, w);
        break;
    case 5:
        req ? MPI_Igatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, root, w, req)
            : MPI_Gatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, root, w);
        break;
    case 6:
        req ? MPI_Iscatter(send, n, MPI_BYTE, recv, n, MPI_BYTE, root, w, req)
            : MPI_Scatter(send, n, MPI_BYTE, recv, n, MPI_BYTE, root, w);
        break;
    case 7:
        req ? MPI_Iscatterv(send, counts, displs, MPI_BYTE, recv, n, MPI_BYTE, root, w, req)
            : MPI_Scatterv(send, counts, displs, MPI_BYTE, recv, n, MPI_BYTE, root, w);
        break;
    case 8:
        req ? MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, w, req)
            : MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, w);
        break;
    case 9:
        req ? MPI_Iallgatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, w, req)
            : MPI_Allgatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, w);
        break;
    case 10:
        req ? MPI_Ialltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, w, req)
            : MPI_Alltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, w);
        break;
    case 11:
        req ? MPI_Ialltoallv(send, counts, displs, MPI_BYTE, recv, counts, displs, MPI_BYTE, w, req)
            : MPI_Alltoallv(send, counts, displs, MPI_BYTE, recv, counts, displs, MPI_BYTE, w);
        break;
    case 12:
        req ? MPI_Ialltoallw(send, counts, displs, types, recv, counts, displs, types, w, req)
            : MPI_Alltoallw(send, counts, displs, types, recv, counts, displs, types, w);
        break;
    case 13:
        req ? MPI_Ireduce_scatter(send, recv, per, MPI_DOUBLE, MPI_SUM, w, req)
            : MPI_Reduce_scatter(send, recv, per, MPI_DOUBLE, MPI_SUM, w);
        break;
    case 14:
        req ? MPI_Ireduce_scatter_block(send, recv, dbl, MPI_DOUBLE, MPI_SUM, w, req)
            : MPI_Reduce_scatter_block(send, recv, dbl, MPI_DOUBLE, MPI_SUM, w);
        break;
    default:
        req ? MPI_Iscan(send, recv, dbl, MPI_DOUBLE, MPI_SUM, w, req)
            : MPI_Scan(send, recv, dbl, MPI_DOUBLE, MPI_SUM, w);
    }
    if (req) MPI_Wait(req, MPI_STATUS_IGNORE);
}

/* Is collective `t` (or, with `nonblocking`, its twin "i" + name) asked for? */
static int wanted_collective(int t, int nonblocking) {
    char test[32];
    snprintf(test, sizeof test, "%s%s", nonblocking ? "i" : "", COLLECTIVES[t]);
    return wanted(test);
}

static void collectives(long s, long max) {
    static struct coll_bufs b;
    if (!b.send) {
        long cap = max * nranks;
        b.send = need(malloc(cap ? cap : 1));
        b.recv = need(malloc(cap ? cap : 1));
        b.counts = need(malloc(nranks * sizeof(int)));
        b.displs = need(malloc(nranks * sizeof(int)));
        b.types = need(malloc(nranks * sizeof(MPI_Datatype)));
        memset(b.send, 1, cap);
        memset(b.recv, 0, cap);
    }
    for (int r = 0; r < nranks; r++) {
        b.counts[r] = (int)s;
        b.displs[r] = (int)(r * s);
        b.types[r] = MPI_BYTE;
    }
    long by_volume = clamp(VOLUME / 16 / ((s ? s : 1) * nranks), 10, 5000);
    for (int k = 0; k < 2 * NCOLL; k++) {
        int t = k % NCOLL, nonblocking = k >= NCOLL;
        if (!wanted_collective(t, nonblocking)) continue;
        MPI_Request request, *req = nonblocking ? &request : NULL;
        /* The barrier moves nothing: once, at 0 B. Reductions move whole
         * doubles: from 8 bytes on. reduce_scatter takes counts for at
         * most 64 ranks. */
        int reduction = t == 2 || t == 3 || t >= 13;
        if (t == 0 ? s != 0 : s == 0) continue;
        if (reduction && s < 8) continue;
        if (t == 13 && nranks > 64) continue;
        /* Warm up (first calls fault in the buffers an MPI keeps between
         * calls, as OSU's skipped iterations do): a rooted collective once
         * with every rank as the root, the others once; then time one
         * call to calibrate the count. */
        int rooted = t == 1 || t == 2 || (t >= 4 && t <= 7);
        for (int w = 0; w < (rooted ? nranks : 1); w++) collective(t, s, w, &b, req);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        collective(t, s, 0, &b, req);
        long iters = repetitions(by_volume, MPI_Wtime() - t0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) collective(t, s, i + 1, &b, req);
        double us = (MPI_Wtime() - t0) * 1e6 / iters, worst;
        MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        char test[32];
        snprintf(test, sizeof test, "%s%s", nonblocking ? "i" : "", COLLECTIVES[t]);
        report(test, s, worst);
    }
}

int main(int argc, char **argv) {
    long min = 1, max = 4L << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = atol(argv[++i]);
        else if (!strcmp(argv[i], "--min") && i + 1 < argc) min = atol(argv[++i]);
        else if (!strcmp(argv[i], "--budget-ms") && i + 1 < argc) budget_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--tests") && i + 1 < argc) tests = argv[++i];
        else if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
        else {
            fprintf(stderr, "mpi_bench: unknown option %s (--json, --tests LIST, --min BYTES, --max BYTES, --budget-ms MS, --name NAME)\n", argv[i]);
            return 2;
        }
    }
    if (max < 1 || min < 0 || min > max) {
        fprintf(stderr, "mpi_bench: --max wants a positive number of bytes, --min one from 0 to --max\n");
        return 2;
    }
    if (wanted("latency_mt")) {
        int provided = MPI_THREAD_SINGLE;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "mpi_bench: latency_mt needs MPI_THREAD_MULTIPLE\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) { fprintf(stderr, "mpi_bench needs 2 ranks or more\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    /* Ranks 0 and 1 on a communicator of their own, for the pair tests. */
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    char *buf = need(malloc(max));
    char *window[2 * WINDOW];
    memset(buf, 0, max);
    for (int w = 0; w < 2 * WINDOW; w++) { window[w] = need(malloc(max)); memset(window[w], 1, max); }
    int p2p = wanted("latency") || wanted("sendrecv") || wanted("bw") || wanted("msgrate") || wanted("bibw");
    int rma = 0;
    for (const char *const *k = RMA_TESTS; *k; k++) rma |= wanted(*k);
    /* The one-sided tests' window: WINDOW messages of the largest size at
     * rank 1 (rank 0's buffer holds as many). */
    MPI_Win win = MPI_WIN_NULL;
    char *rma_buf = NULL, *rma_mem = NULL;
    if (rma && rank < 2) {
        rma_buf = need(calloc(WINDOW, max));
        MPI_Win_allocate(rank == 1 ? WINDOW * max : 0, 1, MPI_INFO_NULL, pair, &rma_mem, &win);
    }
    /* 0 B first when asked for, then powers of 4. */
    for (long s = min; s <= max; s = s ? s * 4 : 1) {
        if (p2p) {
            if (rank < 2) point_to_point(buf, window, s, pair);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        if (wanted("latency_mt")) {
            if (rank < 2) latency_mt(s, pair);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        if (wanted("mrate")) multi_pair(window, s);
        if (rma) {
            if (rank < 2) one_sided(rma_buf, s, win, pair);
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    if (win != MPI_WIN_NULL) MPI_Win_free(&win);
    free(rma_buf);
    for (long s = min; s <= max; s = s ? s * 4 : 1) {
        collectives(s, max);
    }
    for (int w = 0; w < 2 * WINDOW; w++) free(window[w]);
    free(buf);
    if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
    MPI_Finalize();
    return 0;
}
