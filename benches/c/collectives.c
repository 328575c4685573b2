/* Collective benchmark with the same method as examples/collbench.rs:
 * time per call of allreduce (8 B, 1 MiB of doubles, sum) and bcast (1 MiB),
 * averaged over many calls, slowest rank reported. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iters(long bytes) { return bytes <= 1024 ? 20000 : 200; }

static double slowest(double mine) {
    double out;
    MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

int main(int argc, char **argv) {
    const char *name = "mpi";
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long sizes[2] = {8, 1 << 20};
    double us[3];
    for (int s = 0; s < 2; s++) {
        long count = sizes[s] / 8;
        double *send = malloc(sizes[s]), *recv = malloc(sizes[s]);
        for (long i = 0; i < count; i++) send[i] = 1.0;
        int it = iters(sizes[s]);
        for (int i = 0; i < it / 10 + 1; i++) MPI_Allreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < it; i++) MPI_Allreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        us[s] = slowest((MPI_Wtime() - t0) * 1e6 / it);
        free(send);
        free(recv);
    }
    char *buf = calloc(1, 1 << 20);
    int it = iters(1 << 20);
    for (int i = 0; i < it / 10 + 1; i++) MPI_Bcast(buf, 1 << 20, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < it; i++) MPI_Bcast(buf, 1 << 20, MPI_BYTE, 0, MPI_COMM_WORLD);
    us[2] = slowest((MPI_Wtime() - t0) * 1e6 / it);
    if (rank == 0) {
        printf("{\"impl\":\"%s\",\"ranks\":%d,\"op\":\"allreduce\",\"bytes\":8,\"us\":%.3f}\n", name, n, us[0]);
        printf("{\"impl\":\"%s\",\"ranks\":%d,\"op\":\"allreduce\",\"bytes\":1048576,\"us\":%.3f}\n", name, n, us[1]);
        printf("{\"impl\":\"%s\",\"ranks\":%d,\"op\":\"bcast\",\"bytes\":1048576,\"us\":%.3f}\n", name, n, us[2]);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
