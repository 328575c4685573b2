/* Partitioned communication (MPI 4.0): MPI_Psend_init / MPI_Precv_init,
   MPI_Pready, _range and _list in any order, MPI_Parrived, restarted
   requests, sides cut into different numbers of partitions, a derived
   datatype, MPI_PROC_NULL, and the errors of misuse. Each rank sends to
   its right neighbour and receives from its left one; what a rank sends
   next depends on how many MPI_Parrived calls it made before the data
   arrived (a non-deterministic outcome a recovery must replay), and at
   the end each rank checks that what its left neighbour says it sent is
   what it received. Rank 0 prints "part ok <checks>" or FAIL lines. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define ITERS 20
#define TOTAL 48

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;

    /* 8 send partitions of 6 doubles, received as 3 of 16. */
    double out[TOTAL], in[TOTAL];
    MPI_Request send, recv;
    MPI_Psend_init(out, 8, TOTAL / 8, MPI_DOUBLE, right, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
    MPI_Precv_init(in, 3, TOTAL / 3, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &recv);
    double carry = 0, sent_sum = 0, recv_sum = 0;
    for (int it = 0; it < ITERS; it++) {
        MPI_Start(&recv);
        MPI_Start(&send);
        for (int i = 0; i < TOTAL; i++) {
            out[i] = 1000 * rank + 10 * it + i + carry;
            sent_sum += out[i];
        }
        /* Every other partition first, then a list, then a range. */
        for (int p = 0; p < 8; p += 2) {
            int flag = 1;
            MPI_Test(&send, &flag, MPI_STATUS_IGNORE);
            CHECK(!flag, "iteration %d: a send with partitions unmarked tested complete", it);
            MPI_Pready(p, send);
        }
        int rest[3] = {7, 3, 5};
        MPI_Pready_list(3, rest, send);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        CHECK(MPI_Pready(2, send) != MPI_SUCCESS, "a partition marked twice");
        CHECK(MPI_Pready(8, send) != MPI_SUCCESS, "partition 8 of 8");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        MPI_Pready_range(1, 1, send);
        /* Poll partition 2 until it is in; count the polls. */
        int flag = 0, tries = 0;
        while (!flag) {
            MPI_Parrived(recv, 2, &flag);
            tries++;
        }
        for (int p = 0; p < 3; p++) {
            MPI_Parrived(recv, p, &flag);
            CHECK(flag, "iteration %d: partition %d not in after partition 2", it, p);
        }
        MPI_Status st;
        MPI_Wait(&recv, &st);
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 5, "iteration %d: status from %d tag %d", it, st.MPI_SOURCE, st.MPI_TAG);
        int count = -1;
        MPI_Get_count(&st, MPI_DOUBLE, &count);
        CHECK(count == TOTAL, "iteration %d: %d doubles", it, count);
        MPI_Wait(&send, MPI_STATUS_IGNORE);
        /* The left neighbour's carry is what it sent minus its formula. */
        double theirs = in[0] - (1000 * left + 10 * it);
        for (int i = 0; i < TOTAL; i++) recv_sum += in[i];
        for (int i = 0; i < TOTAL; i++)
            CHECK(in[i] == 1000 * left + 10 * it + i + theirs, "iteration %d: in[%d] = %g", it, i, in[i]);
        carry = theirs + (tries % 3);
    }
    MPI_Request_free(&send);
    MPI_Request_free(&recv);

    /* Partitions of a derived datatype (ints 0 and 2 of each 3), and a receive
       into plain ints; a partitioned send does not match an ordinary
       receive of the same tag, which gets the ordinary send. */
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int spread[16], packed[8], plain = -1, mark = 77 + rank;
    for (int i = 0; i < 16; i++) spread[i] = 100 * rank + i;
    MPI_Psend_init(spread, 4, 1, every_other, right, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
    MPI_Type_free(&every_other);
    MPI_Precv_init(packed, 2, 4, MPI_INT, left, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &recv);
    MPI_Request pair[2] = {send, recv};
    MPI_Startall(2, pair);
    MPI_Request ordinary;
    MPI_Irecv(&plain, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &ordinary);
    MPI_Send(&mark, 1, MPI_INT, right, 9, MPI_COMM_WORLD);
    for (int p = 3; p >= 0; p--) MPI_Pready(p, send);
    MPI_Waitall(2, pair, MPI_STATUSES_IGNORE);
    MPI_Wait(&ordinary, MPI_STATUS_IGNORE);
    for (int i = 0; i < 8; i++) CHECK(packed[i] == 100 * left + 3 * (i / 2) + 2 * (i % 2), "derived: packed[%d] = %d", i, packed[i]);
    CHECK(plain == 77 + left, "the ordinary receive got %d", plain);
    MPI_Request_free(&pair[0]);
    MPI_Request_free(&pair[1]);

    /* MPI_PROC_NULL: complete once started (and marked). */
    MPI_Psend_init(out, 2, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
    MPI_Precv_init(in, 2, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &recv);
    MPI_Start(&send);
    MPI_Start(&recv);
    MPI_Pready_range(0, 1, send);
    int flag = 0;
    MPI_Parrived(recv, 1, &flag);
    CHECK(flag, "MPI_PROC_NULL partition not arrived");
    MPI_Status st;
    MPI_Wait(&recv, &st);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "MPI_PROC_NULL status source %d", st.MPI_SOURCE);
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    MPI_Request_free(&send);
    MPI_Request_free(&recv);

    /* Misuse: wildcards, no partitions, waiting alone on unmarked
       partitions. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request bad;
    CHECK(MPI_Precv_init(in, 1, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad) != MPI_SUCCESS, "ANY_SOURCE accepted");
    CHECK(MPI_Psend_init(out, 0, 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &bad) != MPI_SUCCESS, "0 partitions accepted");
    MPI_Psend_init(out, 2, 1, MPI_DOUBLE, right, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
    MPI_Precv_init(in, 1, 2, MPI_DOUBLE, left, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &recv);
    MPI_Start(&send);
    MPI_Start(&recv);
    MPI_Pready(0, send);
    int class = -1;
    MPI_Error_class(MPI_Wait(&send, MPI_STATUS_IGNORE), &class);
    CHECK(class == MPI_ERR_REQUEST, "a lone wait on an unmarked partition: class %d", class);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Pready(1, send);
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    MPI_Wait(&recv, MPI_STATUS_IGNORE);
    MPI_Request_free(&send);
    MPI_Request_free(&recv);

    /* Two requests on one channel match in the order they were made,
       whichever is marked first; Request_get_status and Waitany see an
       unmarked send as pending; an invalid range marks nothing; a started
       send cannot be started again. */
    double out2[4], in2[4];
    for (int i = 0; i < 4; i++) {
        out[i] = 1000 + 100 * rank + i;
        out2[i] = -(100 * rank + i + 1);
    }
    MPI_Request twin, recv2;
    MPI_Psend_init(out, 4, 1, MPI_DOUBLE, right, 15, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
    MPI_Psend_init(out2, 4, 1, MPI_DOUBLE, right, 15, MPI_COMM_WORLD, MPI_INFO_NULL, &twin);
    MPI_Precv_init(in, 2, 2, MPI_DOUBLE, left, 15, MPI_COMM_WORLD, MPI_INFO_NULL, &recv);
    MPI_Precv_init(in2, 2, 2, MPI_DOUBLE, left, 15, MPI_COMM_WORLD, MPI_INFO_NULL, &recv2);
    MPI_Start(&recv2);
    MPI_Start(&recv);
    MPI_Start(&send);
    MPI_Start(&twin);
    flag = 1;
    MPI_Request_get_status(send, &flag, MPI_STATUS_IGNORE);
    CHECK(!flag, "Request_get_status of an unmarked send");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK(MPI_Start(&send) != MPI_SUCCESS, "a started send started again");
    CHECK(MPI_Pready_range(2, 4, send) != MPI_SUCCESS, "Pready_range past the partitions");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    int word = rank, got_word = -1, idx = -1;
    MPI_Request both[2] = {send, MPI_REQUEST_NULL};
    MPI_Irecv(&got_word, 1, MPI_INT, left, 16, MPI_COMM_WORLD, &both[1]);
    MPI_Send(&word, 1, MPI_INT, right, 16, MPI_COMM_WORLD);
    MPI_Waitany(2, both, &idx, MPI_STATUS_IGNORE);
    CHECK(idx == 1 && got_word == left, "Waitany beside an unmarked send: index %d", idx);
    /* The second request's message leaves first. */
    MPI_Pready_range(0, 3, twin);
    MPI_Wait(&twin, MPI_STATUS_IGNORE);
    MPI_Pready_range(0, 3, send);
    MPI_Request rest4[3] = {send, recv, recv2};
    MPI_Waitall(3, rest4, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 4; i++)
        CHECK(in[i] == 1000 + 100 * left + i && in2[i] == -(100 * left + i + 1), "init order: in[%d] %g, in2[%d] %g", i, in[i], i, in2[i]);
    MPI_Request_free(&twin);
    MPI_Request_free(&send);
    MPI_Request_free(&recv);
    MPI_Request_free(&recv2);

    /* A send to MPI_PROC_NULL restarts as any other. */
    MPI_Psend_init(out, 2, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
    for (int round = 0; round < 2; round++) {
        MPI_Start(&send);
        MPI_Pready_list(2, (int[]){1, 0}, send);
        MPI_Wait(&send, MPI_STATUS_IGNORE);
    }
    flag = 0;
    MPI_Test(&send, &flag, MPI_STATUS_IGNORE);
    CHECK(flag, "an inactive MPI_PROC_NULL send tests complete");
    MPI_Request_free(&send);

    /* What the left neighbour says it sent is what arrived here. */
    double said = -1;
    MPI_Sendrecv(&sent_sum, 1, MPI_DOUBLE, right, 13, &said, 1, MPI_DOUBLE, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(said == recv_sum, "rank %d says it sent %.0f, %.0f arrived", left, said, recv_sum);
    int failed_all = 0;
    MPI_Reduce(&failed, &failed_all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && failed_all == 0 && failed == 0) printf("part ok %d\n", checks);
    return MPI_Finalize() || failed_all != 0;
}
