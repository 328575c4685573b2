/* Ping-pong with the same method as examples/pingpong.rs, for reference
 * MPI implementations (Open MPI, MPICH). Build: mpicc -O2 pingpong.c.
 * Latency: half the mean round trip of blocking send/recv of the same size.
 * Bandwidth: a window of 64 nonblocking sends (one buffer per slot, as the
 * Rust version), then an empty acknowledgement; bytes per window / time. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

static long latency_iters(long size) {
    if (size <= 4096) return 20000;
    long n = 200000000L / size;
    return n < 50 ? 50 : (n > 20000 ? 20000 : n);
}

static long bandwidth_reps(long size) {
    long n = 512L * 1024 * 1024 / (WINDOW * (size > 0 ? size : 1));
    return n < 5 ? 5 : (n > 200 ? 200 : n);
}

int main(int argc, char **argv) {
    int rank, size, json = 0;
    long max = 4L << 20;
    const char *name = "mpi";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = atol(argv[++i]);
        else if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) { fprintf(stderr, "pingpong needs 2 ranks\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    if (rank >= 2) {
        MPI_Recv(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Finalize();
        return 0;
    }
    int peer = 1 - rank;
    char *buf = malloc(max > 0 ? max : 1);
    char *window[WINDOW];
    for (int w = 0; w < WINDOW; w++) { window[w] = malloc(max > 0 ? max : 1); memset(window[w], 1, max); }
    memset(buf, 0, max);
    MPI_Request reqs[WINDOW];
    MPI_Status stats[WINDOW];
    for (long s = 0; s <= max; s = s ? s * 2 : 1) {
        long iters = latency_iters(s), warm = iters / 10 + 1;
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
        double lat_us = (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
        long reps = bandwidth_reps(s);
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
        double mbs = (double)s * WINDOW * reps / secs / 1e6;
        if (rank == 0) {
            if (json) printf("{\"impl\":\"%s\",\"bytes\":%ld,\"latency_us\":%.4f,\"bandwidth_mbs\":%.1f}\n", name, s, lat_us, mbs);
            else printf("%10ld %14.3f %16.1f\n", s, lat_us, mbs);
            fflush(stdout);
        }
    }
    if (rank == 0)
        for (int r = 2; r < size; r++) MPI_Send(NULL, 0, MPI_BYTE, r, 99, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
