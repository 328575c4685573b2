/* Intercommunicators on 4 ranks: made with MPI_Intercomm_create between
   group A (world ranks 0, 2) and group B (world ranks 3, 1, in that
   order), then point-to-point across, every collective MPI defines on
   them, dup, split, create, merge, compare, and the errors of calls MPI
   defines on intracommunicators only. Every check that fails prints
   "FAIL <what>" and the program exits 1; rank 0 ends with
   "intercomm ok <checks>". Built with `vpml mpicc` or MPICH's mpicc.mpich. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static int size;
static int in_a;             /* member of group A */
static int lrank;            /* rank in the local group */
static int remote_world[2];  /* world rank of each remote rank */

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* World ranks of the remote group of `ic`, by remote rank. */
static void remote_ranks(MPI_Comm ic, int *out, int n) {
    MPI_Group remote, world;
    MPI_Comm_remote_group(ic, &remote);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int ranks[4] = {0, 1, 2, 3};
    MPI_Group_translate_ranks(remote, n, ranks, world, out);
    MPI_Group_free(&remote);
    MPI_Group_free(&world);
}

static MPI_Comm make(void) {
    MPI_Comm local, ic;
    /* B is ordered world 3 then 1. */
    MPI_Comm_split(MPI_COMM_WORLD, in_a, in_a ? rank : -rank, &local);
    MPI_Comm_rank(local, &lrank);
    int remote_leader = in_a ? 3 : 0;
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, remote_leader, 77, &ic);
    MPI_Comm_free(&local);
    int flag = 0, n = 0, rn = 0, r = -1;
    MPI_Comm_test_inter(ic, &flag);
    MPI_Comm_size(ic, &n);
    MPI_Comm_remote_size(ic, &rn);
    MPI_Comm_rank(ic, &r);
    CHECK(flag && n == 2 && rn == 2 && r == lrank, "shape %d %d %d %d", flag, n, rn, r);
    remote_ranks(ic, remote_world, 2);
    int want0 = in_a ? 3 : 0, want1 = in_a ? 1 : 2;
    CHECK(remote_world[0] == want0 && remote_world[1] == want1, "remote group %d %d",
          remote_world[0], remote_world[1]);
    MPI_Comm_test_inter(MPI_COMM_WORLD, &flag);
    CHECK(!flag, "Comm_test_inter on the world");
    return ic;
}

static void point_to_point(MPI_Comm ic) {
    /* To every remote rank r: my world rank * 10 + r. */
    int out[2], in;
    MPI_Request reqs[2];
    for (int r = 0; r < 2; r++) {
        out[r] = rank * 10 + r;
        MPI_Isend(&out[r], 1, MPI_INT, r, 5, ic, &reqs[r]);
    }
    int seen = 0;
    for (int k = 0; k < 2; k++) {
        MPI_Status st;
        MPI_Recv(&in, 1, MPI_INT, MPI_ANY_SOURCE, 5, ic, &st);
        CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < 2 &&
                  in == remote_world[st.MPI_SOURCE] * 10 + lrank,
              "Recv any source: %d from %d", in, st.MPI_SOURCE);
        seen |= 1 << st.MPI_SOURCE;
    }
    CHECK(seen == 3, "heard from both remote ranks");
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    /* Sendrecv with the remote rank of the same local rank. */
    int got = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, lrank, 6, &got, 1, MPI_INT, lrank, 6, ic, MPI_STATUS_IGNORE);
    CHECK(got == remote_world[lrank], "Sendrecv across: %d", got);
}

static void rooted(MPI_Comm ic) {
    /* Bcast from A's rank 1 (world 2). */
    int buf[3] = {0, 0, 0};
    int root = in_a ? (lrank == 1 ? MPI_ROOT : MPI_PROC_NULL) : 1;
    if (in_a && lrank == 1) buf[0] = 7, buf[1] = 8, buf[2] = 9;
    MPI_Bcast(buf, 3, MPI_INT, root, ic);
    if (!in_a)
        CHECK(buf[0] == 7 && buf[1] == 8 && buf[2] == 9, "Bcast %d %d %d", buf[0], buf[1], buf[2]);
    else if (lrank == 0)
        CHECK(buf[0] == 0, "Bcast left a non-root of the root's group alone");

    /* Bcast from B's rank 0 (world 3) of every other int (a vector type). */
    MPI_Datatype every_other;
    MPI_Type_vector(3, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int v[6] = {0, -1, 0, -1, 0, -1};
    root = in_a ? 0 : (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL);
    if (rank == 3) v[0] = 30, v[2] = 31, v[4] = 32;
    MPI_Bcast(v, 1, every_other, root, ic);
    if (in_a)
        CHECK(v[0] == 30 && v[2] == 31 && v[4] == 32 && v[1] == -1, "Bcast vector %d %d %d %d",
              v[0], v[2], v[4], v[1]);
    MPI_Type_free(&every_other);

    /* Reduce of B's (world + 1) to A's rank 0: 2 + 4. */
    int mine = rank + 1, sum = -1;
    root = in_a ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Reduce(&mine, &sum, 1, MPI_INT, MPI_SUM, root, ic);
    if (in_a && lrank == 0) CHECK(sum == 6, "Reduce %d", sum);
    if (in_a && lrank == 1) CHECK(sum == -1, "Reduce wrote at a non-root");
    /* The same with a user operation, to B's rank 1 (world 1): 1 + 3. */
    MPI_Op op;
    MPI_Op_create(user_sum, 1, &op);
    sum = -1;
    root = in_a ? 1 : (lrank == 1 ? MPI_ROOT : MPI_PROC_NULL);
    MPI_Reduce(&mine, &sum, 1, MPI_INT, op, root, ic);
    if (!in_a && lrank == 1) CHECK(sum == 4, "Reduce user op %d", sum);
    MPI_Op_free(&op);

    /* Gather of A's world ranks at B's rank 1. */
    int all[2] = {-1, -1};
    root = in_a ? 1 : (lrank == 1 ? MPI_ROOT : MPI_PROC_NULL);
    MPI_Gather(&rank, 1, MPI_INT, all, 1, MPI_INT, root, ic);
    if (!in_a && lrank == 1) CHECK(all[0] == 0 && all[1] == 2, "Gather %d %d", all[0], all[1]);
    /* Gatherv at A's rank 0: B's rank r sends r + 1 copies of its world rank,
       placed in reverse order. */
    int send3[2] = {rank, rank}, got3[3] = {-1, -1, -1};
    int counts[2] = {1, 2}, displs[2] = {2, 0};
    root = in_a ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Gatherv(send3, lrank + 1, MPI_INT, got3, counts, displs, MPI_INT, root, ic);
    if (in_a && lrank == 0)
        CHECK(got3[0] == 1 && got3[1] == 1 && got3[2] == 3, "Gatherv %d %d %d", got3[0], got3[1],
              got3[2]);

    /* Scatter from A's rank 0: B's rank r gets 100 + r. */
    int parts[2] = {100, 101}, part = -1;
    root = in_a ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    MPI_Scatter(parts, 1, MPI_INT, &part, 1, MPI_INT, root, ic);
    if (!in_a) CHECK(part == 100 + lrank, "Scatter %d", part);
    /* Scatterv from B's rank 1: A's rank r gets r + 1 ints from 200 + 10r. */
    int src[3] = {200, 210, 211}, two[2] = {-1, -1};
    int scounts[2] = {1, 2}, sdispls[2] = {0, 1};
    root = in_a ? 1 : (lrank == 1 ? MPI_ROOT : MPI_PROC_NULL);
    MPI_Scatterv(src, scounts, sdispls, MPI_INT, two, lrank + 1, MPI_INT, root, ic);
    if (in_a)
        CHECK(two[0] == 200 + 10 * lrank && (lrank == 0 || two[1] == 211), "Scatterv %d %d", two[0],
              two[1]);
}

static void all_to_all(MPI_Comm ic) {
    MPI_Barrier(ic);

    /* Allreduce: each group gets the sum over the other of (world + 1). */
    int mine[2] = {rank + 1, 10 * (rank + 1)}, sum[2] = {-1, -1};
    MPI_Allreduce(mine, sum, 2, MPI_INT, MPI_SUM, ic);
    int want = in_a ? 6 : 4;
    CHECK(sum[0] == want && sum[1] == 10 * want, "Allreduce %d %d", sum[0], sum[1]);
    MPI_Op op;
    MPI_Op_create(user_sum, 1, &op);
    MPI_Allreduce(mine, sum, 1, MPI_INT, op, ic);
    CHECK(sum[0] == want, "Allreduce user op %d", sum[0]);
    MPI_Op_free(&op);

    /* Allgather: the remote world ranks, by remote rank. */
    int all[2] = {-1, -1};
    MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, ic);
    CHECK(all[0] == remote_world[0] && all[1] == remote_world[1], "Allgather %d %d", all[0],
          all[1]);
    /* Allgatherv: remote rank r sends r + 1 copies of its world rank. */
    int send3[2] = {rank, rank}, got3[3] = {-1, -1, -1};
    int counts[2] = {1, 2}, displs[2] = {0, 1};
    MPI_Allgatherv(send3, lrank + 1, MPI_INT, got3, counts, displs, MPI_INT, ic);
    CHECK(got3[0] == remote_world[0] && got3[1] == remote_world[1] && got3[2] == remote_world[1],
          "Allgatherv %d %d %d", got3[0], got3[1], got3[2]);

    /* Alltoall: to remote rank r, world * 10 + r. */
    int out[2] = {rank * 10, rank * 10 + 1}, in[2] = {-1, -1};
    MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, ic);
    CHECK(in[0] == remote_world[0] * 10 + lrank && in[1] == remote_world[1] * 10 + lrank,
          "Alltoall %d %d", in[0], in[1]);
    /* Alltoallv: to remote rank r, r + 1 ints; from it, lrank + 1. */
    int vout[3] = {rank, rank, rank}, vin[4] = {-1, -1, -1, -1};
    int sc[2] = {1, 2}, sd[2] = {0, 1};
    int rc[2] = {lrank + 1, lrank + 1}, rd[2] = {0, 2};
    MPI_Alltoallv(vout, sc, sd, MPI_INT, vin, rc, rd, MPI_INT, ic);
    CHECK(vin[0] == remote_world[0] && vin[2] == remote_world[1] &&
              (lrank == 0 || (vin[1] == remote_world[0] && vin[3] == remote_world[1])),
          "Alltoallv %d %d %d %d", vin[0], vin[1], vin[2], vin[3]);

    /* Reduce_scatter_block: the other group's sum of [w, 2w], one each. */
    int vec[2] = {rank, 2 * rank}, part = -1;
    MPI_Reduce_scatter_block(vec, &part, 1, MPI_INT, MPI_SUM, ic);
    int other = in_a ? 4 : 2; /* sum of the remote world ranks */
    CHECK(part == other * (lrank + 1), "Reduce_scatter_block %d", part);
    /* Reduce_scatter: all 2 elements to local rank 1, none to rank 0. */
    int rcounts[2] = {0, 2}, both[2] = {-1, -1};
    MPI_Reduce_scatter(vec, both, rcounts, MPI_INT, MPI_SUM, ic);
    if (lrank == 1) CHECK(both[0] == other && both[1] == 2 * other, "Reduce_scatter %d %d", both[0], both[1]);
    else CHECK(both[0] == -1, "Reduce_scatter wrote an empty block");
}

static void derived(MPI_Comm ic) {
    /* dup: same groups, its own messages. */
    MPI_Comm dup;
    MPI_Comm_dup(ic, &dup);
    int flag = 0, cmp = -1;
    MPI_Comm_test_inter(dup, &flag);
    MPI_Comm_compare(ic, dup, &cmp);
    CHECK(flag && cmp == MPI_CONGRUENT, "Comm_dup: inter %d compare %d", flag, cmp);
    MPI_Comm_compare(ic, MPI_COMM_WORLD, &cmp);
    CHECK(cmp == MPI_UNEQUAL, "compare with the world %d", cmp);
    int a = 1000 + rank, b = 2000 + rank, ga = -1, gb = -1;
    MPI_Request r[2];
    MPI_Isend(&a, 1, MPI_INT, lrank, 9, ic, &r[0]);
    MPI_Isend(&b, 1, MPI_INT, lrank, 9, dup, &r[1]);
    MPI_Recv(&gb, 1, MPI_INT, lrank, 9, dup, MPI_STATUS_IGNORE);
    MPI_Recv(&ga, 1, MPI_INT, lrank, 9, ic, MPI_STATUS_IGNORE);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    CHECK(ga == 1000 + remote_world[lrank] && gb == 2000 + remote_world[lrank],
          "dup keeps messages apart %d %d", ga, gb);
    MPI_Comm_free(&dup);

    /* split by local rank: two intercommunicators of one rank each side. */
    MPI_Comm half;
    MPI_Comm_split(ic, lrank, 0, &half);
    int n = 0, rn = 0, partner = -1;
    MPI_Comm_size(half, &n);
    MPI_Comm_remote_size(half, &rn);
    remote_ranks(half, &partner, 1);
    CHECK(n == 1 && rn == 1 && partner == remote_world[lrank], "split: %d %d partner %d", n, rn,
          partner);
    int got = -1;
    MPI_Sendrecv(&rank, 1, MPI_INT, 0, 3, &got, 1, MPI_INT, 0, 3, half, MPI_STATUS_IGNORE);
    CHECK(got == partner, "split: Sendrecv %d", got);
    MPI_Comm_free(&half);
    /* A color no remote process passes gives MPI_COMM_NULL. */
    MPI_Comm_split(ic, in_a ? 0 : 1, 0, &half);
    CHECK(half == MPI_COMM_NULL, "split with no remote match");

    /* create: each group keeps its local rank 0. */
    MPI_Group local, first;
    MPI_Comm_group(ic, &local);
    int zero = 0;
    MPI_Group_incl(local, 1, &zero, &first);
    MPI_Comm sub;
    MPI_Comm_create(ic, first, &sub);
    if (lrank == 0) {
        int sn = 0, srn = 0, sp = -1;
        MPI_Comm_size(sub, &sn);
        MPI_Comm_remote_size(sub, &srn);
        remote_ranks(sub, &sp, 1);
        CHECK(sub != MPI_COMM_NULL && sn == 1 && srn == 1 && sp == remote_world[0], "Comm_create %d %d %d",
              sn, srn, sp);
        MPI_Comm_free(&sub);
    } else {
        CHECK(sub == MPI_COMM_NULL, "Comm_create outside the group");
    }
    MPI_Group_free(&first);
    MPI_Group_free(&local);

    /* merge: A (high = 0) first, then B. */
    MPI_Comm all;
    MPI_Intercomm_merge(ic, !in_a, &all);
    int mr = -1, ms = 0;
    MPI_Comm_rank(all, &mr);
    MPI_Comm_size(all, &ms);
    CHECK(ms == 4 && mr == (in_a ? 0 : 2) + lrank, "merge: rank %d of %d", mr, ms);
    MPI_Comm_test_inter(all, &flag);
    int total = 0;
    MPI_Allreduce(&rank, &total, 1, MPI_INT, MPI_SUM, all);
    CHECK(!flag && total == 6, "merge: intra %d, Allreduce %d", flag, total);
    MPI_Comm_free(&all);
    /* Both groups asking for the same side: the group of world rank 0 first. */
    MPI_Intercomm_merge(ic, 1, &all);
    MPI_Comm_rank(all, &mr);
    CHECK(mr == (in_a ? 0 : 2) + lrank, "merge, tie: rank %d", mr);
    MPI_Comm_free(&all);
}

static void errors(MPI_Comm ic) {
    MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN);
    int x = 1, y = 0, cls = -1;
    int rc = MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, ic);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_COMM, "Scan on an intercommunicator: class %d", cls);
    MPI_Op op;
    MPI_Op_create(user_sum, 1, &op);
    rc = MPI_Exscan(&x, &y, 1, MPI_INT, op, ic);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_COMM, "Exscan, user op, on an intercommunicator: class %d", cls);
    MPI_Op_free(&op);
    rc = MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_INT, MPI_SUM, ic);
    CHECK(rc != MPI_SUCCESS, "Allreduce in place on an intercommunicator");
    MPI_Comm cart;
    int dims[1] = {2}, periods[1] = {0};
    rc = MPI_Cart_create(ic, 1, dims, periods, 0, &cart);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_COMM, "Cart_create on an intercommunicator: class %d", cls);
    rc = MPI_Bcast(&x, 1, MPI_INT, 5, ic);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_ROOT, "Bcast to remote rank 5: class %d", cls);
    /* A leader without a peer communicator fails the call at every
       member of its group, not at the leader alone. */
    MPI_Comm local, none;
    MPI_Comm_split(MPI_COMM_WORLD, in_a, 0, &local);
    MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
    rc = MPI_Intercomm_create(local, 0, MPI_COMM_NULL, in_a ? 3 : 0, 78, &none);
    CHECK(rc != MPI_SUCCESS, "Intercomm_create with no peer communicator");
    MPI_Comm_free(&local);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Comm_remote_size(MPI_COMM_WORLD, &x);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_COMM, "Comm_remote_size on the world: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
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
    in_a = rank % 2 == 0;
    MPI_Comm ic = make();
    point_to_point(ic);
    rooted(ic);
    all_to_all(ic);
    derived(ic);
    errors(ic);
    MPI_Comm_free(&ic);
    int all_failed = 0;
    MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all_failed == 0) printf("intercomm ok %d\n", checks);
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
