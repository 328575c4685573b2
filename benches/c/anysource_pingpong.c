/* ANY_SOURCE ping-pong (seed 002's modified NetPIPE) with the same method
 * as examples/anysource_pingpong.rs: every receive is MPI_Irecv with
 * MPI_ANY_SOURCE completed by MPI_Waitany. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *name = "mpi";
    long max = 1 << 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
        else if (!strcmp(argv[i], "--max") && i + 1 < argc) max = atol(argv[++i]);
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int peer = 1 - rank;
    char *buf = calloc(1, max > 0 ? max : 1);
    for (long s = 0;; s = s ? s * 4 : 1) {
        long iters = s <= 4096 ? 10000 : 100000000L / s;
        if (iters < 50) iters = 50;
        if (iters > 10000) iters = 10000;
        long warm = iters / 10 + 1;
        double t0 = MPI_Wtime();
        for (long i = 0; i < warm + iters; i++) {
            MPI_Request req;
            int idx;
            if (i == warm) t0 = MPI_Wtime();
            if (rank == 0) MPI_Send(buf, s, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Irecv(buf, s, MPI_BYTE, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &req);
            MPI_Waitany(1, &req, &idx, MPI_STATUS_IGNORE);
            if (rank == 1) MPI_Send(buf, s, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
        double us = (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
        if (rank == 0) printf("{\"impl\":\"%s\",\"bytes\":%ld,\"latency_us\":%.4f}\n", name, s, us);
        if (s >= max) break;
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
