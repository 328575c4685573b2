/* Nonblocking collectives on 4 ranks: each one's result equals its
   blocking twin's (bit for bit, reductions included) for contiguous and
   non-contiguous datatypes, in place where MPI allows it; several in
   flight at once and completed out of order, by Waitall, Waitany and
   Test loops; persistent collectives (MPI 4.0's *_init); neighbourhood
   collectives on grids, a torus and a distributed graph; on an
   intercommunicator; MPI_Alltoallw and Comm_idup; and
   the errors MPI defines (freeing or cancelling one in flight). Every
   check that fails prints "FAIL <what>"; rank 0 ends with "nbc ok
   <checks>". Built with `vpml mpicc` or MPICH's mpicc.mpich. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int size;

static void wait1(MPI_Request *r) { MPI_Wait(r, MPI_STATUS_IGNORE); }

/* A non-commutative user operation: 2x2 integer matrix product. */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++, a += 4, b += 4) {
        int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                    a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
}

/* Sums of int pairs (a datatype of two ints): MPI's predefined operations
   take predefined datatypes only. */
static void add_pairs(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < 2 * *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void rooted(void) {
    /* Ibcast of a vector type from rank 2. */
    MPI_Datatype every_other;
    MPI_Type_vector(4, 1, 2, MPI_DOUBLE, &every_other);
    MPI_Type_commit(&every_other);
    double v[8];
    for (int i = 0; i < 8; i++) v[i] = rank == 2 ? 10 + i : -1;
    MPI_Request r;
    MPI_Ibcast(v, 1, every_other, 2, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(v[0] == 10 && v[6] == 16 && (rank == 2 || v[1] == -1), "Ibcast vector %g %g %g", v[0], v[6], v[1]);
    MPI_Type_free(&every_other);

    /* Ireduce with a non-commutative user operation, and with MPI_SUM in
       place at the root: as the blocking Reduce. */
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_INT, &mat);
    MPI_Type_commit(&mat);
    MPI_Op mm;
    MPI_Op_create(matmul, 0, &mm);
    int m[4] = {1, rank + 1, 0, 1}, want[4], got[4];
    MPI_Reduce(m, want, 1, mat, mm, 1, MPI_COMM_WORLD);
    MPI_Ireduce(m, got, 1, mat, mm, 1, MPI_COMM_WORLD, &r);
    wait1(&r);
    if (rank == 1) CHECK(memcmp(want, got, sizeof got) == 0 && got[1] == 10, "Ireduce user op %d", got[1]);
    double x = 0.1 * (rank + 1), xs = 0, xb = 0;
    MPI_Reduce(&x, &xb, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) xs = x;
    MPI_Ireduce(rank == 0 ? MPI_IN_PLACE : &x, &xs, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, &r);
    wait1(&r);
    if (rank == 0) CHECK(xs == xb, "Ireduce in place %.17g %.17g", xs, xb);

    /* Igather(v) and Iscatter(v) at rank 3. */
    int all[8] = {0}, mine[2] = {rank, -rank};
    MPI_Igather(mine, 2, MPI_INT, all, 2, MPI_INT, 3, MPI_COMM_WORLD, &r);
    wait1(&r);
    if (rank == 3) CHECK(all[2] == 1 && all[3] == -1 && all[6] == 3, "Igather %d %d", all[2], all[6]);
    int counts[4] = {1, 2, 0, 1}, displs[4] = {3, 0, 2, 2}, g[4] = {-9, -9, -9, -9};
    MPI_Igatherv(mine, counts[rank], MPI_INT, g, counts, displs, MPI_INT, 3, MPI_COMM_WORLD, &r);
    wait1(&r);
    if (rank == 3) CHECK(g[3] == 0 && g[0] == 1 && g[1] == -1 && g[2] == 3, "Igatherv %d %d %d %d", g[0], g[1], g[2], g[3]);
    int src[8] = {0, 1, 2, 3, 4, 5, 6, 7}, part[2] = {-1, -1};
    MPI_Iscatter(src, 2, MPI_INT, part, 2, MPI_INT, 3, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(part[0] == 2 * rank && part[1] == 2 * rank + 1, "Iscatter %d %d", part[0], part[1]);
    part[0] = part[1] = -1;
    MPI_Iscatterv(src, counts, displs, MPI_INT, part, counts[rank], MPI_INT, 3, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(counts[rank] == 0 ? part[0] == -1 : part[0] == src[displs[rank]], "Iscatterv %d", part[0]);
    MPI_Op_free(&mm);
    MPI_Type_free(&mat);
}

static void everyone(void) {
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(r == MPI_REQUEST_NULL, "Ibarrier frees its request");

    /* Iallreduce: floats whose sum depends on the order; every rank gets
       the same bits (each folds in rank order). */
    float f[3] = {1e8f * (rank % 2 ? 1 : -1), 1.0f / (rank + 3), (float)rank}, fa[3];
    MPI_Iallreduce(f, fa, 3, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    wait1(&r);
    float fr[3];
    MPI_Allreduce(fa, fr, 3, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(memcmp(fa, fr, sizeof fa) == 0 && fa[2] == 6.0f, "Iallreduce: every rank the same %g", fa[2]);
    int iv = 1 << rank, ia = 0;
    MPI_Iallreduce(&iv, &ia, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(ia == 15, "Iallreduce BOR %d", ia);

    /* Iscan, Iexscan. */
    int s = rank + 1, sc = -1, ex = -1;
    MPI_Request two[2];
    MPI_Iscan(&s, &sc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &two[0]);
    MPI_Iexscan(&s, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &two[1]);
    MPI_Waitall(2, two, MPI_STATUSES_IGNORE);
    CHECK(sc == (rank + 1) * (rank + 2) / 2 && (rank == 0 || ex == rank * (rank + 1) / 2), "Iscan %d Iexscan %d", sc, ex);

    /* Ireduce_scatter_block and Ireduce_scatter. */
    int vec[8], blk[2] = {-1, -1};
    for (int i = 0; i < 8; i++) vec[i] = rank * 8 + i;
    MPI_Ireduce_scatter_block(vec, blk, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(blk[0] == 48 + 4 * 2 * rank && blk[1] == 48 + 4 * (2 * rank + 1), "Ireduce_scatter_block %d %d", blk[0], blk[1]);
    int rc[4] = {3, 0, 1, 4}, rs[4] = {-1, -1, -1, -1}, start[4] = {0, 3, 3, 4};
    MPI_Ireduce_scatter(vec, rs, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(rc[rank] == 0 ? rs[0] == -1 : rs[0] == 48 + 4 * start[rank], "Ireduce_scatter %d", rs[0]);
    /* In place: the input is the result buffer, the result its first block. */
    for (int i = 0; i < 8; i++) vec[i] = rank * 8 + i;
    MPI_Ireduce_scatter_block(MPI_IN_PLACE, vec, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(vec[0] == 48 + 4 * 2 * rank && vec[1] == 48 + 4 * (2 * rank + 1), "Ireduce_scatter_block in place %d %d", vec[0], vec[1]);

    /* Iscatter from a root whose blocks are sent from its own buffer:
       in place, then with a type with holes (packed first); the root's
       buffer comes back as it was. */
    int from[12], got[2] = {-1, -1};
    for (int i = 0; i < 12; i++) from[i] = 100 + i;
    MPI_Iscatter(from, 2, MPI_INT, rank == 1 ? MPI_IN_PLACE : got, 2, MPI_INT, 1, MPI_COMM_WORLD, &r);
    wait1(&r);
    if (rank == 1) CHECK(got[0] == -1, "Iscatter in place wrote the root's block elsewhere");
    else CHECK(got[0] == 100 + 2 * rank && got[1] == 101 + 2 * rank, "Iscatter in place %d %d", got[0], got[1]);
    MPI_Datatype strided, holes;
    MPI_Type_vector(2, 1, 2, MPI_INT, &strided);
    MPI_Type_create_resized(strided, 0, 3 * sizeof(int), &holes);
    MPI_Type_free(&strided);
    MPI_Type_commit(&holes);
    MPI_Iscatter(from, 1, holes, got, 2, MPI_INT, 2, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(got[0] == 100 + 3 * rank && got[1] == 102 + 3 * rank, "Iscatter with holes %d %d", got[0], got[1]);
    MPI_Type_free(&holes);
    got[0] = got[1] = -1;
    MPI_Iscatter(from, 2, MPI_INT, got, 2, MPI_INT, 3, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(got[0] == 100 + 2 * rank && got[1] == 101 + 2 * rank, "Iscatter, the root's own block too %d %d", got[0], got[1]);
    int intact = 1;
    for (int i = 0; i < 12; i++) intact &= from[i] == 100 + i;
    CHECK(intact, "Iscatter left the root's buffer as it was");

    /* Iallgather in place, Iallgatherv. */
    int ag[4] = {-1, -1, -1, -1};
    ag[rank] = rank * rank;
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, 1, MPI_INT, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(ag[0] == 0 && ag[1] == 1 && ag[2] == 4 && ag[3] == 9, "Iallgather in place");
    int counts[4] = {1, 2, 0, 1}, displs[4] = {0, 1, 3, 3}, agv[4] = {-1, -1, -1, -1}, mine[2] = {rank, rank};
    MPI_Iallgatherv(mine, counts[rank], MPI_INT, agv, counts, displs, MPI_INT, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(agv[0] == 0 && agv[1] == 1 && agv[2] == 1 && agv[3] == 3, "Iallgatherv");

    /* Ialltoall, Ialltoallv, in place too. */
    int out[4], in[4];
    for (int i = 0; i < 4; i++) out[i] = rank * 10 + i;
    MPI_Ialltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(in[0] == rank && in[3] == 30 + rank, "Ialltoall %d %d", in[0], in[3]);
    MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, 1, MPI_INT, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(memcmp(in, out, sizeof in) == 0, "Ialltoall in place");
    int sc4[4] = {1, 1, 1, 1}, sd4[4] = {3, 2, 1, 0}, rd4[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4; i++) out[i] = rank * 10 + i;
    MPI_Ialltoallv(out, sc4, sd4, MPI_INT, in, sc4, rd4, MPI_INT, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(in[1] == 10 + 3 - rank, "Ialltoallv %d", in[1]);
    /* Ialltoallv and Iallgatherv whose lists are equal blocks in order
       (the plain calls' layout), beside ranks that see other lists. */
    int ec[4] = {2, 2, 2, 2}, ed[4] = {0, 2, 4, 6}, eo[8], ei[8];
    for (int i = 0; i < 8; i++) eo[i] = rank * 100 + i;
    MPI_Ialltoallv(eo, ec, ed, MPI_INT, ei, ec, ed, MPI_INT, MPI_COMM_WORLD, &r);
    wait1(&r);
    CHECK(ei[2] == 100 + 2 * rank && ei[7] == 300 + 2 * rank + 1, "Ialltoallv of equal blocks %d %d", ei[2], ei[7]);
    int gd[4] = {0, 2, 4, 6};
    if (rank == 1) { gd[0] = 6; gd[3] = 0; } /* rank 1 gathers in another order */
    MPI_Iallgatherv(eo, 2, MPI_INT, ei, ec, gd, MPI_INT, MPI_COMM_WORLD, &r);
    wait1(&r);
    int at3 = rank == 1 ? 0 : 6;
    CHECK(ei[at3] == 300 && ei[at3 + 1] == 301 && ei[2] == 100, "Iallgatherv of equal blocks %d %d", ei[at3], ei[2]);

    /* MPI_Alltoallw: ints to even ranks, a double to odd ones. */
    int wi[4] = {0};
    double wd[4] = {0};
    char sbuf[64], rbuf[64];
    int wsc[4], wsd[4], wrc[4], wrd[4];
    MPI_Datatype wst[4], wrt[4];
    for (int i = 0; i < 4; i++) {
        int is_double = i % 2;
        wsc[i] = 1, wsd[i] = 16 * i, wst[i] = is_double ? MPI_DOUBLE : MPI_INT;
        int from_double = rank % 2;
        wrc[i] = 1, wrd[i] = 16 * i, wrt[i] = from_double ? MPI_DOUBLE : MPI_INT;
        if (is_double) {
            double d = rank + 0.5;
            memcpy(sbuf + 16 * i, &d, sizeof d);
        } else {
            int v = 100 * rank + i;
            memcpy(sbuf + 16 * i, &v, sizeof v);
        }
    }
    MPI_Alltoallw(sbuf, wsc, wsd, wst, rbuf, wrc, wrd, wrt, MPI_COMM_WORLD);
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        if (rank % 2) {
            memcpy(&wd[i], rbuf + 16 * i, sizeof(double));
            ok &= wd[i] == i + 0.5;
        } else {
            memcpy(&wi[i], rbuf + 16 * i, sizeof(int));
            ok &= wi[i] == 100 * i + rank;
        }
    }
    CHECK(ok, "Alltoallw");
    MPI_Request w;
    memset(rbuf, 0, sizeof rbuf);
    MPI_Ialltoallw(sbuf, wsc, wsd, wst, rbuf, wrc, wrd, wrt, MPI_COMM_WORLD, &w);
    wait1(&w);
    int again = 1;
    for (int i = 0; i < 4; i++) {
        if (rank % 2) {
            double d;
            memcpy(&d, rbuf + 16 * i, sizeof d);
            again &= d == i + 0.5;
        } else {
            int v;
            memcpy(&v, rbuf + 16 * i, sizeof v);
            again &= v == 100 * i + rank;
        }
    }
    CHECK(again, "Ialltoallw");

    /* A block of no elements may name no datatype. */
    int zc[4] = {0, 0, 0, 0};
    MPI_Datatype nulls[4] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
    int rcw = MPI_Alltoallw(sbuf, zc, wsd, nulls, rbuf, zc, wrd, nulls, MPI_COMM_WORLD);
    CHECK(rcw == MPI_SUCCESS, "Alltoallw of empty blocks with no datatype");

    /* The program may free a reduction's datatype before it completes. */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op add;
    MPI_Op_create(add_pairs, 1, &add);
    int pv[2] = {rank, 2 * rank}, ps[2] = {-1, -1};
    MPI_Iallreduce(pv, ps, 1, pair, add, MPI_COMM_WORLD, &r);
    MPI_Type_free(&pair);
    wait1(&r);
    MPI_Op_free(&add);
    CHECK(ps[0] == 6 && ps[1] == 12, "Iallreduce after Type_free %d %d", ps[0], ps[1]);
}

static void many_in_flight(void) {
    /* Eight collectives in flight, completed in reverse order, then by
       Waitany, then by polling Testall. */
    enum { K = 8 };
    MPI_Request r[K];
    int v[K], sum[K];
    for (int k = 0; k < K; k++) {
        v[k] = rank * 100 + k;
        MPI_Iallreduce(&v[k], &sum[k], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[k]);
    }
    for (int k = K - 1; k >= 0; k--) MPI_Wait(&r[k], MPI_STATUS_IGNORE);
    int ok = 1;
    for (int k = 0; k < K; k++) ok &= sum[k] == 600 + 4 * k;
    CHECK(ok, "eight Iallreduce completed in reverse");
    for (int k = 0; k < K; k++) {
        v[k] = rank + k;
        if (k % 2)
            MPI_Ibcast(&v[k], 1, MPI_INT, k % 4, MPI_COMM_WORLD, &r[k]);
        else
            MPI_Iallreduce(&v[k], &sum[k], 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r[k]);
    }
    int seen = 0;
    for (int n = 0; n < K; n++) {
        int idx;
        MPI_Waitany(K, r, &idx, MPI_STATUS_IGNORE);
        seen |= 1 << idx;
    }
    ok = seen == (1 << K) - 1;
    for (int k = 0; k < K; k++) ok &= k % 2 ? v[k] == k % 4 + k : sum[k] == 3 + k;
    CHECK(ok, "mixed collectives by Waitany");
    MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
    int flag = 0, polls = 0;
    while (!flag) {
        MPI_Testall(1, r, &flag, MPI_STATUSES_IGNORE);
        polls++;
    }
    CHECK(flag && r[0] == MPI_REQUEST_NULL && polls > 0, "Ibarrier by Testall");
}

static void persistent(void) {
    /* Made once, started three times, each time with new data; the
       datatype is freed before the first start. */
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    int b[2], in[2], sum[2], gath[8];
    MPI_Request r[4];
    MPI_Bcast_init(b, 1, pair, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]);
    MPI_Op add;
    MPI_Op_create(add_pairs, 1, &add);
    MPI_Allreduce_init(in, sum, 1, pair, add, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]);
    MPI_Allgather_init(in, 2, MPI_INT, gath, 2, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &r[2]);
    MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r[3]);
    MPI_Type_free(&pair);
    int ok = 1;
    for (int round = 0; round < 3; round++) {
        b[0] = rank == 1 ? 100 + round : -1;
        b[1] = rank == 1 ? 200 + round : -1;
        in[0] = rank + round;
        in[1] = -rank;
        MPI_Startall(4, r);
        MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
        ok &= b[0] == 100 + round && b[1] == 200 + round;
        ok &= sum[0] == 6 + 4 * round && sum[1] == -6;
        ok &= gath[6] == 3 + round && gath[7] == -3;
        ok &= r[0] != MPI_REQUEST_NULL;
    }
    CHECK(ok, "persistent collectives started three times");
    for (int i = 0; i < 4; i++) MPI_Request_free(&r[i]);
    MPI_Op_free(&add);
    CHECK(r[0] == MPI_REQUEST_NULL && r[3] == MPI_REQUEST_NULL, "Request_free of persistent collectives");
    /* Persistent collectives match by the order they were made in, not
       started in: rank 0 starts these two the other way round. */
    int v42 = -1;
    MPI_Bcast_init(&v42, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]);
    MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]);
    if (rank == 0) {
        v42 = 42;
        MPI_Start(&r[0]);
        MPI_Start(&r[1]);
    } else {
        MPI_Start(&r[1]);
        MPI_Start(&r[0]);
    }
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    CHECK(v42 == 42, "persistent collectives started out of order %d", v42);
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);
    /* Alltoallw_init and Reduce_scatter_block_init, started twice. */
    int out[4], got[4], counts[4] = {1, 1, 1, 1}, displs[4] = {0, 4, 8, 12};
    MPI_Datatype types[4] = {MPI_INT, MPI_INT, MPI_INT, MPI_INT};
    int rsb = -1;
    MPI_Alltoallw_init(out, counts, displs, types, got, counts, displs, types, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]);
    MPI_Reduce_scatter_block_init(out, &rsb, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]);
    ok = 1;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 4; i++) out[i] = 10 * rank + i + round;
        MPI_Start(&r[0]);
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
        MPI_Start(&r[1]);
        MPI_Wait(&r[1], MPI_STATUS_IGNORE);
        for (int i = 0; i < 4; i++) ok &= got[i] == 10 * i + rank + round;
        ok &= rsb == 30 + rank + round;
    }
    CHECK(ok, "Alltoallw_init, Reduce_scatter_block_init");
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);
}

static void neighbourhood(void) {
    /* A periodic ring: left then right. */
    MPI_Comm ring, grid, torus, dg;
    int dims1[1] = {4}, per1[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, per1, 0, &ring);
    int lr[2] = {-1, -1};
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, lr, 1, MPI_INT, ring);
    CHECK(lr[0] == (rank + 3) % 4 && lr[1] == (rank + 1) % 4, "Neighbor_allgather ring %d %d", lr[0], lr[1]);
    /* A 2x2 grid without wrap: the missing neighbours leave their block. */
    int dims2[2] = {2, 2}, per0[2] = {0, 0}, per2[2] = {1, 1};
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, per0, 0, &grid);
    int g[4] = {-1, -1, -1, -1};
    MPI_Request r;
    MPI_Ineighbor_allgather(&rank, 1, MPI_INT, g, 1, MPI_INT, grid, &r);
    wait1(&r);
    int row = rank / 2, col = rank % 2;
    int want_g[4] = {row ? rank - 2 : -1, row ? -1 : rank + 2, col ? rank - 1 : -1, col ? -1 : rank + 1};
    CHECK(memcmp(g, want_g, sizeof g) == 0, "Ineighbor_allgather grid %d %d %d %d", g[0], g[1], g[2], g[3]);
    /* A 2x2 torus: each neighbour is both below and above; what goes up
       arrives from below. */
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, per2, 0, &torus);
    int out[4], in[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++) out[i] = 100 * rank + i;
    MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, torus);
    int other_row = rank ^ 2, other_col = rank ^ 1;
    int want_t[4] = {100 * other_row + 1, 100 * other_row + 0, 100 * other_col + 3, 100 * other_col + 2};
    CHECK(memcmp(in, want_t, sizeof in) == 0, "Neighbor_alltoall torus %d %d %d %d", in[0], in[1], in[2], in[3]);
    /* The same, persistent, started twice with new data. */
    MPI_Neighbor_alltoall_init(out, 1, MPI_INT, in, 1, MPI_INT, torus, MPI_INFO_NULL, &r);
    int again_ok = 1;
    for (int round = 1; round <= 2; round++) {
        for (int i = 0; i < 4; i++) out[i] = 100 * rank + i + 10 * round;
        MPI_Start(&r);
        wait1(&r);
        for (int i = 0; i < 4; i++) again_ok &= in[i] == want_t[i] + 10 * round;
    }
    MPI_Request_free(&r);
    CHECK(again_ok, "Neighbor_alltoall_init");
    /* A distributed graph: to the next two ranks, from the previous two;
       r + 1 ints to the first, 1 to the second. */
    int srcs[2] = {(rank + 3) % 4, (rank + 2) % 4}, dsts[2] = {(rank + 1) % 4, (rank + 2) % 4};
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, MPI_UNWEIGHTED, 2, dsts, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg);
    int sv[5] = {rank, rank, rank, rank, rank * 10}, rv[6] = {-1, -1, -1, -1, -1, -1};
    int sc[2] = {rank + 1, 1}, sd[2] = {0, 4};
    int rc[2] = {(rank + 3) % 4 + 1, 1}, rd[2] = {0, 5};
    MPI_Neighbor_alltoallv(sv, sc, sd, MPI_INT, rv, rc, rd, MPI_INT, dg);
    int from1 = (rank + 3) % 4, from2 = (rank + 2) % 4;
    CHECK(rv[0] == from1 && rv[from1] == from1 && rv[5] == 10 * from2, "Neighbor_alltoallv graph %d %d", rv[0], rv[5]);
    /* Neighbor_alltoallw on the ring: an int left, a double right. */
    char sb[16], rb[16];
    int wc[2] = {1, 1};
    MPI_Aint wd[2] = {0, 8};
    MPI_Datatype wt[2] = {MPI_INT, MPI_DOUBLE}, rt[2] = {MPI_DOUBLE, MPI_INT};
    int iv = rank;
    double dv = rank + 0.25;
    memcpy(sb, &iv, sizeof iv);
    memcpy(sb + 8, &dv, sizeof dv);
    MPI_Neighbor_alltoallw(sb, wc, wd, wt, rb, wc, wd, rt, ring);
    double from_left;
    int from_right;
    memcpy(&from_left, rb, sizeof from_left);
    memcpy(&from_right, rb + 8, sizeof from_right);
    CHECK(from_left == (rank + 3) % 4 + 0.25 && from_right == (rank + 1) % 4, "Neighbor_alltoallw %g %d", from_left, from_right);
    MPI_Comm_free(&dg);
    MPI_Comm_free(&torus);
    MPI_Comm_free(&grid);
    MPI_Comm_free(&ring);
}

static void on_intercomm(void) {
    MPI_Comm local, ic;
    int in_a = rank % 2 == 0;
    MPI_Comm_split(MPI_COMM_WORLD, in_a, rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, in_a ? 1 : 0, 5, &ic);
    int lr;
    MPI_Comm_rank(local, &lr);
    MPI_Request r;
    /* Ibcast from A's rank 0 (world 0) to B. */
    int b = in_a ? (lr == 0 ? 77 : -1) : -1;
    MPI_Ibcast(&b, 1, MPI_INT, in_a ? (lr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0, ic, &r);
    wait1(&r);
    CHECK(in_a ? b == (lr == 0 ? 77 : -1) : b == 77, "inter Ibcast %d", b);
    /* Iallreduce: the remote group's sum of world ranks. */
    int sum = -1;
    MPI_Iallreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ic, &r);
    wait1(&r);
    CHECK(sum == (in_a ? 4 : 2), "inter Iallreduce %d", sum);
    /* Iallgather: the remote world ranks. */
    int all[2] = {-1, -1};
    MPI_Iallgather(&rank, 1, MPI_INT, all, 1, MPI_INT, ic, &r);
    wait1(&r);
    CHECK(all[0] == (in_a ? 1 : 0) && all[1] == (in_a ? 3 : 2), "inter Iallgather %d %d", all[0], all[1]);
    /* Ireduce to B's rank 1 (world 3). */
    int red = -1;
    MPI_Ireduce(&rank, &red, 1, MPI_INT, MPI_SUM, in_a ? 1 : (lr == 1 ? MPI_ROOT : MPI_PROC_NULL), ic, &r);
    wait1(&r);
    if (!in_a && lr == 1) CHECK(red == 2, "inter Ireduce %d", red);
    /* Ireduce_scatter_block: the remote group's sum of [w, 10w], one each. */
    int rsv[2] = {rank, 10 * rank}, rsb = -1;
    MPI_Ireduce_scatter_block(rsv, &rsb, 1, MPI_INT, MPI_SUM, ic, &r);
    wait1(&r);
    int other = in_a ? 4 : 2;
    CHECK(rsb == (lr == 0 ? other : 10 * other), "inter Ireduce_scatter_block %d", rsb);
    /* Ireduce_scatter: both elements of the remote group's sum to local
       rank 1, none to rank 0. */
    int rsc[2] = {0, 2}, rsv2[2] = {-1, -1};
    MPI_Ireduce_scatter(rsv, rsv2, rsc, MPI_INT, MPI_SUM, ic, &r);
    wait1(&r);
    if (lr == 1) CHECK(rsv2[0] == other && rsv2[1] == 10 * other, "inter Ireduce_scatter %d %d", rsv2[0], rsv2[1]);
    else CHECK(rsv2[0] == -1, "inter Ireduce_scatter wrote an empty block");
    /* An intercommunicator's idup keeps both groups. */
    MPI_Comm icd;
    MPI_Comm_idup(ic, &icd, &r);
    wait1(&r);
    int flag = 0, rsize = 0, back = -1;
    MPI_Comm_test_inter(icd, &flag);
    MPI_Comm_remote_size(icd, &rsize);
    MPI_Sendrecv(&rank, 1, MPI_INT, lr, 8, &back, 1, MPI_INT, lr, 8, icd, MPI_STATUS_IGNORE);
    CHECK(flag && rsize == 2 && back == (in_a ? rank + 1 : rank - 1), "inter Comm_idup %d", back);
    MPI_Comm_free(&icd);
    MPI_Ibarrier(ic, &r);
    wait1(&r);
    MPI_Comm_free(&ic);
    MPI_Comm_free(&local);
}

static void idup_and_errors(void) {
    MPI_Comm d;
    MPI_Request r;
    MPI_Comm_idup(MPI_COMM_WORLD, &d, &r);
    wait1(&r);
    int n = 0, cmp = -1;
    MPI_Comm_size(d, &n);
    MPI_Comm_compare(d, MPI_COMM_WORLD, &cmp);
    CHECK(n == size && cmp == MPI_CONGRUENT, "Comm_idup");
    /* Comm_idup never waits for the other ranks: rank 0 duplicates last,
       after a synchronous send from every other rank, which duplicated
       first; then a duplicate of that duplicate (which agrees, as dup). */
    MPI_Comm d2, d3;
    MPI_Request r2;
    int token = rank;
    if (rank == 0) {
        for (int i = 1; i < size; i++) MPI_Recv(&token, 1, MPI_INT, i, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Comm_idup(MPI_COMM_WORLD, &d2, &r2);
    } else {
        MPI_Comm_idup(MPI_COMM_WORLD, &d2, &r2);
        MPI_Ssend(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    }
    wait1(&r2);
    MPI_Comm_idup(d2, &d3, &r2);
    wait1(&r2);
    int t2 = 0, t3 = 0;
    MPI_Allreduce(&rank, &t2, 1, MPI_INT, MPI_SUM, d2);
    MPI_Allreduce(&rank, &t3, 1, MPI_INT, MPI_SUM, d3);
    CHECK(t2 == 6 && t3 == 6, "Comm_idup while others wait %d %d", t2, t3);
    MPI_Comm_free(&d3);
    MPI_Comm_free(&d2);
    /* Duplicates of duplicates, made in another order at odd ranks. */
    MPI_Comm a1, a2, b1, b2;
    MPI_Request q[2];
    MPI_Comm_idup(MPI_COMM_WORLD, &a1, &q[0]);
    MPI_Comm_idup(MPI_COMM_WORLD, &a2, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    if (rank % 2 == 0) {
        MPI_Comm_idup(a1, &b1, &q[0]);
        MPI_Comm_idup(a2, &b2, &q[1]);
    } else {
        MPI_Comm_idup(a2, &b2, &q[0]);
        MPI_Comm_idup(a1, &b1, &q[1]);
    }
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    int s1 = 0, s2 = 0;
    MPI_Allreduce(&rank, &s1, 1, MPI_INT, MPI_SUM, b1);
    MPI_Allreduce(&rank, &s2, 1, MPI_INT, MPI_MAX, b2);
    CHECK(s1 == 6 && s2 == 3, "idups of idups in different orders %d %d", s1, s2);
    MPI_Comm_free(&b1);
    MPI_Comm_free(&b2);
    MPI_Comm_free(&a1);
    MPI_Comm_free(&a2);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    int x = rank, y;
    MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, d, &r);
    int rc = MPI_Request_free(&r);
    CHECK(rc != MPI_SUCCESS && r != MPI_REQUEST_NULL, "Request_free of a collective in flight is refused");
    rc = MPI_Cancel(&r);
    CHECK(rc != MPI_SUCCESS, "Cancel of a collective is refused");
    wait1(&r);
    CHECK(y == 6, "the collective still completes %d", y);
    /* The same for one straight between the program's buffers. */
    int a4[4], b4[4] = {0};
    for (int i = 0; i < 4; i++) a4[i] = rank * 10 + i;
    MPI_Ialltoall(a4, 1, MPI_INT, b4, 1, MPI_INT, d, &r);
    rc = MPI_Request_free(&r);
    CHECK(rc != MPI_SUCCESS && r != MPI_REQUEST_NULL, "Request_free of an Ialltoall in flight is refused");
    rc = MPI_Cancel(&r);
    CHECK(rc != MPI_SUCCESS, "Cancel of an Ialltoall is refused");
    wait1(&r);
    CHECK(b4[2] == 20 + rank, "the Ialltoall still completes %d", b4[2]);
    /* Blocks of one int sent where two are expected: an error, once
       every transfer is done (nothing is left to match a later call). */
    int b8[8];
    rc = MPI_Ialltoall(a4, 1, MPI_INT, b8, 2, MPI_INT, d, &r);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(rc != MPI_SUCCESS, "Ialltoall of blocks of another size is refused");
    CHECK(r == MPI_REQUEST_NULL, "the refused Ialltoall's request is freed");
    rc = MPI_Iallgather(a4, 1, MPI_INT, b8, 2, MPI_INT, d, &r);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(rc != MPI_SUCCESS && r == MPI_REQUEST_NULL, "Iallgather of blocks of another size is refused");
    MPI_Ialltoall(a4, 1, MPI_INT, b4, 1, MPI_INT, d, &r);
    wait1(&r);
    CHECK(b4[3] == 30 + rank, "an Ialltoall after the refused ones %d", b4[3]);
    /* Completed, as MPI_Request_get_status saw: it may be freed. */
    MPI_Ialltoall(a4, 1, MPI_INT, b4, 1, MPI_INT, d, &r);
    int done = 0;
    while (!done) MPI_Request_get_status(r, &done, MPI_STATUS_IGNORE);
    rc = MPI_Request_free(&r);
    CHECK(rc == MPI_SUCCESS && r == MPI_REQUEST_NULL, "Request_free of a completed Ialltoall");
    int cls = -1;
    rc = MPI_Ibcast(&x, 1, MPI_INT, 9, d, &r);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ROOT, "Ibcast to rank 9: class %d", cls);
    int g4[4];
    rc = MPI_Igather(MPI_IN_PLACE, 1, MPI_INT, g4, 1, MPI_INT, (rank + 1) % size, d, &r);
    CHECK(rc != MPI_SUCCESS, "MPI_IN_PLACE at a non-root of Igather is refused");
    /* (The root's Igather then waits for the others' blocks: complete it.) */
    if (rc == MPI_SUCCESS) wait1(&r);
    MPI_Comm_free(&d);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        if (rank == 0) printf("FAIL: run on 4 ranks\n");
        MPI_Finalize();
        return 1;
    }
    rooted();
    everyone();
    many_in_flight();
    persistent();
    neighbourhood();
    on_intercomm();
    idup_and_errors();
    int all_failed = 0;
    MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all_failed == 0) printf("nbc ok %d\n", checks);
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
