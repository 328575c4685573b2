/* Exercises the MPI functions vpml's MPICH-ABI library implements, on 4
   ranks. Every check that fails prints "FAIL <what>" and the program
   exits 1; rank 0 ends with "api ok <checks>". Built with `vpml mpicc`
   (vpml's mpi.h) or with MPICH's mpicc.mpich. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef VPML_MPI_ABI
/* Not declared by vpml's mpi.h (not implemented), but present in the
   library as a stub, as every MPICH function is. */
int MPI_Pready(int partition, MPI_Request request);
#endif

#include "check.h"

/* Unsupported by vpml, so not in its mpi.h: declared as MPICH does. */
int MPI_Comm_join(int fd, MPI_Comm *intercomm);

static int size;


static void my_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    /* a ⊕ b = a + b + 1: associative, as MPI assumes. */
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i] + 1;
}

/* A complex product on a 2-double datatype: the function gets whole
   elements of that type. */
static void cmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    double *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        double re = a[2 * i] * b[2 * i] - a[2 * i + 1] * b[2 * i + 1];
        double im = a[2 * i] * b[2 * i + 1] + a[2 * i + 1] * b[2 * i];
        b[2 * i] = re;
        b[2 * i + 1] = im;
    }
}

static void environment(void) {
    int flag = 0, provided = -1, v = 0, sv = 0, len = 0;
    MPI_Initialized(&flag);
    CHECK(flag, "Initialized");
    MPI_Query_thread(&provided);
    CHECK(provided == MPI_THREAD_FUNNELED, "Query_thread %d", provided);
    int main_thread = -1;
    MPI_Is_thread_main(&main_thread);
    CHECK(main_thread == 1, "Is_thread_main %d", main_thread);
    MPI_Get_version(&v, &sv);
    CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION && v == 4 && sv == 0, "Get_version %d.%d", v, sv);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(lib, &len);
    CHECK(len > 0 && strstr(lib, "vpml") != NULL, "Get_library_version %s", lib);
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Get_processor_name(host, &len);
    CHECK(len > 0 && (int)strlen(host) == len, "Get_processor_name");
    double t0 = MPI_Wtime();
    CHECK(MPI_Wtime() >= t0 && MPI_Wtick() > 0, "Wtime/Wtick");
    void *mem = NULL;
    MPI_Alloc_mem(1000, MPI_INFO_NULL, &mem);
    CHECK(mem != NULL, "Alloc_mem");
    memset(mem, 1, 1000);
    MPI_Free_mem(mem);
    MPI_Aint a1, a2;
    int arr[4];
    MPI_Get_address(&arr[0], &a1);
    MPI_Get_address(&arr[3], &a2);
    CHECK(a2 - a1 == 3 * (MPI_Aint)sizeof(int), "Get_address");
    CHECK(MPI_Aint_diff(a2, a1) == a2 - a1 && MPI_Aint_add(a1, 8) == a1 + 8, "Aint_add/diff");
}

/* Attribute delete functions count their calls here. */
static int deletes;

static int count_delete(MPI_Comm c, int key, void *val, void *extra) {
    (void)c, (void)key, (void)val, (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

static int count_type_delete(MPI_Datatype t, int key, void *val, void *extra) {
    (void)t, (void)key, (void)val, (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

static void attributes(void) {
    int *tag_ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    CHECK(flag && tag_ub && *tag_ub >= 32767, "MPI_TAG_UB");
    int *usize = NULL;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &usize, &flag);
    CHECK(flag && *usize == size, "MPI_UNIVERSE_SIZE");
    /* A keyval that copies on dup, one that does not. */
    int copied, kept;
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &copied, NULL);
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &kept, NULL);
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    static int v1 = 11, v2 = 22, v3 = 33;
    MPI_Comm_set_attr(a, copied, &v1);
    MPI_Comm_set_attr(a, kept, &v2);
    MPI_Comm_dup(a, &b);
    int *got = NULL;
    MPI_Comm_get_attr(b, copied, &got, &flag);
    CHECK(flag && got == &v1, "attribute copied by MPI_COMM_DUP_FN");
    MPI_Comm_get_attr(b, kept, &got, &flag);
    CHECK(!flag, "attribute not copied by MPI_COMM_NULL_COPY_FN");
    deletes = 0;
    MPI_Comm_set_attr(a, copied, &v3); /* replaces: the old value is deleted */
    MPI_Comm_get_attr(a, copied, &got, &flag);
    CHECK(flag && got == &v3 && deletes == 1, "set_attr replaces %d", deletes);
    MPI_Comm_delete_attr(a, kept);
    MPI_Comm_get_attr(a, kept, &got, &flag);
    CHECK(!flag && deletes == 2, "delete_attr %d", deletes);
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    CHECK(deletes == 4, "freeing communicators deletes their attributes %d", deletes);
    MPI_Comm_free_keyval(&copied);
    MPI_Comm_free_keyval(&kept);
    CHECK(copied == MPI_KEYVAL_INVALID, "Comm_free_keyval");
    /* Datatype attributes, copied by Type_dup. */
    int tkey;
    MPI_Type_create_keyval(MPI_TYPE_DUP_FN, count_type_delete, &tkey, NULL);
    MPI_Datatype t1, t2;
    MPI_Type_contiguous(2, MPI_INT, &t1);
    MPI_Type_set_attr(t1, tkey, &v1);
    MPI_Type_dup(t1, &t2);
    MPI_Type_get_attr(t2, tkey, &got, &flag);
    CHECK(flag && got == &v1, "Type_dup copies attributes");
    deletes = 0;
    MPI_Type_free(&t1);
    MPI_Type_free(&t2);
    CHECK(deletes == 2, "Type_free deletes attributes %d", deletes);
    MPI_Type_free_keyval(&tkey);
    /* MPI-1's names. */
    int old;
    MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &old, NULL);
    MPI_Attr_put(MPI_COMM_WORLD, old, &v2);
    MPI_Attr_get(MPI_COMM_WORLD, old, &got, &flag);
    CHECK(flag && got == &v2, "Attr_put/Attr_get");
    MPI_Attr_delete(MPI_COMM_WORLD, old);
    MPI_Keyval_free(&old);
}

static void communicators(void) {
    int r, n, cmp;
    MPI_Comm_size(MPI_COMM_SELF, &n);
    MPI_Comm_rank(MPI_COMM_SELF, &r);
    CHECK(n == 1 && r == 0, "COMM_SELF %d %d", n, r);
    int me_out = rank + 7, me_in = -1;
    MPI_Request self_rq;
    MPI_Isend(&me_out, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &self_rq);
    MPI_Recv(&me_in, 1, MPI_INT, 0, 3, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    MPI_Wait(&self_rq, MPI_STATUS_IGNORE);
    CHECK(me_in == rank + 7, "COMM_SELF message %d", me_in);
    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &cmp);
    CHECK(cmp == MPI_IDENT, "compare ident %d", cmp);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "compare congruent %d", cmp);
    /* Two halves, ordered by descending world rank. */
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    MPI_Comm_size(half, &n);
    MPI_Comm_rank(half, &r);
    CHECK(n == size / 2 && r == (size - 1 - rank) / 2, "split %d %d", n, r);
    MPI_Comm_compare(MPI_COMM_WORLD, half, &cmp);
    CHECK(cmp == MPI_UNEQUAL, "compare unequal %d", cmp);
    /* Messages on the dup do not meet those on the world. */
    int a = rank, b = -1, c = -1;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Request rq[2];
    MPI_Irecv(&b, 1, MPI_INT, left, 5, dup, &rq[0]);
    MPI_Irecv(&c, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &rq[1]);
    int a2 = rank + 100;
    MPI_Send(&a2, 1, MPI_INT, right, 5, MPI_COMM_WORLD);
    MPI_Send(&a, 1, MPI_INT, right, 5, dup);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(b == left && c == left + 100, "dup isolation %d %d", b, c);
    /* One Waitall over requests of two communicators numbers each status
     * in its own: the partner in `half` is world rank ^ 2, half rank 1 - r. */
    int hpeer = 1 - r, wpeer = rank ^ 2;
    int hin = -1, win = -1, hout = rank + 200, wout = rank + 300;
    MPI_Request mix[4];
    MPI_Status ms[4];
    MPI_Irecv(&hin, 1, MPI_INT, hpeer, 6, half, &mix[0]);
    MPI_Irecv(&win, 1, MPI_INT, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &mix[1]);
    MPI_Isend(&hout, 1, MPI_INT, hpeer, 6, half, &mix[2]);
    MPI_Isend(&wout, 1, MPI_INT, wpeer, 6, MPI_COMM_WORLD, &mix[3]);
    MPI_Waitall(4, mix, ms);
    CHECK(hin == wpeer + 200 && win == wpeer + 300, "mixed Waitall data %d %d", hin, win);
    CHECK(ms[0].MPI_SOURCE == hpeer && ms[1].MPI_SOURCE == wpeer, "mixed Waitall sources %d %d", ms[0].MPI_SOURCE, ms[1].MPI_SOURCE);
    /* A blocking receive on `half` too. */
    if (r == 0) {
        MPI_Send(&hout, 1, MPI_INT, 1, 7, half);
    } else {
        MPI_Status hs;
        MPI_Recv(&hin, 1, MPI_INT, 0, 7, half, &hs);
        CHECK(hs.MPI_SOURCE == 0 && hs.MPI_TAG == 7 && hin == wpeer + 200, "Recv on half %d %d", hs.MPI_SOURCE, hin);
    }
    int color = MPI_UNDEFINED;
    MPI_Comm none;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : color, 0, &none);
    CHECK((rank == 0) == (none != MPI_COMM_NULL), "split undefined");
    if (none != MPI_COMM_NULL) MPI_Comm_free(&none);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    CHECK(dup == MPI_COMM_NULL, "Comm_free");
}

static void point_to_point(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Status st;
    int n;
    /* Nonblocking ring, Waitall with statuses. */
    double out[3] = {rank, rank + 0.5, rank + 0.25}, in[3];
    MPI_Request rq[2];
    MPI_Status sts[2];
    MPI_Irecv(in, 3, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(out, 3, MPI_DOUBLE, right, 7, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, sts);
    MPI_Get_count(&sts[0], MPI_DOUBLE, &n);
    CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL, "Waitall frees");
    CHECK(sts[0].MPI_SOURCE == left && sts[0].MPI_TAG == 7 && n == 3 && in[1] == left + 0.5,
          "ring status %d %d %d", sts[0].MPI_SOURCE, sts[0].MPI_TAG, n);
    /* Waitany / Waitsome / Test / Testany / Testall / Testsome. */
    int v[4] = {0, 0, 0, 0}, w = rank;
    MPI_Request r4[4];
    for (int k = 0; k < 4; k++) MPI_Irecv(&v[k], 1, MPI_INT, left, 20 + k, MPI_COMM_WORLD, &r4[k]);
    for (int k = 3; k >= 0; k--) MPI_Send(&w, 1, MPI_INT, right, 20 + k, MPI_COMM_WORLD);
    int idx = -1;
    MPI_Waitany(4, r4, &idx, &st);
    CHECK(idx >= 0 && idx < 4 && r4[idx] == MPI_REQUEST_NULL && st.MPI_TAG == 20 + idx, "Waitany %d", idx);
    int outcount = 0, indices[4];
    MPI_Waitsome(4, r4, &outcount, indices, MPI_STATUSES_IGNORE);
    CHECK(outcount >= 1, "Waitsome %d", outcount);
    int flag = 0;
    while (!flag) MPI_Testall(4, r4, &flag, MPI_STATUSES_IGNORE);
    CHECK(v[0] == left && v[3] == left, "Testall values");
    for (int k = 0; k < 4; k++) CHECK(r4[k] == MPI_REQUEST_NULL, "Testall frees %d", k);
    MPI_Waitany(4, r4, &idx, &st);
    CHECK(idx == MPI_UNDEFINED, "Waitany on nothing %d", idx);
    MPI_Testsome(4, r4, &outcount, indices, MPI_STATUSES_IGNORE);
    CHECK(outcount == MPI_UNDEFINED, "Testsome on nothing %d", outcount);
    MPI_Request one;
    MPI_Irecv(&v[0], 1, MPI_INT, left, 30, MPI_COMM_WORLD, &one);
    MPI_Issend(&w, 1, MPI_INT, right, 30, MPI_COMM_WORLD, &r4[0]);
    flag = 0;
    while (!flag) MPI_Test(&one, &flag, &st);
    CHECK(st.MPI_SOURCE == left && one == MPI_REQUEST_NULL, "Test");
    flag = 0;
    while (!flag) MPI_Testany(1, r4, &idx, &flag, MPI_STATUS_IGNORE);
    CHECK(idx == 0, "Testany %d", idx);
    /* MPI_PROC_NULL: complete at once, with its status. */
    MPI_Irecv(&v[0], 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &one);
    MPI_Wait(&one, &st);
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && n == 0 && one == MPI_REQUEST_NULL, "PROC_NULL source %d count %d", st.MPI_SOURCE, n);
    MPI_Send(&w, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    /* Mixed arrays (null, MPI_PROC_NULL, active) with statuses: each
     * status where its request is, empty for the null one. */
    for (int call = 0; call < 3; call++) {
        MPI_Request mix[3];
        MPI_Status ms[3];
        memset(ms, 0x5a, sizeof ms);
        mix[0] = MPI_REQUEST_NULL;
        MPI_Irecv(&v[1], 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &mix[1]);
        MPI_Irecv(&v[2], 1, MPI_INT, left, 50 + call, MPI_COMM_WORLD, &mix[2]);
        MPI_Send(&w, 1, MPI_INT, right, 50 + call, MPI_COMM_WORLD);
        if (call == 0) {
            MPI_Waitall(3, mix, ms);
        } else if (call == 1) {
            flag = 0;
            while (!flag) MPI_Testall(3, mix, &flag, ms);
        } else {
            int got = 0, ids[3];
            MPI_Status some[3];
            while (got < 2) {
                MPI_Waitsome(3, mix, &outcount, ids, some);
                for (int k = 0; k < outcount; k++) ms[ids[k]] = some[k];
                got += outcount;
            }
        }
        /* (Waitsome reports completed requests only.) */
        if (call < 2)
            CHECK(ms[0].MPI_SOURCE == MPI_ANY_SOURCE && ms[0].MPI_TAG == MPI_ANY_TAG, "mixed %d: null status %d", call, ms[0].MPI_SOURCE);
        CHECK(ms[1].MPI_SOURCE == MPI_PROC_NULL && ms[1].MPI_TAG == MPI_ANY_TAG, "mixed %d: PROC_NULL status %d", call, ms[1].MPI_SOURCE);
        MPI_Get_count(&ms[2], MPI_INT, &n);
        CHECK(ms[2].MPI_SOURCE == left && ms[2].MPI_TAG == 50 + call && n == 1 && v[2] == left,
              "mixed %d: status %d %d %d", call, ms[2].MPI_SOURCE, ms[2].MPI_TAG, n);
        for (int k = 0; k < 3; k++) CHECK(mix[k] == MPI_REQUEST_NULL, "mixed %d frees %d", call, k);
    }
    /* Probe, Iprobe, Get_count, then the receive. */
    long big[10];
    for (int k = 0; k < 10; k++) big[k] = rank * 10 + k;
    MPI_Send(big, 2 + rank, MPI_LONG, right, 40, MPI_COMM_WORLD);
    MPI_Probe(MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_LONG, &n);
    CHECK(st.MPI_SOURCE == left && n == 2 + left, "Probe count %d", n);
    flag = 0;
    while (!flag) MPI_Iprobe(left, 40, MPI_COMM_WORLD, &flag, &st);
    long got[10];
    MPI_Recv(got, 10, MPI_LONG, left, 40, MPI_COMM_WORLD, &st);
    CHECK(got[1] == left * 10 + 1, "Recv after probe");
    /* Matched probes: the probed message is this call's, whatever other
       receives are posted; then Improbe and Imrecv; MPI_PROC_NULL. */
    MPI_Send(big, 3, MPI_LONG, right, 41, MPI_COMM_WORLD);
    MPI_Send(big, 1, MPI_LONG, right, 42, MPI_COMM_WORLD);
    MPI_Message msg;
    st.MPI_ERROR = MPI_ERR_DIMS; /* single-completion calls leave it */
    MPI_Mprobe(MPI_ANY_SOURCE, 41, MPI_COMM_WORLD, &msg, &st);
    MPI_Get_count(&st, MPI_LONG, &n);
    long other = -1;
    MPI_Request any;
    MPI_Irecv(&other, 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &any);
    long mgot[3] = {-1, -1, -1};
    MPI_Mrecv(mgot, 3, MPI_LONG, &msg, &st);
    MPI_Status st2;
    MPI_Wait(&any, &st2);
    CHECK(st.MPI_ERROR == MPI_ERR_DIMS, "Mprobe/Mrecv left MPI_ERROR alone");
    CHECK(n == 3 && msg == MPI_MESSAGE_NULL && mgot[2] == left * 10 + 2 && st2.MPI_TAG == 42 && other == left * 10,
          "Mprobe/Mrecv %d %ld %d", n, mgot[2], st2.MPI_TAG);
    MPI_Send(big, 2, MPI_LONG, right, 43, MPI_COMM_WORLD);
    flag = 0;
    while (!flag) MPI_Improbe(left, 43, MPI_COMM_WORLD, &flag, &msg, &st);
    MPI_Request mr;
    MPI_Imrecv(mgot, 2, MPI_LONG, &msg, &mr);
    MPI_Wait(&mr, &st);
    MPI_Get_count(&st, MPI_LONG, &n);
    CHECK(n == 2 && st.MPI_SOURCE == left && st.MPI_TAG == 43 && mgot[1] == left * 10 + 1, "Improbe/Imrecv %d", n);
    /* Request_get_status: the status, without freeing the request. */
    long gs_in = -1;
    MPI_Request gsr, gss;
    MPI_Irecv(&gs_in, 1, MPI_LONG, MPI_ANY_SOURCE, 46, MPI_COMM_WORLD, &gsr);
    MPI_Isend(&big[4], 1, MPI_LONG, right, 46, MPI_COMM_WORLD, &gss);
    int gs_flag = 0;
    MPI_Status gs_st, gs_st2;
    while (!gs_flag) MPI_Request_get_status(gsr, &gs_flag, &gs_st);
    MPI_Wait(&gsr, &gs_st2);
    MPI_Wait(&gss, MPI_STATUS_IGNORE);
    CHECK(gs_in == left * 10 + 4 && gs_st.MPI_SOURCE == left && gs_st2.MPI_SOURCE == left && gs_st2.MPI_TAG == 46 &&
              gsr == MPI_REQUEST_NULL, "Request_get_status %d %d", gs_st.MPI_SOURCE, gs_st2.MPI_SOURCE);
    MPI_Request pn;
    long pn_buf = 0;
    MPI_Irecv(&pn_buf, 1, MPI_LONG, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &pn);
    gs_flag = 0;
    MPI_Request_get_status(pn, &gs_flag, &gs_st);
    MPI_Wait(&pn, MPI_STATUS_IGNORE);
    CHECK(gs_flag && gs_st.MPI_SOURCE == MPI_PROC_NULL, "Request_get_status on MPI_PROC_NULL %d", gs_st.MPI_SOURCE);
    /* Isendrecv, Isendrecv_replace: one request, the receive's status. */
    long sr_out = rank, sr_in = -1, rep2 = rank * 7;
    MPI_Request srq[2];
    MPI_Isendrecv(&sr_out, 1, MPI_LONG, right, 44, &sr_in, 1, MPI_LONG, MPI_ANY_SOURCE, 44, MPI_COMM_WORLD, &srq[0]);
    MPI_Isendrecv_replace(&rep2, 1, MPI_LONG, right, 45, left, 45, MPI_COMM_WORLD, &srq[1]);
    MPI_Status srst[2];
    MPI_Waitall(2, srq, srst);
    CHECK(sr_in == left && srst[0].MPI_SOURCE == left && srst[0].MPI_TAG == 44 && rep2 == left * 7 &&
              srst[1].MPI_TAG == 45, "Isendrecv(_replace) %ld %ld", sr_in, rep2);
    MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st);
    CHECK(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL, "Mprobe of MPI_PROC_NULL");
    MPI_Mrecv(mgot, 1, MPI_LONG, &msg, &st);
    CHECK(msg == MPI_MESSAGE_NULL && st.MPI_SOURCE == MPI_PROC_NULL, "Mrecv of MPI_MESSAGE_NO_PROC");
    /* Persistent requests, started twice. */
    int po = 0, pi = -1;
    MPI_Request pr[2];
    MPI_Recv_init(&pi, 1, MPI_INT, left, 50, MPI_COMM_WORLD, &pr[0]);
    MPI_Send_init(&po, 1, MPI_INT, right, 50, MPI_COMM_WORLD, &pr[1]);
    for (int round = 0; round < 2; round++) {
        po = rank * 100 + round;
        MPI_Startall(2, pr);
        MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
        CHECK(pi == left * 100 + round && pr[0] != MPI_REQUEST_NULL, "persistent round %d", round);
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
    CHECK(pr[0] == MPI_REQUEST_NULL, "Request_free");
    /* Sendrecv, Sendrecv_replace, Ssend, Rsend, Bsend. */
    int s1 = rank, r1 = -1;
    MPI_Sendrecv(&s1, 1, MPI_INT, right, 60, &r1, 1, MPI_INT, left, 60, MPI_COMM_WORLD, &st);
    CHECK(r1 == left && st.MPI_SOURCE == left, "Sendrecv");
    int rep = rank;
    MPI_Sendrecv_replace(&rep, 1, MPI_INT, right, 61, left, 61, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(rep == left, "Sendrecv_replace");
    char *bbuf = malloc(1000 + MPI_BSEND_OVERHEAD);
    MPI_Buffer_attach(bbuf, 1000 + MPI_BSEND_OVERHEAD);
    MPI_Bsend(&s1, 1, MPI_INT, right, 62, MPI_COMM_WORLD);
    MPI_Recv(&r1, 1, MPI_INT, left, 62, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* Ibsend: the data is copied; the request is done at once. */
    MPI_Request ib;
    int s2 = rank + 100, r2 = -1, ib_done = 0;
    MPI_Ibsend(&s2, 1, MPI_INT, right, 63, MPI_COMM_WORLD, &ib);
    s2 = -1;
    MPI_Test(&ib, &ib_done, MPI_STATUS_IGNORE);
    MPI_Recv(&r2, 1, MPI_INT, left, 63, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(ib_done && ib == MPI_REQUEST_NULL && r2 == left + 100, "Ibsend %d", r2);
    void *back;
    int bsize;
    MPI_Buffer_detach(&back, &bsize);
    CHECK(back == bbuf && bsize == 1000 + MPI_BSEND_OVERHEAD && r1 == left, "Bsend/Buffer_detach");
    free(bbuf);
    if (rank % 2 == 0) {
        MPI_Ssend(&s1, 1, MPI_INT, right, 63, MPI_COMM_WORLD);
        MPI_Recv(&r1, 1, MPI_INT, left, 63, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&r1, 1, MPI_INT, left, 63, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Rsend(&s1, 1, MPI_INT, right, 63, MPI_COMM_WORLD);
    }
    CHECK(r1 == left, "Ssend/Rsend");
    /* Cancel an unmatched receive. */
    MPI_Irecv(&r1, 1, MPI_INT, left, 999, MPI_COMM_WORLD, &one);
    MPI_Cancel(&one);
    MPI_Wait(&one, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag, "Cancel");
    MPI_Barrier(MPI_COMM_WORLD);
}

static void datatypes(void) {
    int sz;
    MPI_Type_size(MPI_DOUBLE, &sz);
    CHECK(sz == 8, "Type_size double");
    MPI_Type_size(MPI_SHORT, &sz);
    CHECK(sz == 2, "Type_size short");
    MPI_Datatype triple;
    MPI_Type_contiguous(3, MPI_INT, &triple);
    MPI_Type_commit(&triple);
    MPI_Type_size(triple, &sz);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(triple, &lb, &ext);
    CHECK(sz == 12 && lb == 0 && ext == 12, "contiguous size %d extent %ld", sz, (long)ext);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[6] = {rank, 1, 2, 3, 4, 5}, in[6];
    MPI_Status st;
    MPI_Sendrecv(out, 2, triple, right, 70, in, 2, triple, left, 70, MPI_COMM_WORLD, &st);
    int n, e;
    MPI_Get_count(&st, triple, &n);
    MPI_Get_elements(&st, triple, &e);
    CHECK(in[0] == left && in[5] == 5 && n == 2 && e == 6, "contiguous transfer %d %d", n, e);
    MPI_Type_free(&triple);
    CHECK(triple == MPI_DATATYPE_NULL, "Type_free");

    /* A column of a 4x5 matrix (vector), sent and received as a column. */
    double m[4][5], col[4][5];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) m[i][j] = rank * 100 + i * 10 + j, col[i][j] = -1;
    MPI_Datatype column;
    MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    MPI_Type_size(column, &sz);
    MPI_Type_get_extent(column, &lb, &ext);
    CHECK(sz == 32 && ext == (3 * 5 + 1) * 8, "vector size %d extent %ld", sz, (long)ext);
    MPI_Sendrecv(&m[0][2], 1, column, right, 71, &col[0][4], 1, column, left, 71, MPI_COMM_WORLD, &st);
    MPI_Get_elements(&st, column, &e);
    CHECK(col[0][4] == left * 100 + 2 && col[3][4] == left * 100 + 32 && col[3][3] == -1 && e == 4,
          "vector transfer %g %g %d", col[0][4], col[3][4], e);
    /* Nonblocking and persistent receives unpack when they complete. */
    MPI_Request rq[2];
    for (int i = 0; i < 4; i++) col[i][1] = -1;
    MPI_Irecv(&col[0][1], 1, column, left, 72, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(&m[0][3], 1, column, right, 72, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(col[2][1] == left * 100 + 23, "vector nonblocking %g", col[2][1]);
    /* The program may free the datatype and the communicator of a
       persistent request before starting it: the request keeps both. */
    MPI_Datatype column2;
    MPI_Type_dup(column, &column2);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Recv_init(&col[0][0], 1, column2, left, 73, dup, &rq[0]);
    MPI_Send_init(&m[0][0], 1, column2, right, 73, dup, &rq[1]);
    MPI_Type_free(&column2);
    MPI_Comm_free(&dup);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 4; i++) col[i][0] = -1;
        MPI_Startall(2, rq);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        CHECK(col[1][0] == left * 100 + 10 && col[3][0] == left * 100 + 30,
              "vector persistent, type and communicator freed %g", col[1][0]);
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);
    MPI_Type_free(&column);

    /* Indexed: elements 1, 2 and 5 of an int array. */
    int lens[2] = {2, 1}, offs[2] = {1, 5}, src[8], dst[8];
    for (int i = 0; i < 8; i++) src[i] = rank * 10 + i, dst[i] = -1;
    MPI_Datatype picks;
    MPI_Type_indexed(2, lens, offs, MPI_INT, &picks);
    MPI_Type_commit(&picks);
    MPI_Sendrecv(src, 1, picks, right, 74, dst, 1, picks, left, 74, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(dst[0] == -1 && dst[1] == left * 10 + 1 && dst[2] == left * 10 + 2 && dst[3] == -1 &&
          dst[5] == left * 10 + 5, "indexed");
    MPI_Type_free(&picks);

    /* A struct {int; double} array, as C lays it out. */
    struct pt { int id; double x; } ps[3], pr[3];
    for (int i = 0; i < 3; i++) ps[i].id = rank * 10 + i, ps[i].x = rank + i * 0.5, pr[i].id = -1;
    int bl[2] = {1, 1};
    MPI_Aint dsp[2], base;
    MPI_Get_address(&ps[0], &base);
    MPI_Get_address(&ps[0].id, &dsp[0]);
    MPI_Get_address(&ps[0].x, &dsp[1]);
    dsp[0] -= base;
    dsp[1] -= base;
    MPI_Datatype tys[2] = {MPI_INT, MPI_DOUBLE}, pt_type;
    MPI_Type_create_struct(2, bl, dsp, tys, &pt_type);
    MPI_Type_commit(&pt_type);
    MPI_Type_size(pt_type, &sz);
    MPI_Type_get_extent(pt_type, &lb, &ext);
    CHECK(sz == 12 && ext == (MPI_Aint)sizeof(struct pt), "struct size %d extent %ld", sz, (long)ext);
    MPI_Sendrecv(ps, 3, pt_type, right, 75, pr, 3, pt_type, left, 75, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(pr[2].id == left * 10 + 2 && pr[2].x == left + 1.0, "struct transfer %d %g", pr[2].id, pr[2].x);
    /* MPI_BOTTOM with absolute addresses. */
    int a_int = rank + 40, b_int = -1;
    double a_dbl = rank + 0.75, b_dbl = -1;
    MPI_Aint abs_out[2], abs_in[2];
    MPI_Get_address(&a_int, &abs_out[0]);
    MPI_Get_address(&a_dbl, &abs_out[1]);
    MPI_Get_address(&b_int, &abs_in[0]);
    MPI_Get_address(&b_dbl, &abs_in[1]);
    MPI_Datatype t_out, t_in;
    MPI_Type_create_struct(2, bl, abs_out, tys, &t_out);
    MPI_Type_create_struct(2, bl, abs_in, tys, &t_in);
    MPI_Type_commit(&t_out);
    MPI_Type_commit(&t_in);
    MPI_Sendrecv(MPI_BOTTOM, 1, t_out, right, 76, MPI_BOTTOM, 1, t_in, left, 76, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(b_int == left + 40 && b_dbl == left + 0.75, "MPI_BOTTOM %d %g", b_int, b_dbl);
    MPI_Type_free(&t_out);
    MPI_Type_free(&t_in);
    MPI_Datatype wide;
    MPI_Type_create_resized(MPI_INT, -4, 12, &wide);
    MPI_Type_get_extent(wide, &lb, &ext);
    CHECK(ext == 12 && lb == -4, "resized extent %ld", (long)ext);
    /* The true extent ignores the bounds; the _x calls say the same. */
    MPI_Aint tlb, text;
    MPI_Count clb, cext, csize;
    MPI_Type_get_true_extent(wide, &tlb, &text);
    MPI_Type_get_true_extent_x(wide, &clb, &cext);
    MPI_Type_size_x(wide, &csize);
    CHECK(tlb == 0 && text == 4 && clb == 0 && cext == 4 && csize == 4, "true extent %ld %ld", (long)tlb, (long)text);
    MPI_Type_get_extent_x(wide, &clb, &cext);
    CHECK(clb == -4 && cext == 12, "Type_get_extent_x");
    MPI_Type_free(&wide);
    /* Subarrays of a 4x5 int array a[i][j] = 5i + j: rows 1-2, columns
       1-3, in C order and (as a 5x4 Fortran array) in Fortran order. */
    int arr[20], packed_sub[6], psz = 0;
    for (int i = 0; i < 20; i++) arr[i] = i;
    int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 1};
    MPI_Datatype sub, fsub, dar;
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub);
    MPI_Type_commit(&sub);
    MPI_Type_get_extent(sub, &lb, &ext);
    MPI_Type_size(sub, &sz);
    int pos = 0;
    MPI_Pack(arr, 1, sub, packed_sub, sizeof packed_sub, &pos, MPI_COMM_WORLD);
    CHECK(lb == 0 && ext == 80 && sz == 24 && packed_sub[0] == 6 && packed_sub[2] == 8 && packed_sub[3] == 11 &&
              packed_sub[5] == 13, "subarray C %d %d %d", packed_sub[0], packed_sub[3], packed_sub[5]);
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_INT, &fsub);
    MPI_Type_commit(&fsub);
    pos = 0;
    MPI_Pack(arr, 1, fsub, packed_sub, sizeof packed_sub, &pos, MPI_COMM_WORLD);
    CHECK(packed_sub[0] == 5 && packed_sub[1] == 6 && packed_sub[2] == 9 && packed_sub[5] == 14,
          "subarray Fortran %d %d %d", packed_sub[0], packed_sub[2], packed_sub[5]);
    /* This rank's part of a 4x6 array over a 2x2 grid: rows by blocks of
       two, columns cyclic. */
    int big[24], mine_d[6];
    for (int i = 0; i < 24; i++) big[i] = i;
    int gs[2] = {4, 6}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
        dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, pgrid[2] = {2, 2};
    MPI_Type_create_darray(4, rank, 2, gs, dist, dargs, pgrid, MPI_ORDER_C, MPI_INT, &dar);
    MPI_Type_commit(&dar);
    MPI_Type_get_extent(dar, &lb, &ext);
    MPI_Pack_size(1, dar, MPI_COMM_WORLD, &psz);
    pos = 0;
    MPI_Pack(big, 1, dar, mine_d, sizeof mine_d, &pos, MPI_COMM_WORLD);
    int r0 = 2 * (rank / 2), c0 = rank % 2;
    CHECK(ext == 96 && pos == 24 && mine_d[0] == 6 * r0 + c0 && mine_d[1] == 6 * r0 + c0 + 2 &&
              mine_d[3] == 6 * (r0 + 1) + c0, "darray %d %d %d", mine_d[0], mine_d[1], mine_d[3]);
    /* Type_match_size, and MPI-1's names of the bounds and constructors. */
    MPI_Datatype r8, st1;
    int r8size = 0;
    MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &r8);
    MPI_Type_size(r8, &r8size);
    MPI_Aint x1 = -1, lb1 = -1, ub1 = -1, here, there;
    int one_block[2] = {1, 1};
    MPI_Address(&big[0], &here);
    MPI_Address(&big[3], &there);
    MPI_Aint d1[2] = {0, there - here};
    MPI_Datatype t2[2] = {MPI_INT, MPI_INT};
    MPI_Type_struct(2, one_block, d1, t2, &st1);
    MPI_Type_extent(st1, &x1);
    MPI_Type_lb(st1, &lb1);
    MPI_Type_ub(st1, &ub1);
    CHECK(r8size == 8 && there - here == 12 && x1 == 16 && lb1 == 0 && ub1 == 16, "MPI-1 type calls %ld %ld",
          (long)x1, (long)ub1);
    MPI_Type_free(&st1);
    /* Names: MPI's for predefined types, the program's for its own. */
    char tname[MPI_MAX_OBJECT_NAME];
    int tlen = 0;
    MPI_Type_get_name(MPI_DOUBLE, tname, &tlen);
    CHECK(strcmp(tname, "MPI_DOUBLE") == 0 && tlen == 10, "Type_get_name %s", tname);
    MPI_Type_set_name(sub, "rows 1-2");
    MPI_Type_get_name(sub, tname, &tlen);
    CHECK(strcmp(tname, "rows 1-2") == 0, "Type_set_name %s", tname);
    MPI_Type_free(&sub);
    MPI_Type_free(&fsub);
    MPI_Type_free(&dar);
    /* A status the program fills in itself. */
    MPI_Status made;
    int cancelled = 0, elems = 0;
    MPI_Count nx = 0;
    MPI_Status_set_elements(&made, MPI_DOUBLE, 5);
    MPI_Status_set_cancelled(&made, 1);
    MPI_Test_cancelled(&made, &cancelled);
    MPI_Get_elements(&made, MPI_DOUBLE, &elems);
    MPI_Get_elements_x(&made, MPI_DOUBLE, &nx);
    CHECK(cancelled == 1 && elems == 5 && nx == 5, "Status_set_elements/cancelled %d %d", cancelled, elems);
    MPI_Status_set_elements_x(&made, MPI_INT, 6);
    MPI_Status_set_cancelled(&made, 0);
    MPI_Test_cancelled(&made, &cancelled);
    MPI_Get_count(&made, MPI_INT, &elems);
    CHECK(cancelled == 0 && elems == 6, "Status_set_elements_x %d", elems);
    /* Counts past 2^62 bytes survive a status (63 bits). */
    MPI_Count huge = 0x7654321ff1234567LL, huge_back = 0;
    MPI_Status_set_elements_x(&made, MPI_BYTE, huge);
    MPI_Get_elements_x(&made, MPI_BYTE, &huge_back);
    CHECK(huge_back == huge, "a 63-bit count %llx", (long long)huge_back);
    /* A pair is two basic elements, both ways. */
    MPI_Status_set_elements(&made, MPI_2INT, 4);
    int pairs_n = 0, basic_n = 0;
    MPI_Get_count(&made, MPI_2INT, &pairs_n);
    MPI_Get_elements(&made, MPI_2INT, &basic_n);
    CHECK(pairs_n == 2 && basic_n == 4, "Status_set_elements of pairs %d %d", pairs_n, basic_n);
    MPI_Type_free(&pt_type);
}

/* Packing, and the type constructors with blocks at given places. */
static void packing(void) {
    /* Pack an int and every other double of 6, send the packed bytes,
       unpack them on the other side. */
    int n = 7 + rank, packed_size = -1, pos = 0;
    double d[6] = {0, 1, 2, 3, 4, 5};
    MPI_Datatype every_other;
    MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &every_other);
    MPI_Type_commit(&every_other);
    int sz_int = -1, sz_dbl = -1;
    MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &sz_int);
    MPI_Pack_size(1, every_other, MPI_COMM_WORLD, &sz_dbl);
    CHECK(sz_int == 4 && sz_dbl == 24, "Pack_size %d %d", sz_int, sz_dbl);
    packed_size = sz_int + sz_dbl;
    char buf[64];
    MPI_Pack(&n, 1, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD);
    MPI_Pack(d, 1, every_other, buf, sizeof buf, &pos, MPI_COMM_WORLD);
    CHECK(pos == packed_size, "Pack position %d", pos);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    char in[64];
    MPI_Sendrecv(buf, pos, MPI_PACKED, right, 31, in, sizeof in, MPI_PACKED, left, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int got_n = -1, at = 0;
    double got[3] = {-1, -1, -1};
    MPI_Unpack(in, packed_size, &at, &got_n, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Unpack(in, packed_size, &at, got, 3, MPI_DOUBLE, MPI_COMM_WORLD);
    CHECK(got_n == 7 + left && got[0] == 0 && got[1] == 2 && got[2] == 4 && at == packed_size,
          "Unpack %d %g %g %g %d", got_n, got[0], got[1], got[2], at);
    /* Too little room is an error (returned here). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int small = 0;
    CHECK(MPI_Pack(d, 1, every_other, buf, 8, &small, MPI_COMM_WORLD) != MPI_SUCCESS, "Pack past the end");
    int past = 8; /* 8 + 24 bytes, past the 28 packed */
    CHECK(MPI_Unpack(in, packed_size, &past, got, 3, MPI_DOUBLE, MPI_COMM_WORLD) != MPI_SUCCESS, "Unpack past the end");
    int none_pos = 0;
    CHECK(MPI_Pack(NULL, 0, MPI_INT, buf, sizeof buf, &none_pos, MPI_COMM_WORLD) == MPI_SUCCESS && none_pos == 0,
          "Pack of nothing from a null buffer");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    /* external32: the same bytes, each number big-endian; a struct of an
       int, a padded double and a short; unpacked back whole. */
    struct { int i; double x; short s; } rec[2] = {{0x01020304, 1.5, 0x0a0b}, {-2, -0.25, 7}}, back[2];
    MPI_Datatype rec_t, rec_parts[3] = {MPI_INT, MPI_DOUBLE, MPI_SHORT};
    int rec_lens[3] = {1, 1, 1};
    MPI_Aint rec_at[3] = {0, 8, 16};
    MPI_Type_create_struct(3, rec_lens, rec_at, rec_parts, &rec_t);
    MPI_Type_commit(&rec_t);
    MPI_Aint ext_size = -1, ext_pos = 0, ext_in = 0;
    MPI_Pack_external_size("external32", 2, rec_t, &ext_size);
    CHECK(ext_size == 28, "Pack_external_size %ld", (long)ext_size);
    unsigned char ext[64];
    MPI_Pack_external("external32", rec, 2, rec_t, ext, sizeof ext, &ext_pos);
    CHECK(ext_pos == 28 && ext[0] == 1 && ext[3] == 4 && ext[4] == 0x3f && ext[5] == 0xf8 && ext[12] == 0x0a && ext[13] == 0x0b,
          "Pack_external bytes %02x %02x %02x %02x at %ld", ext[0], ext[3], ext[4], ext[12], (long)ext_pos);
    memset(back, 0, sizeof back);
    MPI_Unpack_external("external32", ext, ext_pos, &ext_in, back, 2, rec_t);
    CHECK(ext_in == 28 && back[0].i == rec[0].i && back[0].x == 1.5 && back[0].s == 0x0a0b && back[1].i == -2 && back[1].x == -0.25 && back[1].s == 7,
          "Unpack_external %d %g %d at %ld", back[1].i, back[1].x, back[1].s, (long)ext_in);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    ext_pos = 0;
    CHECK(MPI_Pack_external("native", rec, 1, rec_t, ext, sizeof ext, &ext_pos) != MPI_SUCCESS, "Pack_external of 'native'");
    /* long is 4 bytes in external32: a larger value does not fit. */
    long longs[2] = {-2, 1L << 40};
    int ext_class = -1;
    MPI_Error_class(MPI_Pack_external("external32", longs, 2, MPI_LONG, ext, sizeof ext, &ext_pos), &ext_class);
    CHECK(ext_class == MPI_ERR_CONVERSION && ext_pos == 0, "Pack_external of a long past 32 bits: class %d", ext_class);
    MPI_Pack_external("external32", longs, 1, MPI_LONG, ext, sizeof ext, &ext_pos);
    CHECK(ext_pos == 4 && ext[0] == 0xff && ext[3] == 0xfe, "Pack_external of a long: %ld bytes", (long)ext_pos);
    CHECK(MPI_Pack_external("external32", rec, 2, rec_t, ext, 20, &ext_pos) != MPI_SUCCESS, "Pack_external past the end");
    MPI_Type_free(&rec_t);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    /* Blocks at given places: elements 4-5 and 0-1; bytes 8 and 32. */
    int at_el[2] = {4, 0};
    MPI_Aint at_b[2] = {8, 32};
    int lens[2] = {1, 2};
    MPI_Datatype ib, hb, hi, dup;
    MPI_Type_create_indexed_block(2, 2, at_el, MPI_DOUBLE, &ib);
    MPI_Type_create_hindexed_block(2, 1, at_b, MPI_DOUBLE, &hb);
    MPI_Type_create_hindexed(2, lens, at_b, MPI_DOUBLE, &hi);
    MPI_Type_dup(ib, &dup);
    MPI_Datatype ts[4] = {ib, hb, hi, dup};
    double want[4][4] = {{4, 5, 0, 1}, {1, 4, -1, -1}, {1, 4, 5, -1}, {4, 5, 0, 1}};
    int count[4] = {4, 2, 3, 4};
    for (int k = 0; k < 4; k++) {
        MPI_Type_commit(&ts[k]);
        double out[4] = {-1, -1, -1, -1};
        int p = 0, tsz = -1;
        MPI_Type_size(ts[k], &tsz);
        MPI_Pack(d, 1, ts[k], buf, sizeof buf, &p, MPI_COMM_WORLD);
        int q = 0;
        MPI_Unpack(buf, p, &q, out, count[k], MPI_DOUBLE, MPI_COMM_WORLD);
        CHECK(tsz == 8 * count[k] && memcmp(out, want[k], sizeof out) == 0,
              "type %d: size %d, %g %g %g %g", k, tsz, out[0], out[1], out[2], out[3]);
        MPI_Aint lb = -1, ext = -1, want_lb[4] = {0, 8, 8, 0}, want_ext[4] = {48, 32, 40, 48};
        MPI_Type_get_extent(ts[k], &lb, &ext);
        CHECK(lb == want_lb[k] && ext == want_ext[k], "type %d: lb %ld extent %ld", k, (long)lb, (long)ext);
        MPI_Type_free(&ts[k]);
    }
    MPI_Type_free(&every_other);
}

static void collectives(void) {
    int x = rank + 1, sum = 0, max = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size * (size + 1) / 2, "Allreduce sum %d", sum);
    MPI_Reduce(&x, &max, 1, MPI_INT, MPI_MAX, 2, MPI_COMM_WORLD);
    if (rank == 2) CHECK(max == size, "Reduce max %d", max);
    double d[2] = {rank, -rank};
    MPI_Allreduce(MPI_IN_PLACE, d, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    CHECK(d[0] == 0 && d[1] == -(size - 1), "Allreduce in place min");
    long long ll = 1LL << (rank * 8), all = 0;
    MPI_Allreduce(&ll, &all, 1, MPI_LONG_LONG_INT, MPI_BOR, MPI_COMM_WORLD);
    CHECK(all == 0x01010101LL, "Allreduce bor %llx", all);
    unsigned char bit = rank == 1, any = 0;
    MPI_Allreduce(&bit, &any, 1, MPI_UNSIGNED_CHAR, MPI_LOR, MPI_COMM_WORLD);
    CHECK(any == 1, "Allreduce lor");
    struct { double v; int i; } loc = {rank == 2 ? 9.5 : rank, rank}, best;
    MPI_Allreduce(&loc, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    CHECK(best.v == 9.5 && best.i == 2, "MAXLOC %g %d", best.v, best.i);
    int pair[2] = {rank % 2, rank}, low[2];
    MPI_Allreduce(pair, low, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
    CHECK(low[0] == 0 && low[1] == 0, "MINLOC 2INT");
    /* Pair types hold their two values, not the padding between. */
    int psize[3];
    MPI_Aint pext[3], plb;
    MPI_Type_size(MPI_DOUBLE_INT, &psize[0]);
    MPI_Type_size(MPI_SHORT_INT, &psize[1]);
    MPI_Type_size(MPI_LONG_DOUBLE_INT, &psize[2]);
    MPI_Type_get_extent(MPI_DOUBLE_INT, &plb, &pext[0]);
    MPI_Type_get_extent(MPI_SHORT_INT, &plb, &pext[1]);
    MPI_Type_get_extent(MPI_LONG_DOUBLE_INT, &plb, &pext[2]);
    CHECK(psize[0] == 12 && pext[0] == 16 && psize[1] == 6 && pext[1] == 8 && psize[2] == 20 && pext[2] == 32,
          "pair sizes %d %d %d", psize[0], psize[1], psize[2]);
    struct { double v; int i; } pairs_out[2] = {{rank, rank}, {-rank, rank}}, pairs_in[2];
    MPI_Status pst;
    int pel = 0;
    int pright = (rank + 1) % size, pleft = (rank + size - 1) % size;
    MPI_Sendrecv(pairs_out, 2, MPI_DOUBLE_INT, pright, 77, pairs_in, 2, MPI_DOUBLE_INT, pleft, 77, MPI_COMM_WORLD, &pst);
    MPI_Get_elements(&pst, MPI_DOUBLE_INT, &pel);
    CHECK(pairs_in[1].v == -pleft && pairs_in[1].i == pleft && pel == 4, "DOUBLE_INT transfer, %d basic elements", pel);
    /* The other pair types: short (then padding) and int; long double
       and int; Fortran's pairs of reals. */
    struct { short v; int i; } sl = {(short)(rank == 3 ? -7 : rank), rank}, slo;
    MPI_Allreduce(&sl, &slo, 1, MPI_SHORT_INT, MPI_MINLOC, MPI_COMM_WORLD);
    CHECK(slo.v == -7 && slo.i == 3, "MINLOC SHORT_INT %d %d", slo.v, slo.i);
    struct { long double v; int i; } ldl = {rank == 1 ? 1e300L * 1e300L : rank, rank}, ldo;
    MPI_Allreduce(&ldl, &ldo, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    CHECK(ldo.v == 1e300L * 1e300L && ldo.i == 1, "MAXLOC LONG_DOUBLE_INT %d", ldo.i);
    float fr[2] = {(float)(rank % 2), (float)rank}, fro[2];
    MPI_Allreduce(fr, fro, 1, MPI_2REAL, MPI_MAXLOC, MPI_COMM_WORLD);
    CHECK(fro[0] == 1 && fro[1] == 1, "MAXLOC 2REAL %g %g", fro[0], fro[1]);
    /* Fortran's scalar types reduce as the C type of their layout. */
    int fi = rank, fis = 0;
    MPI_Allreduce(&fi, &fis, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD);
    double dz[2] = {1, rank}, dzs[2];
    MPI_Allreduce(dz, dzs, 1, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
    CHECK(fis == size * (size - 1) / 2 && dzs[0] == size && dzs[1] == fis,
          "INTEGER, DOUBLE_COMPLEX sums %d %g %g", fis, dzs[0], dzs[1]);
    /* Logical operations on floats, as MPICH allows: one rank's 2.5 is true. */
    float ft = rank == 2 ? 2.5f : 0.0f, fx = -1;
    MPI_Allreduce(&ft, &fx, 1, MPI_FLOAT, MPI_LXOR, MPI_COMM_WORLD);
    CHECK(fx == 1.0f, "LXOR on floats %g", fx);
    /* A complex number aligns as its parts: {char, float complex} is 12 bytes. */
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 4};
    MPI_Datatype parts[2] = {MPI_CHAR, MPI_C_FLOAT_COMPLEX}, cs;
    MPI_Type_create_struct(2, bl, disp, parts, &cs);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(cs, &lb, &extent);
    CHECK(extent == 12, "extent of {char, float complex} %ld", (long)extent);
    MPI_Type_free(&cs);
    MPI_Op op;
    MPI_Op_create(my_sum, 1, &op);
    int us = 0, one = 1;
    MPI_Allreduce(&one, &us, 1, MPI_INT, op, MPI_COMM_WORLD);
    /* size ones joined by size - 1 "+ 1"s. */
    CHECK(us == 2 * size - 1, "user op %d", us);
    /* Commutativity as declared; a local reduction with it: in ⊕ inout. */
    int commutes = -1, max_commutes = -1;
    MPI_Op_commutative(op, &commutes);
    MPI_Op_commutative(MPI_MAX, &max_commutes);
    int lin[2] = {1, 2}, linout[2] = {10, 20};
    MPI_Reduce_local(lin, linout, 2, MPI_INT, op);
    int imax[2] = {5, 50};
    MPI_Reduce_local(lin, imax, 2, MPI_INT, MPI_MAX);
    CHECK(commutes == 1 && max_commutes == 1 && linout[0] == 12 && linout[1] == 23 && imax[0] == 5 && imax[1] == 50,
          "Op_commutative %d, Reduce_local %d %d", commutes, linout[0], linout[1]);
    MPI_Op_free(&op);
    CHECK(op == MPI_OP_NULL, "Op_free");
    MPI_Datatype cplx;
    MPI_Type_contiguous(2, MPI_DOUBLE, &cplx);
    MPI_Type_commit(&cplx);
    MPI_Op cop;
    MPI_Op_create(cmul, 1, &cop);
    double z[4] = {0, 1, 1, 0}, zp[4];
    MPI_Allreduce(z, zp, 2, cplx, cop, MPI_COMM_WORLD);
    /* i^4 = 1 and 1^4 = 1 */
    CHECK(zp[0] == 1 && zp[1] == 0 && zp[2] == 1 && zp[3] == 0, "user op on a derived type %g %g", zp[0], zp[1]);
    double zs[2];
    MPI_Scan(z, zs, 1, cplx, cop, MPI_COMM_WORLD);
    /* i^(rank+1): i, -1, -i, 1 */
    double want_re[4] = {0, -1, 0, 1}, want_im[4] = {1, 0, -1, 0};
    CHECK(zs[0] == want_re[rank] && zs[1] == want_im[rank], "user scan %g %g", zs[0], zs[1]);
    MPI_Op_free(&cop);
    MPI_Type_free(&cplx);
    /* The same product with the predefined complex type and MPI_PROD. */
    double zc[2] = {0, 1}, zq[2];
    MPI_Allreduce(zc, zq, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
    CHECK(zq[0] == 1 && zq[1] == 0, "complex PROD %g %g", zq[0], zq[1]);
    /* long double: 1/3 needs more than a double's precision to sum back. */
    long double ld = 1.0L / 3.0L + rank, lsum = 0, lmax = 0, lprod = 0;
    MPI_Allreduce(&ld, &lsum, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&ld, &lmax, 1, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long double two_l = 2.0L;
    MPI_Allreduce(&two_l, &lprod, 1, MPI_LONG_DOUBLE, MPI_PROD, MPI_COMM_WORLD);
    long double want_sum = 0;
    for (int i = 0; i < size; i++) want_sum += 1.0L / 3.0L + i;
    /* Exact up to long double rounding (any summation order); a double
       sum would be ~1e-15 off. */
    long double dev = lsum - want_sum;
    if (dev < 0) dev = -dev;
    CHECK(dev < 1e-17L && lmax == 1.0L / 3.0L + (size - 1) && lprod == 16.0L, "long double %Lg %Lg %Lg", lsum, lmax, lprod);
    /* Logical operations on long double, as on the other floats. */
    long double lt = rank == 1 ? 2.5L : 0.0L, lx = -1;
    MPI_Allreduce(&lt, &lx, 1, MPI_LONG_DOUBLE, MPI_LXOR, MPI_COMM_WORLD);
    CHECK(lx == 1.0L, "LXOR on long double %Lg", lx);
    long double _Complex lz = 1.0L + 1.0L * __extension__ 1.0iL, lzs = 0;
    MPI_Allreduce(&lz, &lzs, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
    CHECK(__real__ lzs == size && __imag__ lzs == size, "long double complex SUM");
    /* Non-contiguous datatypes in collectives: matrix columns. */
    double m[4][3], mo[4][3];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) m[i][j] = rank * 100 + i * 10 + j, mo[i][j] = -1;
    MPI_Datatype column;
    MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    MPI_Bcast(&m[0][2], 1, column, 1, MPI_COMM_WORLD);
    CHECK(m[3][2] == 100 + 32 && m[3][1] == rank * 100 + 31, "Bcast column");
    MPI_Allreduce(&m[0][0], &mo[0][1], 1, column, MPI_SUM, MPI_COMM_WORLD);
    CHECK(mo[2][1] == 100 * (size * (size - 1) / 2) + 20 * size && mo[2][0] == -1, "Allreduce column %g", mo[2][1]);
    double gcol[4][3 * 4];
    MPI_Datatype gcolumn;
    MPI_Type_vector(4, 1, 12, MPI_DOUBLE, &gcolumn);
    MPI_Datatype gcol1;
    MPI_Type_create_resized(gcolumn, 0, sizeof(double), &gcol1);
    MPI_Type_commit(&gcol1);
    MPI_Allgather(&m[0][0], 1, column, gcol, 1, gcol1, MPI_COMM_WORLD);
    CHECK(gcol[1][size - 1] == (size - 1) * 100 + 10 && gcol[3][0] == 30, "Allgather columns %g", gcol[1][size - 1]);
    /* The v variants with those types: rank r's column goes to column
       size-1-r (displacements count in extents). */
    int ones4[4] = {1, 1, 1, 1}, rev[4];
    for (int i = 0; i < size; i++) rev[i] = size - 1 - i;
    double gv2[4][12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 12; j++) gv2[i][j] = -1;
    MPI_Gatherv(&m[0][0], 1, column, gv2, ones4, rev, gcol1, 2, MPI_COMM_WORLD);
    if (rank == 2) CHECK(gv2[1][size - 1] == 10 && gv2[1][0] == (size - 1) * 100 + 10 && gv2[1][5] == -1, "Gatherv columns");
    MPI_Allgatherv(&m[0][0], 1, column, gv2, ones4, rev, gcol1, MPI_COMM_WORLD);
    CHECK(gv2[2][size - 1] == 20 && gv2[2][0] == (size - 1) * 100 + 20, "Allgatherv columns");
    MPI_Type_free(&gcol1);
    MPI_Type_free(&gcolumn);
    MPI_Type_free(&column);
    int sc = 0, ex = -7;
    MPI_Scan(&x, &sc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(&x, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sc == (rank + 1) * (rank + 2) / 2, "Scan %d", sc);
    if (rank > 0) CHECK(ex == rank * (rank + 1) / 2, "Exscan %d", ex);
    int bc[3] = {0, 0, 0};
    if (rank == 1) bc[0] = 11, bc[1] = 12, bc[2] = 13;
    MPI_Bcast(bc, 3, MPI_INT, 1, MPI_COMM_WORLD);
    CHECK(bc[0] == 11 && bc[2] == 13, "Bcast");
    int g[16], mine[2] = {rank, rank * rank};
    MPI_Gather(mine, 2, MPI_INT, g, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) CHECK(g[2 * (size - 1) + 1] == (size - 1) * (size - 1), "Gather");
    int counts[4], displs[4], gv[16];
    for (int i = 0; i < size; i++) counts[i] = i + 1, displs[i] = i * (i + 1) / 2;
    int mv[4] = {rank, rank, rank, rank};
    MPI_Gatherv(mv, rank + 1, MPI_INT, gv, counts, displs, MPI_INT, 3, MPI_COMM_WORLD);
    if (rank == 3) CHECK(gv[0] == 0 && gv[1] == 1 && gv[3] == 2 && gv[9] == 3, "Gatherv");
    int sv[16], part[4];
    for (int i = 0; i < 16; i++) sv[i] = 100 + i;
    MPI_Scatter(sv, 2, MPI_INT, part, 2, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(part[0] == 100 + 2 * rank && part[1] == 101 + 2 * rank, "Scatter");
    MPI_Scatterv(sv, counts, displs, MPI_INT, part, rank + 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(part[rank] == 100 + displs[rank] + rank, "Scatterv");
    int ag[8];
    MPI_Allgather(&x, 1, MPI_INT, ag, 1, MPI_INT, MPI_COMM_WORLD);
    CHECK(ag[size - 1] == size, "Allgather");
    ag[rank] = -rank;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_INT, ag, 1, MPI_INT, MPI_COMM_WORLD);
    CHECK(ag[size - 1] == -(size - 1), "Allgather in place");
    int agv[16];
    MPI_Allgatherv(mv, rank + 1, MPI_INT, agv, counts, displs, MPI_INT, MPI_COMM_WORLD);
    CHECK(agv[9] == 3 && agv[1] == 1, "Allgatherv");
    int a2a[4], a2b[4];
    for (int i = 0; i < size; i++) a2a[i] = rank * 10 + i;
    MPI_Alltoall(a2a, 1, MPI_INT, a2b, 1, MPI_INT, MPI_COMM_WORLD);
    CHECK(a2b[1] == 10 + rank && a2b[3] == 30 + rank, "Alltoall");
    int ones[4] = {1, 1, 1, 1}, seq[4] = {0, 1, 2, 3};
    MPI_Alltoallv(a2a, ones, seq, MPI_INT, a2b, ones, seq, MPI_INT, MPI_COMM_WORLD);
    CHECK(a2b[2] == 20 + rank, "Alltoallv");
    {
        /* Equal blocks one after another make a v collective run as its
         * plain twin; ranks whose lists lay the same blocks out otherwise
         * (odd ranks: reversed, with gaps) must still meet it. */
        int two[4] = {2, 2, 2, 2}, in_order[4] = {0, 2, 4, 6}, reversed[4] = {9, 6, 3, 0};
        int *d = rank % 2 ? reversed : in_order;
        int out[12], in[12], mine2[2] = {rank * 7, rank * 7 + 1}, part2[2] = {-1, -1};
        for (int i = 0; i < size; i++) out[d[i]] = rank * 100 + i * 10, out[d[i] + 1] = rank * 100 + i * 10 + 1;
        MPI_Alltoallv(out, two, d, MPI_INT, in, two, d, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < size; i++)
            CHECK(in[d[i]] == i * 100 + rank * 10 && in[d[i] + 1] == i * 100 + rank * 10 + 1, "Alltoallv equal blocks from %d", i);
        MPI_Allgatherv(mine2, 2, MPI_INT, in, two, d, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < size; i++)
            CHECK(in[d[i]] == i * 7 && in[d[i] + 1] == i * 7 + 1, "Allgatherv equal blocks from %d", i);
        for (int root = 1; root <= 2; root++) {
            for (int i = 0; i < 12; i++) in[i] = -1;
            MPI_Gatherv(mine2, 2, MPI_INT, in, two, d, MPI_INT, root, MPI_COMM_WORLD);
            if (rank == root)
                for (int i = 0; i < size; i++) CHECK(in[d[i]] == i * 7 && in[d[i] + 1] == i * 7 + 1, "Gatherv equal blocks at %d from %d", root, i);
            MPI_Scatterv(out, two, d, MPI_INT, part2, 2, MPI_INT, root, MPI_COMM_WORLD);
            CHECK(part2[0] == root * 100 + rank * 10 && part2[1] == root * 100 + rank * 10 + 1, "Scatterv equal blocks from %d", root);
        }
    }
    int rsb_in[4], rsb = 0;
    for (int i = 0; i < size; i++) rsb_in[i] = i;
    MPI_Reduce_scatter_block(rsb_in, &rsb, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rsb == rank * size, "Reduce_scatter_block %d", rsb);
    if (size <= 4) {
        /* Rank r keeps r + 1 elements: the sums of elements at offsets
         * r(r+1)/2 ... of every rank's 10; in place, the result lands at
         * the start of the buffer. */
        int rs_counts[4], rs_in[10], rs_out[4] = {0}, rs_at = rank * (rank + 1) / 2, rs_total = 0;
        for (int i = 0; i < size; i++) rs_total += rs_counts[i] = i + 1;
        for (int i = 0; i < rs_total; i++) rs_in[i] = 100 * i + rank;
        MPI_Reduce_scatter(rs_in, rs_out, rs_counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(rs_out[rank] == size * 100 * (rs_at + rank) + size * (size - 1) / 2, "Reduce_scatter %d", rs_out[rank]);
        MPI_Reduce_scatter(MPI_IN_PLACE, rs_in, rs_counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(rs_in[0] == size * 100 * rs_at + size * (size - 1) / 2, "Reduce_scatter in place %d", rs_in[0]);
        /* Elements of a derived type (pairs of ints): block r starts at
         * pair r(r+1)/2, that is int r(r+1). */
        MPI_Datatype pair;
        MPI_Type_contiguous(2, MPI_INT, &pair);
        MPI_Type_commit(&pair);
        int rp_in[20], rp_out[8] = {0};
        for (int i = 0; i < 2 * rs_total; i++) rp_in[i] = 100 * i + rank;
        MPI_Reduce_scatter(rp_in, rp_out, rs_counts, pair, MPI_SUM, MPI_COMM_WORLD);
        CHECK(rp_out[0] == size * 100 * (2 * rs_at) + size * (size - 1) / 2, "Reduce_scatter of pairs %d", rp_out[0]);
        MPI_Type_free(&pair);
    }
    {
        /* Blocks above the 2 KiB switch, uneven (rank 0's empty): each
         * rank's block must carry the bits of the allreduce, from a
         * separate buffer and in place. */
        enum { N = 48000 };
        int counts_big[64], total = 0;
        for (int i = 0; i < size && i < 64; i++) total += counts_big[i] = i * N / size;
        double *in = malloc(sizeof(double) * total), *all = malloc(sizeof(double) * total);
        double *out = malloc(sizeof(double) * (counts_big[rank] + 1));
        for (int i = 0; i < total; i++) in[i] = 1.0 / (i + 1) + rank * 1e-3 / (i % 7 + 1);
        MPI_Allreduce(in, all, total, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Reduce_scatter(in, out, counts_big, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        long at = 0;
        for (int i = 0; i < rank; i++) at += counts_big[i];
        CHECK(memcmp(out, all + at, sizeof(double) * counts_big[rank]) == 0, "large Reduce_scatter differs from Allreduce");
        MPI_Reduce_scatter(MPI_IN_PLACE, in, counts_big, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        CHECK(memcmp(in, all + at, sizeof(double) * counts_big[rank]) == 0, "large Reduce_scatter in place differs");
        free(in);
        free(all);
        free(out);
    }
    /* The same buffer for input and result without MPI_IN_PLACE is an
     * error (MPI forbids the aliasing), reported, not a wrong answer. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int alias[4] = {1, 1, 1, 1};
    CHECK(MPI_Allreduce(alias, alias, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS, "aliased Allreduce must fail");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void errors(void) {
    MPI_Comm c;
    MPI_Errhandler eh;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_get_errhandler(c, &eh);
    CHECK(eh == MPI_ERRORS_ARE_FATAL, "default errhandler");
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int x = 0;
    int rc = MPI_Send(&x, 1, MPI_INT, size + 5, 0, c);
    int cls = -1, len = 0;
    char text[MPI_MAX_ERROR_STRING];
    MPI_Error_class(rc, &cls);
    MPI_Error_string(rc, text, &len);
    /* Codes may carry more than their class: compare classes. */
    CHECK(cls == MPI_ERR_RANK && len > 0, "ERRORS_RETURN rank %d %s", rc, text);
    rc = MPI_Send(&x, 1, (MPI_Datatype)0x12345, 0, 0, c);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TYPE, "ERRORS_RETURN type %d", cls);
    double dx = 0, dy = 0;
    rc = MPI_Allreduce(&dx, &dy, 1, MPI_DOUBLE, MPI_BAND, c);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OP, "ERRORS_RETURN op %d", cls);
    /* More elements in all than an int counts: an error on every rank
       (checked before any buffer is read), not a wrong block size. */
    int huge = INT_MAX / 2 + 1;
    rc = MPI_Allgather(&x, 1, MPI_INT, &dy, huge, MPI_INT, c);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "ERRORS_RETURN allgather count %d", cls);
    /* A truncated receive: its own class from MPI_Wait, MPI_ERR_IN_STATUS
       from MPI_Waitall with the class in its status. */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int two[2] = {1, 2}, one = 0, ecls = -1;
    MPI_Request tr[2];
    MPI_Status ts[2];
    MPI_Irecv(&one, 1, MPI_INT, left, 90, c, &tr[0]);
    MPI_Send(two, 2, MPI_INT, right, 90, c);
    rc = MPI_Wait(&tr[0], &ts[0]);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "Wait truncation %d", cls);
    MPI_Irecv(&one, 1, MPI_INT, left, 91, c, &tr[0]);
    MPI_Isend(two, 2, MPI_INT, right, 91, c, &tr[1]);
    rc = MPI_Waitall(2, tr, ts);
    MPI_Error_class(rc, &cls);
    MPI_Error_class(ts[0].MPI_ERROR, &ecls);
    CHECK(cls == MPI_ERR_IN_STATUS && ecls == MPI_ERR_TRUNCATE, "Waitall truncation %d %d", cls, ecls);
    /* A truncated MPI_Sendrecv: its class, and a status that names the
       sender and tag and counts what arrived. */
    MPI_Status ss;
    ss.MPI_SOURCE = -7;
    ss.MPI_TAG = -7;
    rc = MPI_Sendrecv(two, 2, MPI_INT, right, 93, &one, 1, MPI_INT, left, 93, c, &ss);
    MPI_Error_class(rc, &cls);
    int got = -1;
    MPI_Get_count(&ss, MPI_INT, &got);
    CHECK(cls == MPI_ERR_TRUNCATE && ss.MPI_SOURCE == left && ss.MPI_TAG == 93 && got == 1,
          "Sendrecv truncation %d source %d tag %d count %d", cls, ss.MPI_SOURCE, ss.MPI_TAG, got);
    /* Argument errors of the point-to-point calls, each with its class;
     * an empty message needs no buffer. */
    MPI_Request er;
    rc = MPI_Send(&x, -1, MPI_INT, right, 0, c);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "negative count %d", cls);
    rc = MPI_Isend(NULL, 1, MPI_INT, right, 0, c, &er);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "Isend null buffer %d", cls);
    rc = MPI_Recv(NULL, 1, MPI_INT, left, 0, c, MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "Recv null buffer %d", cls);
    MPI_Status zs;
    MPI_Irecv(NULL, 0, MPI_INT, left, 92, c, &er);
    rc = MPI_Send(NULL, 0, MPI_INT, right, 92, c);
    CHECK(rc == MPI_SUCCESS, "empty Send %d", rc);
    rc = MPI_Wait(&er, &zs);
    MPI_Get_count(&zs, MPI_INT, &len);
    CHECK(rc == MPI_SUCCESS && len == 0 && zs.MPI_SOURCE == left, "empty Recv %d %d", rc, len);
    /* A blocking receive that truncates: its own class. */
    MPI_Send(two, 2, MPI_INT, right, 93, c);
    rc = MPI_Recv(&one, 1, MPI_INT, left, 93, c, MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "Recv truncation %d", cls);
    /* No communicator: MPI_ERR_COMM, on the world's error handler. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Send(&x, 1, MPI_INT, right, 0, MPI_COMM_NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COMM, "Send on COMM_NULL %d", cls);
    rc = MPI_Irecv(&x, 1, MPI_INT, left, 0, MPI_COMM_NULL, &er);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COMM, "Irecv on COMM_NULL %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&c);
    /* Functions vpml does not implement fail with their own class. */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(lib, &len);
    if (strstr(lib, "vpml") != NULL) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm joined;
        rc = MPI_Comm_join(-1, &joined);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "unsupported %d", cls);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
}

/* Generalized requests: the application completes them; the query
   function gives the status, the free function runs once, the cancel
   function is told whether the request completed. */
static int greq_freed, greq_cancelled_complete = -1;

static int greq_query(void *extra, MPI_Status *st) {
    MPI_Status_set_elements(st, MPI_INT, *(int *)extra);
    MPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = 5;
    st->MPI_TAG = 77;
    return MPI_SUCCESS;
}

static int greq_free(void *extra) {
    (void)extra;
    greq_freed++;
    return MPI_SUCCESS;
}

static int greq_free_fails(void *extra) {
    (void)extra;
    return MPI_ERR_OTHER;
}

static int greq_cancel(void *extra, int complete) {
    (void)extra;
    greq_cancelled_complete = complete;
    return MPI_SUCCESS;
}

static void generalized_requests(void) {
    int n = 3, flag = -1, count = -1, idx = -1;
    MPI_Request r;
    MPI_Status st;
    CHECK(MPI_Grequest_start(greq_query, greq_free, greq_cancel, &n, &r) == MPI_SUCCESS, "Grequest_start");
    MPI_Test(&r, &flag, &st);
    CHECK(flag == 0 && r != MPI_REQUEST_NULL, "Test before Grequest_complete: flag %d", flag);
    MPI_Cancel(&r);
    CHECK(greq_cancelled_complete == 0, "cancel function told complete=%d", greq_cancelled_complete);
    MPI_Grequest_complete(r);
    MPI_Request_get_status(r, &flag, &st);
    CHECK(flag == 1 && st.MPI_TAG == 77 && greq_freed == 0, "Request_get_status: flag %d tag %d freed %d", flag,
          st.MPI_TAG, greq_freed);
    MPI_Wait(&r, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(r == MPI_REQUEST_NULL && st.MPI_SOURCE == 5 && st.MPI_TAG == 77 && count == 3,
          "Wait: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, count);
    CHECK(greq_freed == 1, "free function ran %d times", greq_freed);

    /* Completed in the middle of a Waitany over it and a receive. */
    MPI_Request rs[2];
    int v = -1, me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Irecv(&v, 1, MPI_INT, me, 9, MPI_COMM_WORLD, &rs[0]);
    MPI_Grequest_start(greq_query, greq_free, greq_cancel, &n, &rs[1]);
    MPI_Grequest_complete(rs[1]);
    MPI_Waitany(2, rs, &idx, &st);
    CHECK(idx == 1 && st.MPI_TAG == 77 && greq_freed == 2, "Waitany: index %d tag %d freed %d", idx, st.MPI_TAG,
          greq_freed);
    int out = 41;
    MPI_Send(&out, 1, MPI_INT, me, 9, MPI_COMM_WORLD);
    MPI_Wait(&rs[0], MPI_STATUS_IGNORE);
    CHECK(v == 41, "receive beside a generalized request: %d", v);

    /* Freed before it completes: the free function runs at completion. */
    MPI_Grequest_start(greq_query, greq_free, greq_cancel, &n, &r);
    MPI_Request keep = r;
    MPI_Request_free(&r);
    CHECK(r == MPI_REQUEST_NULL && greq_freed == 2, "Request_free in flight: freed %d", greq_freed);
    MPI_Grequest_complete(keep);
    CHECK(greq_freed == 3, "free function at completion of a freed request: %d", greq_freed);
    /* A failing free function: Waitall says MPI_ERR_IN_STATUS, the status
       carries its code; a null request's status is empty, MPI_ERROR
       included. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request two[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status sts[2];
    sts[0].MPI_ERROR = sts[1].MPI_ERROR = -5;
    MPI_Grequest_start(greq_query, greq_free_fails, greq_cancel, &n, &two[1]);
    MPI_Grequest_complete(two[1]);
    int wrc = MPI_Waitall(2, two, sts);
    CHECK(wrc == MPI_ERR_IN_STATUS && sts[1].MPI_ERROR == MPI_ERR_OTHER && sts[0].MPI_ERROR == MPI_SUCCESS &&
              sts[0].MPI_TAG == MPI_ANY_TAG,
          "Waitall with a failing free function: rc %d, errors %d %d", wrc, sts[0].MPI_ERROR, sts[1].MPI_ERROR);
    int rc = MPI_Grequest_complete(keep), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_REQUEST, "completing a freed request twice: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Persistent buffered and ready sends; MPI-1's error handler names;
   MPI_Pcontrol. */
static void persistent_modes(void) {
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (me + 1) % n, left = (me + n - 1) % n;
    int out = 0, out2 = 0, in[2] = {-1, -1};
    MPI_Request r[4];
    MPI_Bsend_init(&out, 1, MPI_INT, right, 31, MPI_COMM_WORLD, &r[0]);
    MPI_Rsend_init(&out2, 1, MPI_INT, right, 32, MPI_COMM_WORLD, &r[1]);
    MPI_Recv_init(&in[0], 1, MPI_INT, left, 31, MPI_COMM_WORLD, &r[2]);
    MPI_Recv_init(&in[1], 1, MPI_INT, left, 32, MPI_COMM_WORLD, &r[3]);
    for (int round = 0; round < 3; round++) {
        MPI_Start(&r[2]);
        MPI_Start(&r[3]);
        MPI_Barrier(MPI_COMM_WORLD); /* receives posted before ready sends */
        out = me * 100 + round;
        MPI_Start(&r[0]);
        out = -7; /* a buffered send copied the message at its start */
        out2 = me * 100 + round;
        MPI_Start(&r[1]);
        MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
        CHECK(in[0] == left * 100 + round && in[1] == left * 100 + round, "Bsend_init/Rsend_init round %d: %d %d",
              round, in[0], in[1]);
        CHECK(r[0] != MPI_REQUEST_NULL, "a persistent request stays allocated");
    }
    for (int i = 0; i < 4; i++) MPI_Request_free(&r[i]);
    /* Started after their communicator was freed (MPI allows it). */
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    int o = me + 7, i2 = -1;
    MPI_Bsend_init(&o, 1, MPI_INT, right, 5, d, &r[0]);
    MPI_Recv_init(&i2, 1, MPI_INT, left, 5, d, &r[1]);
    MPI_Comm_free(&d);
    MPI_Startall(2, r);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    CHECK(i2 == left + 7, "Bsend_init started after Comm_free: %d", i2);
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);

    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Errhandler_get(MPI_COMM_WORLD, &eh);
    CHECK(eh == MPI_ERRORS_RETURN, "Errhandler_get after Errhandler_set: %x", (unsigned)eh);
    MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    CHECK(MPI_Pcontrol(1) == MPI_SUCCESS && MPI_Pcontrol(0, "x") == MPI_SUCCESS, "Pcontrol");
}

/* MPI_Type_get_envelope/contents give back each constructor and its
   arguments, also after the inner type was freed. */
static void type_contents(void) {
    int ni, na, nd, comb;
    MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_NAMED && ni == 0 && na == 0 && nd == 0, "envelope of MPI_INT: %d", comb);

    MPI_Datatype vec, st, got[2], sub;
    MPI_Type_vector(3, 2, 5, MPI_DOUBLE, &vec);
    int lens[2] = {1, 4};
    MPI_Aint displs[2] = {0, 64};
    MPI_Datatype types[2] = {MPI_CHAR, vec};
    MPI_Type_create_struct(2, lens, displs, types, &st);
    MPI_Type_free(&vec); /* the struct still refers to it */
    MPI_Type_get_envelope(st, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 3 && na == 2 && nd == 2, "struct envelope %d %d %d %d", comb, ni, na,
          nd);
    int is[3];
    MPI_Aint as[2];
    MPI_Type_get_contents(st, 3, 2, 2, is, as, got);
    CHECK(is[0] == 2 && is[1] == 1 && is[2] == 4 && as[0] == 0 && as[1] == 64 && got[0] == MPI_CHAR,
          "struct contents %d %d %d %ld", is[0], is[1], is[2], (long)as[1]);
    MPI_Type_get_envelope(got[1], &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && nd == 1, "inner vector envelope %d", comb);
    int vi[3];
    MPI_Datatype vt;
    MPI_Type_get_contents(got[1], 3, 0, 1, vi, NULL, &vt);
    CHECK(vi[0] == 3 && vi[1] == 2 && vi[2] == 5 && vt == MPI_DOUBLE, "vector contents %d %d %d", vi[0], vi[1], vi[2]);
    int size = 0;
    MPI_Type_size(got[1], &size);
    CHECK(size == 48, "the inner vector lives on: size %d", size);
    MPI_Type_free(&got[1]);
    MPI_Type_free(&st);

    int sizes[2] = {4, 6}, subs[2] = {2, 3}, starts[2] = {1, 2};
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub);
    MPI_Type_get_envelope(sub, &ni, &na, &nd, &comb);
    int si[8];
    MPI_Datatype so;
    MPI_Type_get_contents(sub, 8, 0, 1, si, NULL, &so);
    CHECK(comb == MPI_COMBINER_SUBARRAY && ni == 8 && si[0] == 2 && si[1] == 4 && si[4] == 3 && si[6] == 2 &&
              si[7] == MPI_ORDER_C && so == MPI_INT,
          "subarray contents: combiner %d ni %d", comb, ni);
    MPI_Type_free(&sub);

    /* A datatype of no bytes counts an empty message as 0 of it. */
    MPI_Datatype zero;
    MPI_Type_contiguous(0, MPI_INT, &zero);
    MPI_Type_commit(&zero);
    int me, zc = -1, dummy = 0;
    MPI_Status zs;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Sendrecv(&dummy, 1, zero, me, 77, &dummy, 1, zero, me, 77, MPI_COMM_WORLD, &zs);
    MPI_Get_count(&zs, zero, &zc);
    CHECK(zc == 0, "Get_count of a zero-size datatype: %d", zc);
    MPI_Type_free(&zero);
}

/* A status through Fortran's forms and back. */
static void status_conversions(void) {
    MPI_Status st, back;
    memset(&st, 0, sizeof st);
    st.MPI_SOURCE = 3;
    st.MPI_TAG = 7;
    st.MPI_ERROR = MPI_ERR_TAG;
    MPI_Fint f[MPI_F_STATUS_SIZE];
    MPI_Status_c2f(&st, f);
    MPI_Status_f2c(f, &back);
    CHECK(f[MPI_F_SOURCE] == 3 && f[MPI_F_TAG] == 7 && back.MPI_SOURCE == 3 && back.MPI_TAG == 7 &&
              back.MPI_ERROR == MPI_ERR_TAG,
          "status conversions");
#ifdef VPML_MPI_ABI
    /* (Debian's MPICH, built without Fortran 2008, lacks these.) */
    MPI_F08_status f08;
    MPI_Fint f2[MPI_F_STATUS_SIZE];
    MPI_Status_f2f08(f, &f08);
    MPI_Status_f082f(&f08, f2);
    MPI_Status_c2f08(&st, &f08);
    MPI_Status_f082c(&f08, &back);
    CHECK(f2[MPI_F_TAG] == 7 && f08.MPI_ERROR == MPI_ERR_TAG && back.MPI_TAG == 7, "status through F08: %d", back.MPI_TAG);
#endif
}

/* MPI_T: the interface opens and closes (nested); vpml's counters are
   performance variables in one category, read through a session's
   handles; there are no control variables. */
static void tool_interface(void) {
    int provided = -1, n = -1, m = -1, k = -1;
    CHECK(MPI_T_cvar_get_num(&n) == MPI_T_ERR_NOT_INITIALIZED, "MPI_T before init");
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_T_cvar_get_num(&n);
    MPI_T_pvar_get_num(&m);
    MPI_T_category_get_num(&k);
    CHECK(provided == MPI_THREAD_SINGLE && n == 0 && m >= 1 && k == 1, "MPI_T counts %d %d %d", n, m, k);
    int idx = -1;
    CHECK(MPI_T_cvar_get_index("no_such_variable", &idx) == MPI_T_ERR_INVALID_NAME, "MPI_T lookup by name");
    /* Every variable is a read-only, continuous counter. */
    int sent = -1;
    for (int i = 0; i < m; i++) {
        char name[64], desc[256];
        int name_len = sizeof name, desc_len = sizeof desc, verbosity, var_class, bind, readonly, continuous, atomic;
        MPI_Datatype dt;
        MPI_T_enum et;
        CHECK(MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &dt, &et, desc, &desc_len, &bind,
                                  &readonly, &continuous, &atomic) == MPI_SUCCESS &&
                  var_class == MPI_T_PVAR_CLASS_COUNTER && dt == MPI_UNSIGNED_LONG_LONG && readonly && continuous &&
                  name_len == (int)strlen(name) + 1,
              "pvar %d: %s", i, name);
        if (!strcmp(name, "vpml_messages_sent")) sent = i;
    }
    CHECK(MPI_T_pvar_get_index("vpml_messages_sent", MPI_T_PVAR_CLASS_COUNTER, &idx) == MPI_SUCCESS && idx == sent && sent >= 0,
          "pvar_get_index %d %d", idx, sent);
    CHECK(MPI_T_pvar_get_info(m, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == MPI_T_ERR_INVALID_INDEX,
          "pvar index past the count");
    char cat[16];
    int cat_len = sizeof cat, cvars = -1, pvars = -1, cats = -1, in_cat[16];
    MPI_T_category_get_info(0, cat, &cat_len, NULL, NULL, &cvars, &pvars, &cats);
    MPI_T_category_get_pvars(0, 16, in_cat);
    CHECK(!strcmp(cat, "vpml") && cvars == 0 && pvars == m && cats == 0 && in_cat[sent] == sent, "category %s: %d pvars", cat, pvars);
    MPI_T_pvar_session ps = MPI_T_PVAR_SESSION_NULL;
    MPI_T_pvar_session_create(&ps);
    MPI_T_pvar_handle ph;
    int count = -1;
    MPI_T_pvar_handle_alloc(ps, sent, NULL, &ph, &count);
    unsigned long long before = 0, after = 0;
    MPI_T_pvar_read(ps, ph, &before);
    int x = rank;
    MPI_Sendrecv_replace(&x, 1, MPI_INT, 0, 5, 0, 5, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    MPI_T_pvar_read(ps, ph, &after);
    CHECK(count == 1 && after > before, "vpml_messages_sent %llu -> %llu", before, after);
    CHECK(MPI_T_pvar_start(ps, ph) == MPI_T_ERR_PVAR_NO_STARTSTOP && MPI_T_pvar_write(ps, ph, &after) == MPI_T_ERR_PVAR_NO_WRITE &&
              MPI_T_pvar_reset(ps, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS,
          "a continuous read-only counter");
    MPI_T_pvar_session other = MPI_T_PVAR_SESSION_NULL;
    MPI_T_pvar_session_create(&other);
    CHECK(other != ps && MPI_T_pvar_read(other, ph, &after) == MPI_T_ERR_INVALID_HANDLE, "a handle of another session");
    MPI_T_pvar_session_free(&other);
    CHECK(MPI_T_pvar_handle_free(ps, &ph) == MPI_SUCCESS && ph == MPI_T_PVAR_HANDLE_NULL, "pvar handle free");
    CHECK(MPI_T_pvar_session_free(&ps) == MPI_SUCCESS && ps == MPI_T_PVAR_SESSION_NULL, "pvar session");
    CHECK(MPI_T_cvar_get_info(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == MPI_T_ERR_INVALID_INDEX, "no cvars");
    CHECK(MPI_T_finalize() == MPI_SUCCESS && MPI_T_finalize() == MPI_SUCCESS &&
              MPI_T_finalize() == MPI_T_ERR_NOT_INITIALIZED,
          "MPI_T_finalize nests");
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        if (rank == 0) printf("FAIL api needs 4 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
        /* MPI_ERRORS_ARE_FATAL: this stops the job with one line. */
        int x = 0;
        if (rank == 1) MPI_Send(&x, 1, MPI_INT, 99, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        printf("FAIL still running\n");
        MPI_Finalize();
        return 1;
    }
    environment();
    communicators();
    attributes();
    point_to_point();
    datatypes();
    packing();
    collectives();
    errors();
    generalized_requests();
    persistent_modes();
    type_contents();
    tool_interface();
    status_conversions();
    int total = 0;
    MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total == 0) printf("api ok %d\n", checks);
    MPI_Finalize();
    int fin = 0;
    MPI_Finalized(&fin);
    return total == 0 && fin ? 0 : 1;
}
