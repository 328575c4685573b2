/* What message logging costs a program that never checkpoints: the usual
 * OSU-style measurements of an unmodified MPI program, to run with and
 * without a protocol side by side (the bench suite's `nocheckpoint` part).
 * Build: mpicc -O2 logging_cost.c. Every test moves a bounded volume per
 * size (so that a log that only grows stays within memory), at sizes
 * 1 B, 4 B, 16 B, ... 4 MiB (powers of 4).
 *
 *   latency   half the mean round trip of blocking send/recv (us)
 *   bw        a window of 64 nonblocking sends, then an empty ack (MB/s)
 *   bibw      both ranks send a window at once (MB/s, both directions)
 *   msgrate   the bw window, counted in messages per second
 *   allreduce, bcast, allgather, allgatherv, alltoall, alltoallv
 *             mean time of one collective over every rank (us); `bytes`
 *             is the size of each rank's contribution (allreduce from
 *             8 B on: it reduces doubles)
 *
 * Output: one line per test and size, or JSON with --json:
 *   {"impl":"mpi","ranks":2,"test":"bw","bytes":1024,"value":123.4}
 * Options: --max BYTES (default 4 MiB), --name NAME, --json. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
/* Payload bytes each test moves per size (each direction for bibw). */
#define VOLUME (96L << 20)

static int rank, nranks, json;
static const char *name = "mpi";

/* A buffer, or the job ends saying why. */
static void *need(void *p) {
    if (!p) {
        fprintf(stderr, "logging_cost: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

static long clamp(long n, long lo, long hi) { return n < lo ? lo : (n > hi ? hi : n); }

static void report(const char *test, long bytes, double value) {
    if (rank != 0) return;
    if (json)
        printf("{\"impl\":\"%s\",\"ranks\":%d,\"test\":\"%s\",\"bytes\":%ld,\"value\":%.4f}\n",
               name, nranks, test, bytes, value);
    else
        printf("%-11s %9ld %14.4f\n", test, bytes, value);
    fflush(stdout);
}

/* Ranks 0 and 1 only; the others wait at the next barrier. */
static void point_to_point(char *buf, char **window, long max) {
    MPI_Request reqs[2 * WINDOW];
    MPI_Status stats[2 * WINDOW];
    int peer = 1 - rank;
    for (long s = 1; s <= max; s *= 4) {
        if (rank < 2) {
            long iters = clamp(VOLUME / 8 / s, 20, 20000), warm = iters / 10 + 1;
            double t0 = MPI_Wtime();
            for (long i = 0; i < warm + iters; i++) {
                if (i == warm) t0 = MPI_Wtime();
                if (rank == 0) {
                    MPI_Send(buf, s, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, s, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, s, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, s, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                }
            }
            report("latency", s, (MPI_Wtime() - t0) * 1e6 / (2.0 * iters));

            long reps = clamp(VOLUME / (WINDOW * s), 1, 2000);
            for (long r = 0; r < reps + 1; r++) {
                if (r == 1) t0 = MPI_Wtime();
                for (int w = 0; w < WINDOW; w++) {
                    if (rank == 0) MPI_Isend(window[w], s, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
                    else MPI_Irecv(window[w], s, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
                }
                MPI_Waitall(WINDOW, reqs, stats);
                if (rank == 0) MPI_Recv(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                else MPI_Send(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
            }
            double secs = MPI_Wtime() - t0;
            report("bw", s, (double)s * WINDOW * reps / secs / 1e6);
            report("msgrate", s, (double)WINDOW * reps / secs);

            /* Both directions: receive into the second half of the slots. */
            for (long r = 0; r < reps + 1; r++) {
                if (r == 1) t0 = MPI_Wtime();
                for (int w = 0; w < WINDOW; w++) {
                    MPI_Irecv(window[WINDOW + w], s, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &reqs[w]);
                    MPI_Isend(window[w], s, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &reqs[WINDOW + w]);
                }
                MPI_Waitall(2 * WINDOW, reqs, stats);
            }
            secs = MPI_Wtime() - t0;
            report("bibw", s, 2.0 * s * WINDOW * reps / secs / 1e6);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

static void collectives(long max) {
    long cap = max * nranks;
    char *send = need(malloc(cap)), *recv = need(malloc(cap));
    int *counts = need(malloc(nranks * sizeof(int))), *displs = need(malloc(nranks * sizeof(int)));
    memset(send, 1, cap);
    memset(recv, 0, cap);
    for (long s = 1; s <= max; s *= 4) {
        int dbl = (int)(s / 8);
        for (int r = 0; r < nranks; r++) { counts[r] = (int)s; displs[r] = (int)(r * s); }
        long iters = clamp(VOLUME / 16 / (s * nranks), 10, 5000);
        const char *tests[] = {"allreduce", "bcast", "allgather", "allgatherv", "alltoall", "alltoallv"};
        for (int t = 0; t < 6; t++) {
            /* An allreduce moves whole doubles: from 8 bytes on. */
            if (t == 0 && s < 8) continue;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (long i = 0; i < iters + 1; i++) {
                if (i == 1) t0 = MPI_Wtime();
                switch (t) {
                case 0: MPI_Allreduce(send, recv, dbl, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
                case 1: MPI_Bcast(send, (int)s, MPI_BYTE, i % nranks, MPI_COMM_WORLD); break;
                case 2: MPI_Allgather(send, (int)s, MPI_BYTE, recv, (int)s, MPI_BYTE, MPI_COMM_WORLD); break;
                case 3: MPI_Allgatherv(send, (int)s, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_COMM_WORLD); break;
                case 4: MPI_Alltoall(send, (int)s, MPI_BYTE, recv, (int)s, MPI_BYTE, MPI_COMM_WORLD); break;
                default:
                    MPI_Alltoallv(send, counts, displs, MPI_BYTE, recv, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
                }
            }
            double us = (MPI_Wtime() - t0) * 1e6 / iters, worst;
            MPI_Reduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            report(tests[t], s, worst);
        }
    }
    free(send); free(recv); free(counts); free(displs);
}

int main(int argc, char **argv) {
    long max = 4L << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = atol(argv[++i]);
        else if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
        else { fprintf(stderr, "logging_cost: unknown option %s (--json, --max BYTES, --name NAME)\n", argv[i]); return 2; }
    }
    if (max < 1) { fprintf(stderr, "logging_cost: --max wants a positive number of bytes\n"); return 2; }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) { fprintf(stderr, "logging_cost needs 2 ranks or more\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    char *buf = need(malloc(max));
    char *window[2 * WINDOW];
    memset(buf, 0, max);
    for (int w = 0; w < 2 * WINDOW; w++) { window[w] = need(malloc(max)); memset(window[w], 1, max); }
    point_to_point(buf, window, max);
    collectives(max);
    for (int w = 0; w < 2 * WINDOW; w++) free(window[w]);
    free(buf);
    MPI_Finalize();
    return 0;
}
