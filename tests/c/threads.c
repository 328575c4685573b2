/* MPI_THREAD_SERIALIZED: two threads per rank take turns (a mutex) to
   make MPI calls, each running its own ring of nonblocking exchanges and
   polling them with MPI_Testall. Rank 0 prints a checksum. */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static int rank, size;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long total[2];

static void *worker(void *arg) {
    int id = (int)(long)arg;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int main_thread = -1;
    MPI_Is_thread_main(&main_thread);
    if (main_thread != 0) printf("FAIL Is_thread_main in a worker: %d\n", main_thread);
    for (int i = 0; i < 200; i++) {
        long out = rank * 1000 + i, in = -1;
        MPI_Request rq[2];
        pthread_mutex_lock(&mu);
        MPI_Irecv(&in, 1, MPI_LONG, left, id, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(&out, 1, MPI_LONG, right, id, MPI_COMM_WORLD, &rq[1]);
        pthread_mutex_unlock(&mu);
        int done = 0;
        while (!done) {
            pthread_mutex_lock(&mu);
            MPI_Testall(2, rq, &done, MPI_STATUSES_IGNORE);
            pthread_mutex_unlock(&mu);
            if (!done) sched_yield();
        }
        total[id] += in;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1, queried = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Query_thread(&queried);
    if (provided != MPI_THREAD_SERIALIZED || queried != provided) {
        printf("FAIL thread level %d %d\n", provided, queried);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pthread_t t[2];
    for (long id = 0; id < 2; id++) pthread_create(&t[id], NULL, worker, (void *)id);
    for (int id = 0; id < 2; id++) pthread_join(t[id], NULL);
    long mine = total[0] + total[1], sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("threads checksum %ld\n", sum);
    MPI_Finalize();
    return 0;
}
