/* MPI_THREAD_MULTIPLE with one communicator per thread, and every
   non-deterministic outcome feeding later sends: what a restarted rank
   must re-execute exactly although its threads interleave differently.

   The main thread duplicates MPI_COMM_WORLD once per thread, then the
   threads run at once, each on its own communicator. In each iteration a
   thread posts one ANY_SOURCE receive per other rank, sends every other
   rank a message whose length and contents are drawn from its running
   hash, polls MPI_Iprobe (ANY_SOURCE) until a message is there, counting
   the failures, and completes its receives with MPI_Waitany and
   MPI_Testsome. It folds into its hash the failed probes, the sources,
   and the order in which requests completed: if a restarted rank
   re-executed one outcome differently, what it says it sent would differ
   from what its peers received.

   At the end, for each thread's communicator, every rank tells every
   other (Alltoall) the sum of the hashes of what it sent it; each
   compares that with what it received. Rank 0 prints one line that is
   the same in every correct run: "threadcomms ok N iterations, T
   threads on P ranks, sent = received". A mismatch prints what differs
   and exits with status 1.

   Usage: threadcomms [ITERATIONS] (default 10). */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 3
#define MAXR 16
#define MAX_WORDS 64

static int rank, size, iterations = 10;

struct thread_state {
    int id;
    MPI_Comm comm;
    uint64_t h;
    uint64_t sent[MAXR]; /* sum of the hashes of the messages sent to each rank */
    uint64_t recv[MAXR]; /* ... and received from each rank */
};

static struct thread_state threads[THREADS];

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash_words(const uint64_t *w, int n) {
    uint64_t h = (uint64_t)n;
    for (int i = 0; i < n; i++) h = mix(h ^ w[i]);
    return h;
}

static void *run(void *arg) {
    struct thread_state *t = arg;
    uint64_t in[MAXR][MAX_WORDS], out[MAXR][MAX_WORDS];
    MPI_Request rq[MAXR], sq[MAXR];
    for (int it = 0; it < iterations; it++) {
        int k = 0;
        for (int r = 0; r < size; r++) {
            if (r == rank) continue;
            int words = 1 + (int)(mix(t->h ^ (uint64_t)r) % (MAX_WORDS - 1));
            for (int w = 0; w < words; w++) out[k][w] = mix(t->h + (uint64_t)w * 7 + (uint64_t)r);
            t->sent[r] += hash_words(out[k], words);
            MPI_Isend(out[k], words, MPI_UINT64_T, r, it, t->comm, &sq[k]);
            k++;
        }
        /* How long until this iteration's first message is there (every
           other rank sends one, and no receive is posted yet): logged as a
           run of failures, then the probe that found it. */
        int flag = 0;
        uint64_t failed = 0;
        MPI_Status probed;
        while (!flag) {
            MPI_Iprobe(MPI_ANY_SOURCE, it, t->comm, &flag, &probed);
            if (!flag) {
                failed++;
                sched_yield();
            }
        }
        t->h = mix(t->h ^ failed ^ ((uint64_t)probed.MPI_SOURCE << 32));
        int n = 0;
        for (int r = 0; r < size; r++) {
            if (r == rank) continue;
            MPI_Irecv(in[n], MAX_WORDS, MPI_UINT64_T, MPI_ANY_SOURCE, it, t->comm, &rq[n]);
            n++;
        }
        /* Complete the receives in whatever order they come. */
        int left = n, first = 1;
        while (left > 0) {
            int idx[MAXR], got = 0;
            MPI_Status sts[MAXR];
            if (first) {
                MPI_Waitany(n, rq, &idx[0], &sts[0]);
                got = 1;
                first = 0;
            } else {
                MPI_Testsome(n, rq, &got, idx, sts);
                if (got == 0) {
                    t->h = mix(t->h ^ 0x5151);
                    sched_yield();
                    continue;
                }
            }
            for (int g = 0; g < got; g++) {
                int words = 0;
                MPI_Get_count(&sts[g], MPI_UINT64_T, &words);
                int src = sts[g].MPI_SOURCE;
                t->recv[src] += hash_words(in[idx[g]], words);
                t->h = mix(t->h ^ ((uint64_t)src << 8) ^ (uint64_t)idx[g]);
                left--;
            }
        }
        MPI_Waitall(k, sq, MPI_STATUSES_IGNORE);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        printf("FAIL thread level %d\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) iterations = atoi(argv[1]);
    if (size > MAXR || iterations < 1) {
        printf("FAIL at most %d ranks, at least one iteration\n", MAXR);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < THREADS; i++) {
        threads[i].id = i;
        threads[i].h = mix((uint64_t)rank * 131 + (uint64_t)i);
        MPI_Comm_dup(MPI_COMM_WORLD, &threads[i].comm);
    }
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, run, &threads[i]);
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        uint64_t told[MAXR];
        MPI_Alltoall(threads[i].sent, 1, MPI_UINT64_T, told, 1, MPI_UINT64_T, threads[i].comm);
        for (int r = 0; r < size; r++) {
            if (r != rank && told[r] != threads[i].recv[r]) {
                fprintf(stderr, "rank %d thread %d: rank %d says it sent %llx, %llx arrived\n", rank,
                        i, r, (unsigned long long)told[r], (unsigned long long)threads[i].recv[r]);
                bad = 1;
            }
        }
        MPI_Comm_free(&threads[i].comm);
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        printf("threadcomms ok %d iterations, %d threads on %d ranks, sent = received\n",
               iterations, THREADS, size);
    MPI_Finalize();
    return any ? 1 : 0;
}
