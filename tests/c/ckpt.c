/* An MPI C program that checkpoints with vpml_ext.h: a ring exchange and
   an allreduce per step, the state saved every 25 steps. A rank that is
   killed and restarted resumes from its last checkpoint (and says so on
   stderr) instead of starting over; the output is the same.

   `ckpt lines`: rank 2 also prints a line every 7 steps with plain
   printf — into a pipe, so C's stdio holds it in its buffer across
   checkpoints — and prints the checksum itself. */
#include <mpi.h>
#include <vpml_ext.h>
#include <stdio.h>

struct state {
    int step;
    long acc;
};

int main(int argc, char **argv) {
    int rank, size, steps = 2000;
    int lines = argc > 1 && argv[1][0] == 'l';
    int printer = lines ? 2 : 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct state st = {0, 0};
    size_t len = sizeof st;
    if (VPMLX_Restarted(&st, &len)) {
        if (len != sizeof st) MPI_Abort(MPI_COMM_WORLD, 3);
        fprintf(stderr, "rank %d resumed at step %d\n", rank, st.step);
    }
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (; st.step < steps; st.step++) {
        if (st.step % 25 == 0) VPMLX_Checkpoint(&st, sizeof st);
        long out = st.acc * 31 + rank + st.step, in = 0, sum = 0;
        MPI_Sendrecv(&out, 1, MPI_LONG, right, st.step, &in, 1, MPI_LONG, left, st.step,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&in, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        st.acc = (st.acc + sum % 1000003) % 1000000007;
        if (lines && rank == printer && st.step % 7 == 0) printf("step %d acc %ld\n", st.step, st.acc);
    }
    if (rank == printer) printf("ckpt checksum %ld\n", st.acc);
    MPI_Finalize();
    return 0;
}
