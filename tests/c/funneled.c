/* MPI_THREAD_FUNNELED: the main thread makes every communication call
   (a ring of blocking and nonblocking exchanges) while a second thread
   asks MPI_Initialized, MPI_Finalized and MPI_Query_thread, which the
   standard lets any thread call at any time. Rank 0 prints a checksum. */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int stop;
static long asked, wrong;
static int provided = -1;

static void *watcher(void *arg) {
    (void)arg;
    while (!atomic_load(&stop) || asked == 0) {
        int init = 0, fin = 1, level = -1;
        MPI_Initialized(&init);
        MPI_Finalized(&fin);
        MPI_Query_thread(&level);
        if (init != 1 || fin != 0 || level != provided) wrong++;
        asked++;
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (provided < MPI_THREAD_FUNNELED) {
        printf("FAIL thread level %d\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pthread_t t;
    pthread_create(&t, NULL, watcher, NULL);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long sum = 0;
    for (int i = 0; i < 2000; i++) {
        long out = rank * 1000 + i, in = -1, in2 = -1;
        MPI_Request rq[2];
        MPI_Irecv(&in, 1, MPI_LONG, left, 1, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&out, 1, MPI_LONG, right, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        if (rank % 2 == 0) {
            MPI_Send(&out, 1, MPI_LONG, right, 2, MPI_COMM_WORLD);
            MPI_Recv(&in2, 1, MPI_LONG, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&in2, 1, MPI_LONG, left, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&out, 1, MPI_LONG, right, 2, MPI_COMM_WORLD);
        }
        sum += in + in2;
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    if (wrong != 0) {
        printf("FAIL %ld of %ld answers wrong\n", wrong, asked);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long total = 0;
    MPI_Allreduce(&sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("funneled checksum %ld\n", total);
    MPI_Finalize();
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init != 1 || fin != 1) printf("FAIL after MPI_Finalize: initialized %d finalized %d\n", init, fin);
    return 0;
}
