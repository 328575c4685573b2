/* A program that is not piecewise deterministic: rank 1's messages carry
   its process id, so a restarted rank 1 re-executes sends that differ
   from the ones rank 0 already received. vpml must stop the job with one
   line saying so (never finish with a different answer).

   Rank 1 sends 4000 messages to rank 0, which sums them; both print how
   far they are on stderr every 1000 messages. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long v = 0, sum = 0;
    for (int i = 0; i < 4000; i++) {
        if (rank == 1) {
            v = (long)getpid() * 1000003L + i;
            MPI_Send(&v, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Recv(&v, 1, MPI_LONG, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            sum += v;
        }
        if (i % 1000 == 999) fprintf(stderr, "rank %d at %d\n", rank, i + 1);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0) printf("diverge sum %ld\n", sum);
    MPI_Finalize();
    return 0;
}
