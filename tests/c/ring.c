/* A plain MPI C program: a token around the ring, ANY_SOURCE receives
   at rank 0, and an allreduce. Built with mpicc.mpich, it runs unchanged
   on vpml's MPICH-ABI library. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, rounds = 200;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long token = 0, sum = 0;
    for (int r = 0; r < rounds; r++) {
        if (rank == 0) {
            token = r;
            MPI_Send(&token, 1, MPI_LONG, 1 % size, r, MPI_COMM_WORLD);
            MPI_Status st;
            MPI_Recv(&token, 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            int n;
            MPI_Get_count(&st, MPI_LONG, &n);
            if (st.MPI_SOURCE != size - 1 || st.MPI_TAG != r || n != 1) {
                printf("bad status: source %d tag %d count %d\n", st.MPI_SOURCE, st.MPI_TAG, n);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            sum += token;
        } else {
            MPI_Recv(&token, 1, MPI_LONG, rank - 1, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token = token * 3 + rank;
            MPI_Send(&token, 1, MPI_LONG, (rank + 1) % size, r, MPI_COMM_WORLD);
        }
        double x = rank + r * 0.5, total;
        MPI_Allreduce(&x, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) sum += (long)total;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("ring checksum %ld\n", sum);
    MPI_Finalize();
    return 0;
}
