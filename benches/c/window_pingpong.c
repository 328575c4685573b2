/* A 0-byte ping-pong between ranks 0 and 1, with a one-sided window made
 * by MPI_Win_create alive (argument "win") or not: what a live window
 * costs every blocking call. vpml's C library serves such a window's
 * requests at each poll of every wait; Open MPI and MPICH pay nothing
 * for a window nobody uses. Build: mpicc -O2 window_pingpong.c.
 * Run: vpml run -n 2 ./a.out win [iterations]; mpirun -n 2 ./a.out win.
 * Prints half the mean round trip of the second of two rounds. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int cells[4] = {0};
    MPI_Win win = MPI_WIN_NULL;
    if (argc > 1 && !strcmp(argv[1], "win"))
        MPI_Win_create(cells, sizeof cells, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    long iters = argc > 2 ? atol(argv[2]) : 200000;
    char c = 0;
    for (int round = 0; round < 2; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (long i = 0; i < iters && rank < 2; i++) {
            if (rank == 0) {
                MPI_Send(&c, 0, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(&c, 0, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&c, 0, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&c, 0, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        t = MPI_Wtime() - t;
        if (rank == 0 && round == 1)
            printf("%s one-way %.3f us\n", win == MPI_WIN_NULL ? "no window" : "window alive",
                   t / iters / 2 * 1e6);
    }
    if (win != MPI_WIN_NULL) MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
