/* Every non-deterministic MPI call, with later sends depending on each
   outcome, and a conservation check at the end.

   Each rank folds every outcome it observes into a running hash `h`: the
   sources of ANY_SOURCE receives and probes, the indices Waitany,
   Waitsome, Testany and Testsome return and in which order, how many
   tests and iprobes failed before one succeeded, whether a cancel took
   effect. Every message it sends afterwards has a length and contents
   drawn from `h`, and whether some messages are sent at all depends on
   it. So if a restarted rank re-executed even one outcome differently,
   what it says it sent would differ from what its peers received.

   At the end every rank tells every other (Alltoall) the sum of the
   hashes of the messages it sent it; each compares that with what it
   received. Rank 0 prints one line that is the same in every correct run:
   "nondet: N iterations on P ranks, conservation ok". A mismatch prints
   what differs on stderr and exits with status 1.

   Usage: nondet [ITERATIONS [CHECKPOINT_EVERY]] (defaults 200, 0 = never);
   with vpml_ext.h the state is checkpointed every CHECKPOINT_EVERY
   iterations, at a point where no request is in flight. */
#include <mpi.h>
#include <vpml_ext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 64
#define BIG_WORDS 3000 /* 24000 bytes: above the eager limit */
#define MAX_WORDS BIG_WORDS

enum { T_ANY = 1, T_IPROBE, T_TEST, T_CANCEL, T_SCANCEL, T_SCANCEL_INFO, T_DONE };

struct state {
    int it;
    uint64_t h;
    uint64_t sent[MAXR]; /* sum of the hashes of the messages sent to each rank */
    uint64_t recv[MAXR]; /* ... and received from each rank */
    long cancel_sent;    /* T_CANCEL messages sent to the right neighbour */
    long cancel_recv;    /* ... and received from the left one */
};

static struct state st;
static int rank, size;
static uint64_t out[4][MAX_WORDS], in[4][MAX_WORDS];

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Fold an observed outcome into h. */
static void fold(uint64_t v) { st.h = mix(st.h ^ mix(v)); }

static uint64_t msg_hash(const uint64_t *m, int words) {
    uint64_t s = (uint64_t)words;
    for (int k = 0; k < words; k++) s = mix(s ^ m[k]);
    return s;
}

/* Fill buffer b with a message drawn from h (and the salt); returns its
   length in words: usually small, sometimes (unless `small`) above the
   eager limit. Messages a receiver may leave unreceived for a while are
   small, so that their blocking sends return. */
static int make_msg(uint64_t *b, uint64_t salt, int small) {
    uint64_t x = mix(st.h ^ salt);
    int words = (!small && x % 13 == 0) ? BIG_WORDS : 1 + (int)((x >> 8) % 40);
    for (int k = 0; k < words; k++) b[k] = mix(x + (uint64_t)k);
    return words;
}

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "nondet: rank %d: %s failed (%d)\n", rank, what, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void note_recv(int src, const uint64_t *m, const MPI_Status *s) {
    int bytes;
    check(MPI_Get_count(s, MPI_BYTE, &bytes), "MPI_Get_count");
    int words = bytes / 8;
    uint64_t hsh = msg_hash(m, words);
    st.recv[src] += hsh;
    fold(hsh ^ ((uint64_t)src << 32));
}

/* ANY_SOURCE: Probe + Recv, then Irecv completed by Waitany among sends. */
static void phase_any_source(void) {
    int r1 = (rank + 1) % size, r2 = (rank + 2) % size;
    MPI_Request rq[3];
    int w1 = make_msg(out[0], 1, 0), w2 = make_msg(out[1], 2, 0);
    check(MPI_Isend(out[0], w1, MPI_UINT64_T, r1, T_ANY, MPI_COMM_WORLD, &rq[1]), "MPI_Isend");
    check(MPI_Isend(out[1], w2, MPI_UINT64_T, r2, T_ANY, MPI_COMM_WORLD, &rq[2]), "MPI_Isend");
    st.sent[r1] += msg_hash(out[0], w1);
    st.sent[r2] += msg_hash(out[1], w2);

    MPI_Status s;
    check(MPI_Probe(MPI_ANY_SOURCE, T_ANY, MPI_COMM_WORLD, &s), "MPI_Probe");
    int src = s.MPI_SOURCE;
    fold((uint64_t)src);
    check(MPI_Recv(in[0], MAX_WORDS, MPI_UINT64_T, src, T_ANY, MPI_COMM_WORLD, &s), "MPI_Recv");
    note_recv(src, in[0], &s);

    check(MPI_Irecv(in[1], MAX_WORDS, MPI_UINT64_T, MPI_ANY_SOURCE, T_ANY, MPI_COMM_WORLD, &rq[0]),
          "MPI_Irecv");
    for (int left = 3; left > 0; left--) {
        int idx;
        check(MPI_Waitany(3, rq, &idx, &s), "MPI_Waitany");
        fold((uint64_t)idx + 100);
        if (idx == 0) note_recv(s.MPI_SOURCE, in[1], &s);
    }
}

/* How many Iprobes fail before one finds the message. */
static void phase_iprobe(void) {
    int right = (rank + 1) % size;
    MPI_Request rq;
    int w = make_msg(out[0], 3, 0);
    check(MPI_Isend(out[0], w, MPI_UINT64_T, right, T_IPROBE, MPI_COMM_WORLD, &rq), "MPI_Isend");
    st.sent[right] += msg_hash(out[0], w);
    int flag = 0;
    uint64_t failed = 0;
    MPI_Status s;
    while (!flag) {
        check(MPI_Iprobe(MPI_ANY_SOURCE, T_IPROBE, MPI_COMM_WORLD, &flag, &s), "MPI_Iprobe");
        if (!flag) failed++;
    }
    fold(failed * 7 + 1);
    check(MPI_Recv(in[0], MAX_WORDS, MPI_UINT64_T, s.MPI_SOURCE, T_IPROBE, MPI_COMM_WORLD, &s),
          "MPI_Recv");
    note_recv(s.MPI_SOURCE, in[0], &s);
    check(MPI_Wait(&rq, &s), "MPI_Wait");
}

/* Two receives and two sends completed by one of the test/wait families,
   chosen by the iteration; the completion order and the failed tests go
   into h. */
static void phase_tests(void) {
    int r1 = (rank + 1) % size, r2 = (rank + 2) % size;
    int l1 = (rank + size - 1) % size, l2 = (rank + size - 2) % size;
    MPI_Request rq[4];
    MPI_Status sts[4];
    int srcs[2] = {l1, l2};
    check(MPI_Irecv(in[0], MAX_WORDS, MPI_UINT64_T, l1, T_TEST, MPI_COMM_WORLD, &rq[0]), "MPI_Irecv");
    check(MPI_Irecv(in[1], MAX_WORDS, MPI_UINT64_T, l2, T_TEST, MPI_COMM_WORLD, &rq[1]), "MPI_Irecv");
    int w1 = make_msg(out[0], 4, 0), w2 = make_msg(out[1], 5, 0);
    check(MPI_Isend(out[0], w1, MPI_UINT64_T, r1, T_TEST, MPI_COMM_WORLD, &rq[2]), "MPI_Isend");
    check(MPI_Issend(out[1], w2, MPI_UINT64_T, r2, T_TEST, MPI_COMM_WORLD, &rq[3]), "MPI_Issend");
    st.sent[r1] += msg_hash(out[0], w1);
    st.sent[r2] += msg_hash(out[1], w2);

    uint64_t failed = 0;
    int left = 4, idx[4], n, flag;
    switch (st.it % 5) {
    case 0: /* Testsome */
        while (left > 0) {
            check(MPI_Testsome(4, rq, &n, idx, sts), "MPI_Testsome");
            if (n == 0) failed++;
            for (int k = 0; k < n; k++) {
                fold((uint64_t)idx[k] + 10);
                if (idx[k] < 2) note_recv(srcs[idx[k]], in[idx[k]], &sts[k]);
            }
            left -= n;
        }
        break;
    case 1: /* Testany */
        while (left > 0) {
            check(MPI_Testany(4, rq, &idx[0], &flag, &sts[0]), "MPI_Testany");
            if (!flag) {
                failed++;
                continue;
            }
            fold((uint64_t)idx[0] + 20);
            if (idx[0] < 2) note_recv(srcs[idx[0]], in[idx[0]], &sts[0]);
            left--;
        }
        break;
    case 2: /* Testall */
        for (flag = 0; !flag;) {
            check(MPI_Testall(4, rq, &flag, sts), "MPI_Testall");
            if (!flag) failed++;
        }
        for (int k = 0; k < 2; k++) note_recv(srcs[k], in[k], &sts[k]);
        break;
    case 3: /* Waitsome */
        while (left > 0) {
            check(MPI_Waitsome(4, rq, &n, idx, sts), "MPI_Waitsome");
            fold((uint64_t)n + 30);
            for (int k = 0; k < n; k++) {
                fold((uint64_t)idx[k] + 40);
                if (idx[k] < 2) note_recv(srcs[idx[k]], in[idx[k]], &sts[k]);
            }
            left -= n;
        }
        break;
    default: /* Test, one request after the other, round robin */
        for (int k = 0; left > 0; k = (k + 1) % 4) {
            if (rq[k] == MPI_REQUEST_NULL) continue;
            check(MPI_Test(&rq[k], &flag, &sts[0]), "MPI_Test");
            if (!flag) {
                failed++;
                continue;
            }
            fold((uint64_t)k + 50);
            if (k < 2) note_recv(srcs[k], in[k], &sts[0]);
            left--;
        }
        break;
    }
    fold(failed * 3 + 2);
}

/* Cancel of an ANY_SOURCE receive that may or may not have matched, and of
   a send. */
static void phase_cancel(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Request rq;
    MPI_Status s;
    int flag;
    /* Whether a message comes at all depends on the sender's h. */
    if (mix(st.h ^ 6) % 3 != 0) {
        int w = make_msg(out[0], 7, 1);
        check(MPI_Send(out[0], w, MPI_UINT64_T, right, T_CANCEL, MPI_COMM_WORLD), "MPI_Send");
        st.sent[right] += msg_hash(out[0], w);
        st.cancel_sent++;
    }
    check(MPI_Irecv(in[0], MAX_WORDS, MPI_UINT64_T, MPI_ANY_SOURCE, T_CANCEL, MPI_COMM_WORLD, &rq),
          "MPI_Irecv");
    check(MPI_Test(&rq, &flag, &s), "MPI_Test");
    if (!flag) {
        check(MPI_Cancel(&rq), "MPI_Cancel");
        check(MPI_Wait(&rq, &s), "MPI_Wait");
        check(MPI_Test_cancelled(&s, &flag), "MPI_Test_cancelled");
        fold((uint64_t)flag + 60);
        if (!flag) {
            note_recv(s.MPI_SOURCE, in[0], &s);
            st.cancel_recv++;
        }
    } else {
        fold(70);
        note_recv(s.MPI_SOURCE, in[0], &s);
        st.cancel_recv++;
    }

    /* A send, cancelled; the receiver learns from a second message
       whether the cancel took effect (MPI allows either). */
    int w = make_msg(out[1], 8, 1);
    check(MPI_Isend(out[1], w, MPI_UINT64_T, right, T_SCANCEL, MPI_COMM_WORLD, &rq), "MPI_Isend");
    check(MPI_Cancel(&rq), "MPI_Cancel");
    check(MPI_Wait(&rq, &s), "MPI_Wait");
    check(MPI_Test_cancelled(&s, &flag), "MPI_Test_cancelled");
    if (!flag) st.sent[right] += msg_hash(out[1], w);
    check(MPI_Send(&flag, 1, MPI_INT, right, T_SCANCEL_INFO, MPI_COMM_WORLD), "MPI_Send");
    int theirs;
    check(MPI_Recv(&theirs, 1, MPI_INT, left, T_SCANCEL_INFO, MPI_COMM_WORLD, &s), "MPI_Recv");
    if (!theirs) {
        check(MPI_Recv(in[1], MAX_WORDS, MPI_UINT64_T, left, T_SCANCEL, MPI_COMM_WORLD, &s),
              "MPI_Recv");
        note_recv(left, in[1], &s);
    }
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 200;
    int every = argc > 2 ? atoi(argv[2]) : 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 3 || size > MAXR) {
        if (rank == 0) fprintf(stderr, "nondet: needs 3 to %d ranks\n", MAXR);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(&st, 0, sizeof st);
    st.h = (uint64_t)rank;
    size_t len = sizeof st;
    if (VPMLX_Restarted(&st, &len) && len != sizeof st) MPI_Abort(MPI_COMM_WORLD, 3);

    for (; st.it < iterations; st.it++) {
        if (every > 0 && st.it % every == 0) check(VPMLX_Checkpoint(&st, sizeof st), "VPMLX_Checkpoint");
        phase_any_source();
        phase_iprobe();
        phase_tests();
        phase_cancel();
    }

    /* Drain the T_CANCEL messages no cancelled receive took. */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long theirs;
    MPI_Status s;
    check(MPI_Sendrecv(&st.cancel_sent, 1, MPI_LONG, right, T_DONE, &theirs, 1, MPI_LONG, left,
                       T_DONE, MPI_COMM_WORLD, &s),
          "MPI_Sendrecv");
    for (; st.cancel_recv < theirs; st.cancel_recv++) {
        check(MPI_Recv(in[0], MAX_WORDS, MPI_UINT64_T, left, T_CANCEL, MPI_COMM_WORLD, &s), "MPI_Recv");
        note_recv(left, in[0], &s);
    }

    uint64_t told[MAXR];
    check(MPI_Alltoall(st.sent, 1, MPI_UINT64_T, told, 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Alltoall");
    int bad = 0;
    for (int r = 0; r < size; r++)
        if (told[r] != st.recv[r]) {
            fprintf(stderr,
                    "nondet: rank %d: rank %d says it sent messages summing to %016llx, "
                    "received %016llx\n",
                    rank, r, (unsigned long long)told[r], (unsigned long long)st.recv[r]);
            bad++;
        }
    int all_bad;
    check(MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    if (rank == 0) {
        if (all_bad == 0)
            printf("nondet: %d iterations on %d ranks, conservation ok\n", iterations, size);
        else
            printf("nondet: %d iterations on %d ranks, CONSERVATION VIOLATED (%d pairs)\n",
                   iterations, size, all_bad);
    }
    MPI_Finalize();
    return all_bad == 0 ? 0 : 1;
}
