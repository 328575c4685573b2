/* One-sided communication: windows made by MPI_Win_create, _allocate and
   _create_dynamic; put, get, accumulate, get_accumulate, fetch_and_op,
   compare_and_swap and the request-based forms, with predefined and
   derived datatypes; fence, post/start/complete/wait, lock/unlock
   (exclusive, shared, lock_all) and flushes; a target that waits in a
   barrier or a receive while others lock it; attributes, names, groups,
   info and error handlers of windows; shared-memory windows. Rank 0
   prints "rma ok <checks>" or FAIL lines. Needs at least 2 ranks.
   Arguments: "no-addresses" leaves out the dynamic window (see there),
   "no-shared" the shared windows, "no-allocated" the many operations on
   allocated windows (see there), and "shared-only" runs the shared
   windows alone. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define ITERS 20

static int deleted;
static int count_delete(MPI_Win w, int k, void *v, void *extra) {
    (void)w; (void)k; (void)v; (void)extra;
    deleted++;
    return MPI_SUCCESS;
}

static int handled;
static void on_error(MPI_Win *w, int *code, ...) {
    (void)w; (void)code;
    handled++;
}

/* Memory the members share: loads and stores into each other's parts.
   Under a logging protocol this runs too, but a rank re-executed after a
   crash stops the job when it makes the window again (no log holds the
   loads and stores). */
static void shared_windows(void) {
    MPI_Win win;
    int rc, class;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
    int *part = NULL;
    rc = MPI_Win_allocate_shared(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &part, &win);
    if (rc == MPI_SUCCESS) {
        int nr, ns;
        MPI_Comm_rank(node, &nr);
        MPI_Comm_size(node, &ns);
        part[0] = 100 + nr;
        part[1] = 0;
        MPI_Win_sync(win);
        MPI_Barrier(node);
        MPI_Aint qsize = 0;
        int qunit = 0, *theirs = NULL, next = (nr + 1) % ns;
        MPI_Win_shared_query(win, next, &qsize, &qunit, &theirs);
        CHECK(qsize == 2 * sizeof(int) && qunit == sizeof(int), "shared_query: %ld bytes, unit %d", (long)qsize, qunit);
        CHECK(theirs && theirs[0] == 100 + next, "load from the next part: %d", theirs ? theirs[0] : -1);
        theirs[1] = nr + 1;
        MPI_Win_sync(win);
        MPI_Barrier(node);
        CHECK(part[1] == (nr + ns - 1) % ns + 1, "store from the previous member: %d", part[1]);
        int *first = NULL;
        MPI_Win_shared_query(win, MPI_PROC_NULL, &qsize, &qunit, &first);
        CHECK(first == part - 2 * nr && first[0] == 100, "contiguous parts from the first");
        MPI_Win_free(&win);
    } else {
        MPI_Error_class(rc, &class);
        CHECK(0, "allocate_shared failed with class %d", class);
    }
    MPI_Comm_free(&node);
}

static int has_arg(int argc, char **argv, const char *flag) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], flag)) return 1;
    return 0;
}

/* Windows MPI allocates. With no protocol on one host, origins load and
   store into them directly (the window's info says "vpml_direct" true,
   and rank 0 prints which it saw); under a logging protocol they travel
   as messages. The answers must be
   the same: accumulates from every rank at once are atomic, no update
   under an exclusive lock is lost, fences and post/start/complete/test
   order the epochs, derived datatypes land where they should. (Hundreds
   of operations: the recovery test that kills at every send leaves this
   out; the sections above cover replaying each kind of operation.) */
static int allocated_direct;
static void allocated_windows(int n) {
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    long *mem = NULL;
    MPI_Win win;
    MPI_Win_allocate(8 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    MPI_Info info;
    char value[MPI_MAX_INFO_VAL + 1] = "";
    int found = 0;
    MPI_Win_get_info(win, &info);
    MPI_Info_get(info, "vpml_direct", MPI_MAX_INFO_VAL, value, &found);
    MPI_Info_free(&info);
    CHECK(found, "no vpml_direct in the window's info");
    allocated_direct = strcmp(value, "true") == 0;
    for (int i = 0; i < 8; i++) mem[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);

    /* Every rank adds into rank 0's first slot at once. */
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < 300; i++) {
        long one = 1;
        MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, win);
    }
    MPI_Win_unlock_all(win);
    /* Read, add, write back under an exclusive lock. */
    for (int i = 0; i < 100; i++) {
        long v = 0;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Get(&v, 1, MPI_LONG, 0, 1, 1, MPI_LONG, win);
        MPI_Win_flush(0, win);
        v += 1 + rank;
        MPI_Put(&v, 1, MPI_LONG, 0, 1, 1, MPI_LONG, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        CHECK(mem[0] == 300L * n, "accumulated %ld, want %ld", mem[0], 300L * n);
        CHECK(mem[1] == 100L * n * (n + 1) / 2, "locked increments %ld", mem[1]);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Fence epochs: a strided put and a strided accumulate into the right
       neighbour's slots 2, 4 and 6. */
    MPI_Datatype every_other;
    MPI_Type_vector(3, 1, 2, MPI_LONG, &every_other);
    MPI_Type_commit(&every_other);
    long mine[3] = {rank, 10 * rank, 100 * rank}, twice[3] = {rank, rank, rank};
    MPI_Win_fence(0, win);
    MPI_Put(mine, 3, MPI_LONG, right, 2, 1, every_other, win);
    MPI_Win_fence(0, win);
    MPI_Accumulate(twice, 3, MPI_LONG, right, 2, 1, every_other, MPI_SUM, win);
    MPI_Win_fence(0, win);
    CHECK(mem[2] == 2L * left && mem[4] == 11L * left && mem[6] == 101L * left && mem[3] == 0,
          "fenced strided put and accumulate: %ld %ld %ld %ld", mem[2], mem[4], mem[6], mem[3]);
    MPI_Type_free(&every_other);

    /* Post/start/complete, the target polling MPI_Win_test. */
    MPI_Group world, zero, others;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int zero_rank = 0;
    MPI_Group_incl(world, 1, &zero_rank, &zero);
    MPI_Group_excl(world, 1, &zero_rank, &others);
    if (rank == 0) {
        int done = 0, polls = 0;
        MPI_Win_post(others, 0, win);
        while (!done) {
            MPI_Win_test(win, &done);
            polls++;
        }
        CHECK(mem[7] > 1000 && mem[7] <= 1000 + n - 1, "post/test after %d polls: slot holds %ld", polls, mem[7]);
    } else {
        long v = 1000 + rank;
        MPI_Win_start(zero, 0, win);
        MPI_Put(&v, 1, MPI_LONG, 0, 7, 1, MPI_LONG, win);
        long back = 0;
        MPI_Get_accumulate(&v, 1, MPI_LONG, &back, 1, MPI_LONG, 0, 7, 1, MPI_LONG, MPI_REPLACE, win);
        MPI_Win_complete(win);
    }
    MPI_Group_free(&world);
    MPI_Group_free(&zero);
    MPI_Group_free(&others);

    /* Fetch-and-op, compare-and-swap, MPI_NO_OP and a request-based get
       on the right neighbour's slots 0 and 1. */
    mem[0] = mem[1] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    long one = 1, before = -1, swap = rank + 1, expect = 0, old = -1, now = -1, seen = -1;
    MPI_Request rq;
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_Fetch_and_op(&one, &before, MPI_LONG, right, 0, MPI_SUM, win);
    MPI_Compare_and_swap(&swap, &expect, &old, MPI_LONG, right, 1, win);
    MPI_Fetch_and_op(NULL, &now, MPI_LONG, right, 0, MPI_NO_OP, win);
    /* Zero elements from and to a null address: nothing moves. */
    MPI_Put(NULL, 0, MPI_LONG, right, 1, 0, MPI_LONG, win);
    MPI_Get(NULL, 0, MPI_LONG, right, 1, 0, MPI_LONG, win);
    MPI_Rget(&seen, 1, MPI_LONG, right, 1, 1, MPI_LONG, win, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    MPI_Win_unlock(right, win);
    CHECK(before == 0 && now == 1 && old == 0 && seen == rank + 1,
          "fetch-and-op %ld then %ld, compare-and-swap found %ld, Rget %ld", before, now, old, seen);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(mem[0] == 1 && mem[1] == left + 1, "slots 0 and 1 hold %ld and %ld", mem[0], mem[1]);
    MPI_Win_free(&win);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    if (has_arg(argc, argv, "shared-only")) goto shared;

    /* Fence epochs on memory of the program's: put, get, accumulate,
       a strided target datatype. */
    int *buf = calloc(4 * n, sizeof(int));
    MPI_Win win;
    CHECK(MPI_Win_create(buf, 4 * n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS, "Win_create");
    MPI_Win_fence(0, win);
    int mine = 100 + rank;
    for (int t = 0; t < n; t++) MPI_Put(&mine, 1, MPI_INT, t, rank, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < n; i++) CHECK(buf[i] == 100 + i, "fence put: slot %d holds %d", i, buf[i]);
    int got[64];
    MPI_Get(got, n, MPI_INT, right, 0, n, MPI_INT, win);
    int one = rank + 1;
    MPI_Accumulate(&one, 1, MPI_INT, 0, n, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < n; i++) CHECK(got[i] == 100 + i, "fence get: %d holds %d", i, got[i]);
    if (rank == 0) CHECK(buf[n] == n * (n + 1) / 2, "accumulate: %d", buf[n]);
    MPI_Datatype every_other;
    MPI_Type_vector(n, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int row[64];
    for (int i = 0; i < n; i++) row[i] = 1000 * rank + i;
    /* n ints into every other slot of the right neighbour's last 2n. */
    MPI_Put(row, n, MPI_INT, right, 2 * n, 1, every_other, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < n; i++) CHECK(buf[2 * n + 2 * i] == 1000 * left + i, "strided put: %d holds %d", i, buf[2 * n + 2 * i]);
    MPI_Type_free(&every_other);

    /* The window's attributes, name, group and info. */
    void *attr;
    int flag = 0;
    MPI_Win_get_attr(win, MPI_WIN_BASE, &attr, &flag);
    CHECK(flag && attr == buf, "WIN_BASE %p, not %p", attr, (void *)buf);
    MPI_Win_get_attr(win, MPI_WIN_SIZE, &attr, &flag);
    CHECK(flag && *(MPI_Aint *)attr == (MPI_Aint)(4 * n * sizeof(int)), "WIN_SIZE %ld", (long)*(MPI_Aint *)attr);
    MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &attr, &flag);
    CHECK(flag && *(int *)attr == (int)sizeof(int), "WIN_DISP_UNIT %d", *(int *)attr);
    MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &attr, &flag);
    CHECK(flag && *(int *)attr == MPI_WIN_FLAVOR_CREATE, "flavor %d", *(int *)attr);
    MPI_Win_get_attr(win, MPI_WIN_MODEL, &attr, &flag);
    CHECK(flag && *(int *)attr == MPI_WIN_UNIFIED, "model %d", *(int *)attr);
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    MPI_Win_get_name(win, name, &len);
    CHECK(len == 0, "unnamed window: %d", len);
    MPI_Win_set_name(win, "counters");
    MPI_Win_get_name(win, name, &len);
    CHECK(len == 8 && !strcmp(name, "counters"), "name %s", name);
    MPI_Group g;
    int gsize = 0;
    MPI_Win_get_group(win, &g);
    MPI_Group_size(g, &gsize);
    CHECK(gsize == n, "group of %d", gsize);
    MPI_Group_free(&g);
    int key;
    MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, count_delete, &key, NULL);
    MPI_Win_set_attr(win, key, &mine);
    MPI_Win_get_attr(win, key, &attr, &flag);
    CHECK(flag && attr == &mine, "user attribute");

    /* Errors come back through the window's handler. */
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    int rc = MPI_Put(&mine, 1, MPI_INT, right, 4 * n, 1, MPI_INT, win);
    int class = -1;
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_RMA_RANGE, "put past the window: class %d", class);
    MPI_Win_unlock(right, win);
    rc = MPI_Win_unlock(right, win);
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_RMA_SYNC, "unlock without a lock: class %d", class);
    MPI_Errhandler eh;
    MPI_Win_create_errhandler(on_error, &eh);
    MPI_Win_set_errhandler(win, eh);
    MPI_Win_call_errhandler(win, MPI_ERR_OTHER);
    CHECK(handled == 1, "the user handler ran %d times", handled);
    MPI_Win_set_errhandler(win, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&eh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    CHECK(win == MPI_WIN_NULL && deleted == 1, "Win_free: deleted %d", deleted);
    MPI_Win_free_keyval(&key);

    /* Memory the window allocates, post/start/complete/wait: every rank
       but 0 writes its rank into rank 0's window. */
    int *mem = NULL;
    CHECK(MPI_Win_allocate((n + 4) * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win) == MPI_SUCCESS && mem, "Win_allocate");
    for (int i = 0; i < n; i++) mem[i] = -1;
    MPI_Group world, zero, others;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int zero_rank = 0;
    MPI_Group_incl(world, 1, &zero_rank, &zero);
    MPI_Group_excl(world, 1, &zero_rank, &others);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_post(others, 0, win);
        MPI_Win_wait(win);
        for (int i = 1; i < n; i++) CHECK(mem[i] == i * i, "post/wait: slot %d holds %d", i, mem[i]);
    } else {
        int sq = rank * rank;
        MPI_Win_start(zero, 0, win);
        MPI_Put(&sq, 1, MPI_INT, 0, rank, 1, MPI_INT, win);
        MPI_Win_complete(win);
    }
    MPI_Group_free(&world);
    MPI_Group_free(&zero);
    MPI_Group_free(&others);

    /* A counter at rank 0 under an exclusive lock, each rank's later
       values depending on what it fetched; rank 0 sits in a barrier
       meanwhile (passive target). */
    if (rank == 0) mem[0] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    int fetched[ITERS], inc = 1;
    if (rank != 0) {
        for (int i = 0; i < ITERS; i++) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
            MPI_Fetch_and_op(&inc, &fetched[i], MPI_INT, 0, 0, MPI_SUM, win);
            MPI_Win_unlock(0, win);
            inc = 1 + fetched[i] % 3;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int sum = 0;
    if (rank != 0) {
        inc = 1;
        for (int i = 0; i < ITERS; i++) {
            sum += inc;
            inc = 1 + fetched[i] % 3;
        }
    }
    int total = 0;
    MPI_Reduce(&sum, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) CHECK(mem[0] == total, "fetch-and-op counter %d, increments %d", mem[0], total);

    /* Compare-and-swap: one rank wins the empty slot. */
    if (rank == 0) mem[1] = -1;
    MPI_Barrier(MPI_COMM_WORLD);
    int expect = -1, old = 0, wins = 0, all_wins = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Compare_and_swap(&rank, &expect, &old, MPI_INT, 0, 1, win);
    MPI_Win_unlock(0, win);
    wins = old == -1;
    MPI_Allreduce(&wins, &all_wins, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all_wins == 1, "compare-and-swap: %d winners", all_wins);

    /* Lock_all, Rget, Get_accumulate as an atomic read and a swap,
       flush. */
    mem[2] = 7 * rank;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    MPI_Request req;
    int seen = -1, atomic = -1, swapped = -1, mark = -5;
    MPI_Rget(&seen, 1, MPI_INT, right, 2, 1, MPI_INT, win, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(seen == 7 * right, "Rget: %d", seen);
    MPI_Get_accumulate(NULL, 0, MPI_INT, &atomic, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_NO_OP, win);
    MPI_Win_flush(right, win);
    CHECK(atomic == 7 * right, "get_accumulate NO_OP: %d", atomic);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    MPI_Get_accumulate(&mark, 1, MPI_INT, &swapped, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_REPLACE, win);
    MPI_Win_unlock(right, win);
    CHECK(swapped == 7 * right, "get_accumulate REPLACE fetched %d", swapped);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(mem[2] == -5, "swapped in %d", mem[2]);

    /* A target waiting in a receive serves the lock and the put whose
       origin sends after unlocking. */
    if (rank == 1) {
        int v = 4242;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Put(&v, 1, MPI_INT, 0, 3 % n, 1, MPI_INT, win);
        MPI_Win_unlock(0, win);
        MPI_Send(&v, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
    } else if (rank == 0) {
        int v = 0;
        MPI_Recv(&v, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(mem[3 % n] == 4242, "put while the target waited in a receive: %d", mem[3 % n]);
        MPI_Send(&v, 1, MPI_INT, 1, 11, MPI_COMM_WORLD);
    }
    if (rank == 1) MPI_Recv(&inc, 1, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* ... and one that polls with MPI_Test. */
    if (rank == 1) {
        int v = 777;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Put(&v, 1, MPI_INT, 0, 3 % n, 1, MPI_INT, win);
        MPI_Win_unlock(0, win);
        MPI_Send(&v, 1, MPI_INT, 0, 10, MPI_COMM_WORLD);
    } else if (rank == 0) {
        int v = 0, done = 0;
        MPI_Request r;
        MPI_Irecv(&v, 1, MPI_INT, 1, 10, MPI_COMM_WORLD, &r);
        while (!done) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        CHECK(mem[3 % n] == 777, "put while the target polled MPI_Test: %d", mem[3 % n]);
    }
    MPI_Win_free(&win);

    /* A window on half the ranks: a collective on that half serves its
       requests (rank 0 locks rank 1 of the half, which waits in an
       Allreduce). */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    int cell = -1;
    MPI_Win_create(&cell, sizeof(int), sizeof(int), MPI_INFO_NULL, half, &win);
    if (hsize > 1) {
        if (hrank == 0) {
            int v = 31 + rank;
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
            MPI_Put(&v, 1, MPI_INT, 1, 0, 1, MPI_INT, win);
            MPI_Win_unlock(1, win);
        }
        int x = 1, y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, half);
        CHECK(y == hsize, "allreduce on the half: %d", y);
        MPI_Comm dup;
        MPI_Comm_dup(half, &dup);
        MPI_Comm_free(&dup);
        if (hrank == 1) CHECK(cell == 31 + rank - 2, "put while the target waited in an allreduce: %d", cell);
    }
    MPI_Win_free(&win);
    MPI_Comm_free(&half);

    /* A target that polls with MPI_Iprobe, which finds another message
       waiting at once each time, still serves the lock and the put that
       end its loop. (It reads its window memory without MPI_Win_sync,
       which vpml's MPI_WIN_UNIFIED memory model allows.) */
    {
        int cell = 0, one = 1, found = 0, note = 5;
        volatile int *flag = &cell;
        MPI_Win fw;
        MPI_Win_create(&cell, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &fw);
        if (rank == 1) {
            MPI_Send(&note, 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, fw);
            MPI_Put(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, fw);
            MPI_Win_unlock(0, fw);
        } else if (rank == 0) {
            MPI_Probe(1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            /* (The probe may have served them already.) */
            int missed = 0;
            while (!*flag) {
                MPI_Iprobe(1, 77, MPI_COMM_WORLD, &found, MPI_STATUS_IGNORE);
                missed += !found;
            }
            CHECK(missed == 0, "MPI_Iprobe missed the waiting message %d times", missed);
            MPI_Recv(&note, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Win_free(&fw);
    }

    /* Two windows at once, and operations longer than a target's inbox
       (64 KiB): a 96 KiB put and get under fences on one, and on the
       other a 24 KiB accumulate from every rank into rank 0 under an
       exclusive lock. */
    {
        enum { BIG = 24 * 1024 }; /* ints */
        int *a = calloc(BIG, sizeof(int)), *b = calloc(BIG / 4, sizeof(int));
        int *src = malloc(BIG * sizeof(int)), *back = calloc(BIG, sizeof(int));
        MPI_Win wa, wb;
        MPI_Win_create(a, BIG * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &wa);
        MPI_Win_create(b, BIG / 4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &wb);
        for (int i = 0; i < BIG; i++) src[i] = rank * 100000 + i;
        MPI_Win_fence(0, wa);
        MPI_Put(src, BIG, MPI_INT, right, 0, BIG, MPI_INT, wa);
        MPI_Win_fence(0, wa);
        int wrong = 0;
        for (int i = 0; i < BIG; i++) wrong += a[i] != left * 100000 + i;
        CHECK(wrong == 0, "96 KiB put: %d ints wrong", wrong);
        MPI_Get(back, BIG, MPI_INT, right, 0, BIG, MPI_INT, wa);
        MPI_Win_fence(0, wa);
        wrong = 0;
        for (int i = 0; i < BIG; i++) wrong += back[i] != rank * 100000 + i;
        CHECK(wrong == 0, "96 KiB get: %d ints wrong", wrong);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wb);
        MPI_Accumulate(src, BIG / 4, MPI_INT, 0, 0, BIG / 4, MPI_INT, MPI_SUM, wb);
        MPI_Win_unlock(0, wb);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            wrong = 0;
            for (int i = 0; i < BIG / 4; i++) wrong += b[i] != 100000 * n * (n - 1) / 2 + n * i;
            CHECK(wrong == 0, "24 KiB accumulates: %d ints wrong", wrong);
        }
        MPI_Win_free(&wb);
        MPI_Win_free(&wa);
        free(a);
        free(b);
        free(src);
        free(back);
    }

    /* A dynamic window: memory attached, addressed by its address (not
       with "no-addresses": the addresses a restarted process sends differ
       from the ones it sent before, which recovery rightly refuses). */
    if (!has_arg(argc, argv, "no-addresses")) {
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        int *dyn = calloc(n, sizeof(int));
        MPI_Win_attach(win, dyn, n * sizeof(int));
        MPI_Aint here, *addrs = calloc(n, sizeof(MPI_Aint));
        MPI_Get_address(dyn, &here);
        MPI_Allgather(&here, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD);
        MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
        int r2 = rank * 2;
        MPI_Put(&r2, 1, MPI_INT, right, addrs[right] + rank * sizeof(int), 1, MPI_INT, win);
        MPI_Win_unlock(right, win);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(dyn[left] == left * 2, "dynamic window: %d", dyn[left]);
        MPI_Win_detach(win, dyn);
        MPI_Win_free(&win);
        free(dyn);
        free(addrs);
    }
    free(buf);

    if (!has_arg(argc, argv, "no-allocated")) allocated_windows(n);

shared:
    if (!has_arg(argc, argv, "no-shared")) shared_windows();

    int failed_all = 0;
    MPI_Reduce(&failed, &failed_all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && failed_all == 0 && failed == 0) {
        printf("rma ok %d\n", checks);
        printf("allocated windows: %s\n", allocated_direct ? "direct" : "messages");
    }
    MPI_Finalize();
    return failed_all != 0;
}
