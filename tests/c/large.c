/* MPI 4.0's large-count calls (the _c functions): point to point,
   collectives (v ones included), a user operation made by
   MPI_Op_create_c, packing, one-sided operations, buffered sends, and
   datatypes built and queried with counts past 2^31-1 (no memory
   needed for those). With the argument "huge", ranks 0 and 1 also
   exchange one message of 2^31 + 8 bytes (4 GiB of memory each). Rank 0
   prints "large ok <checks>" or FAIL lines. Needs at least 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void sum_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
    (void)dt;
    for (MPI_Count i = 0; i < *len; i++) ((long *)inout)[i] += 10 * ((long *)in)[i];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    size_t un = (size_t)(n > 0 ? n : 1);

    /* Point to point. */
    long out[8], in[8];
    for (int i = 0; i < 8; i++) out[i] = 100 * rank + i;
    MPI_Status st;
    MPI_Sendrecv_c(out, 8, MPI_LONG, right, 1, in, 8, MPI_LONG, left, 1, MPI_COMM_WORLD, &st);
    MPI_Count got = -1;
    MPI_Get_count_c(&st, MPI_LONG, &got);
    CHECK(got == 8 && in[7] == 100 * left + 7, "Sendrecv_c: %lld, in[7] %ld", (long long)got, in[7]);
    MPI_Get_elements_c(&st, MPI_LONG, &got);
    CHECK(got == 8, "Get_elements_c %lld", (long long)got);
    MPI_Request rq[2];
    MPI_Irecv_c(in, 8, MPI_LONG, left, 2, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend_c(out, 4, MPI_LONG, right, 2, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(in[3] == 100 * left + 3, "Isend_c/Irecv_c: %ld", in[3]);
    char bsend_buf[1024];
    MPI_Buffer_attach_c(bsend_buf, sizeof bsend_buf);
    MPI_Bsend_c(out, 2, MPI_LONG, right, 3, MPI_COMM_WORLD);
    MPI_Recv_c(in, 8, MPI_LONG, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    void *detached;
    MPI_Count detached_size = -1;
    MPI_Buffer_detach_c(&detached, &detached_size);
    CHECK(detached == bsend_buf && detached_size == sizeof bsend_buf, "Buffer_detach_c: %lld", (long long)detached_size);

    /* Collectives, and a user operation counted in MPI_Count. */
    long one = rank + 1, total = 0;
    MPI_Allreduce_c(&one, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == (long)n * (n + 1) / 2, "Allreduce_c: %ld", total);
    MPI_Op op;
    MPI_Op_create_c(sum_c, 0, &op);
    long folded[2] = {0, 0}, mine[2] = {1, rank};
    MPI_Reduce_c(mine, folded, 2, MPI_LONG, op, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        /* in ⊕ inout = 10 in + inout, folded in rank order. */
        long want = 1;
        for (int r = 1; r < n; r++) want = 10 * want + 1;
        CHECK(folded[0] == want, "Reduce_c with Op_create_c: %ld, want %ld", folded[0], want);
    }
    MPI_Op_free(&op);
    long *all = calloc(2 * un, sizeof(long));
    MPI_Count *counts = calloc(un, sizeof(MPI_Count));
    MPI_Aint *displs = calloc(un, sizeof(MPI_Aint));
    for (int r = 0; r < n; r++) {
        counts[r] = r % 2 + 1;
        displs[r] = 2 * r;
    }
    MPI_Allgatherv_c(mine, rank % 2 + 1, MPI_LONG, all, counts, displs, MPI_LONG, MPI_COMM_WORLD);
    for (int r = 0; r < n; r++)
        CHECK(all[2 * r] == 1 && (r % 2 == 0 || all[2 * r + 1] == r), "Allgatherv_c from %d: %ld %ld", r, all[2 * r], all[2 * r + 1]);
    long *to = calloc(un, sizeof(long)), *from = calloc(un, sizeof(long));
    for (int r = 0; r < n; r++) {
        to[r] = 1000 * rank + r;
        counts[r] = 1;
        displs[r] = r;
    }
    MPI_Alltoallv_c(to, counts, displs, MPI_LONG, from, counts, displs, MPI_LONG, MPI_COMM_WORLD);
    for (int r = 0; r < n; r++) CHECK(from[r] == 1000 * r + rank, "Alltoallv_c from %d: %ld", r, from[r]);
    MPI_Request brq;
    long word = rank == 0 ? 4242 : 0;
    MPI_Ibcast_c(&word, 1, MPI_LONG, 0, MPI_COMM_WORLD, &brq);
    MPI_Wait(&brq, MPI_STATUS_IGNORE);
    CHECK(word == 4242, "Ibcast_c: %ld", word);
    free(to);
    free(from);
    free(all);

    /* A persistent Gatherv_c started twice (its int counts live as long
       as the request); non-roots pass no arrays. */
    long gathered[64];
    MPI_Request grq;
    for (int r = 0; r < n; r++) {
        counts[r] = 1;
        displs[r] = r;
    }
    MPI_Gatherv_init_c(&one, 1, MPI_LONG, gathered, rank == 0 ? counts : NULL, rank == 0 ? displs : NULL, MPI_LONG, 0,
                       MPI_COMM_WORLD, MPI_INFO_NULL, &grq);
    for (int round = 0; round < 2; round++) {
        one = 10 * round + rank;
        MPI_Start(&grq);
        MPI_Wait(&grq, MPI_STATUS_IGNORE);
        if (rank == 0)
            for (int r = 0; r < n && r < 64; r++) CHECK(gathered[r] == 10 * round + r, "Gatherv_init_c round %d: %ld", round, gathered[r]);
    }
    MPI_Request_free(&grq);
    /* Allgather_c in place: the send count and type are not looked at. */
    for (int r = 0; r < n && r < 64; r++) gathered[r] = r == rank ? 7 * r : -1;
    MPI_Allgather_c(MPI_IN_PLACE, (MPI_Count)1 << 40, MPI_DATATYPE_NULL, gathered, 1, MPI_LONG, MPI_COMM_WORLD);
    for (int r = 0; r < n && r < 64; r++) CHECK(gathered[r] == 7 * r, "Allgather_c in place: %ld", gathered[r]);

    /* A count past an int in an array of counts is refused, naming the
       call. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    counts[0] = (MPI_Count)1 << 32;
    int class = -1;
    MPI_Error_class(MPI_Alltoallv_c(out, counts, displs, MPI_LONG, in, counts, displs, MPI_LONG, MPI_COMM_WORLD), &class);
    CHECK(class == MPI_ERR_COUNT, "Alltoallv_c with a count past 2^31: class %d", class);
    /* So is a count past an int of a non-contiguous type. */
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_LONG, &every_other);
    MPI_Type_commit(&every_other);
    MPI_Error_class(MPI_Send_c(out, (MPI_Count)1 << 31, every_other, right, 4, MPI_COMM_WORLD), &class);
    CHECK(class == MPI_ERR_COUNT, "Send_c of 2^31 non-contiguous elements: class %d", class);
    MPI_Type_free(&every_other);
    /* A user operation cannot be shown a count past an int. */
    MPI_Op_create_c(sum_c, 1, &op);
    MPI_Error_class(MPI_Allreduce_c(out, in, (MPI_Count)1 << 31, MPI_LONG, op, MPI_COMM_WORLD), &class);
    CHECK(class == MPI_ERR_COUNT, "a user operation over 2^31 elements: class %d", class);
    MPI_Op_free(&op);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    free(counts);
    free(displs);

    /* Packing with MPI_Count positions. */
    char packed[64];
    MPI_Count pos = 0, size = -1;
    MPI_Pack_size_c(3, MPI_LONG, MPI_COMM_WORLD, &size);
    MPI_Pack_c(out, 3, MPI_LONG, packed, sizeof packed, &pos, MPI_COMM_WORLD);
    CHECK(size == 24 && pos == 24, "Pack_c: size %lld, position %lld", (long long)size, (long long)pos);
    long back[3] = {0, 0, 0};
    pos = 0;
    MPI_Unpack_c(packed, 24, &pos, back, 3, MPI_LONG, MPI_COMM_WORLD);
    CHECK(back[2] == out[2] && pos == 24, "Unpack_c: %ld", back[2]);
    pos = 0;
    MPI_Pack_external_c("external32", out, 1, MPI_INT, packed, sizeof packed, &pos);
    CHECK(pos == 4, "Pack_external_c: position %lld", (long long)pos);

    /* One-sided. */
    long *base;
    MPI_Win win;
    MPI_Win_allocate_c(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_fence(0, win);
    MPI_Put_c(out, 2, MPI_LONG, right, 1, 2, MPI_LONG, win);
    MPI_Win_fence(0, win);
    CHECK(base[1] == 100 * left && base[2] == 100 * left + 1, "Put_c: %ld %ld", base[1], base[2]);
    long fetched[2] = {0, 0};
    MPI_Get_c(fetched, 2, MPI_LONG, right, 1, 2, MPI_LONG, win);
    MPI_Win_fence(0, win);
    CHECK(fetched[0] == 100 * rank, "Get_c: %ld", fetched[0]);
    MPI_Win_free(&win);

    /* Datatypes past 2^31-1 elements (built and measured, never sent). */
    MPI_Datatype big, hidx;
    MPI_Count tsize = -1, lb = -1, extent = -1;
    MPI_Type_contiguous_c((MPI_Count)3 << 30, MPI_CHAR, &big);
    MPI_Type_size_c(big, &tsize);
    MPI_Type_get_extent_c(big, &lb, &extent);
    CHECK(tsize == (MPI_Count)3 << 30 && lb == 0 && extent == tsize, "Type_contiguous_c: size %lld extent %lld", (long long)tsize, (long long)extent);
    MPI_Count ni = -1, na = -1, nl = -1, nd = -1;
    int combiner = -1;
    MPI_Type_get_envelope_c(big, &ni, &na, &nl, &nd, &combiner);
    CHECK(combiner == MPI_COMBINER_CONTIGUOUS && ni == 0 && nl == 1 && nd == 1, "envelope_c: %lld ints, %lld large", (long long)ni, (long long)nl);
    MPI_Count large_count = 0;
    MPI_Datatype inner = MPI_DATATYPE_NULL;
    MPI_Type_get_contents_c(big, 0, 0, 1, 1, NULL, NULL, &large_count, &inner);
    CHECK(large_count == (MPI_Count)3 << 30 && inner == MPI_CHAR, "contents_c: %lld", (long long)large_count);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int ni32, na32, nd32;
    CHECK(MPI_Type_get_envelope(big, &ni32, &na32, &nd32, &combiner) != MPI_SUCCESS, "int envelope of a large type");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Count lens[3] = {1, 2, (MPI_Count)5 << 30}, at[3] = {0, 1, 3};
    MPI_Type_create_hindexed_c(3, lens, at, MPI_CHAR, &hidx);
    MPI_Type_get_true_extent_c(hidx, &lb, &extent);
    MPI_Type_size_c(hidx, &tsize);
    CHECK(tsize == 3 + ((MPI_Count)5 << 30) && lb == 0 && extent == tsize, "Type_create_hindexed_c: %lld", (long long)tsize);
    MPI_Type_free(&big);
    MPI_Type_free(&hidx);

    /* One message of 2^31 + 8 bytes. */
    if (argc > 1 && !strcmp(argv[1], "huge") && rank < 2) {
        MPI_Count bytes = ((MPI_Count)1 << 31) + 8;
        unsigned char *huge = malloc(bytes);
        CHECK(huge != NULL, "no memory for the huge message");
        if (huge && rank == 0) {
            memset(huge, 7, bytes);
            huge[bytes - 1] = 9;
            MPI_Send_c(huge, bytes, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
        } else if (huge) {
            memset(huge, 0, bytes);
            MPI_Recv_c(huge, bytes, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &st);
            MPI_Get_count_c(&st, MPI_BYTE, &got);
            CHECK(got == bytes && huge[0] == 7 && huge[bytes - 2] == 7 && huge[bytes - 1] == 9, "huge message: %lld bytes", (long long)got);
        }
        free(huge);
    }

    int failed_all = 0;
    MPI_Reduce(&failed, &failed_all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && failed_all == 0 && failed == 0) printf("large ok %d\n", checks);
    MPI_Finalize();
    return failed_all != 0;
}
