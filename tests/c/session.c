/* MPI 4.0's sessions, without MPI_Init: a library starts MPI with a
   session, makes a communicator from the mpi://WORLD process set, uses
   it, and ends the session (which leaves the job). Also the process sets'
   names and info, mpi://SELF, the session's error handlers (its own and
   one the program made), MPI_Info_create_env and MPI_INFO_ENV, and an
   intercommunicator made from two groups (Intercomm_create_from_groups). Rank 0
   prints "session ok <checks>" or FAIL lines. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int session_handled;
static void on_session_error(MPI_Session *s, int *code, ...) {
    (void)s;
    session_handled = *code;
}

int main(void) {
    MPI_Session s = MPI_SESSION_NULL;
    MPI_Info want, got;
    MPI_Info_create(&want);
    MPI_Info_set(want, "thread_level", "MPI_THREAD_SERIALIZED");
    CHECK(MPI_Session_init(want, MPI_ERRORS_RETURN, &s) == MPI_SUCCESS && s != MPI_SESSION_NULL, "Session_init");
    MPI_Info_free(&want);
    int flag = 0, initialized = -1;
    MPI_Initialized(&initialized);
    CHECK(initialized == 0, "a session is not MPI_Init: Initialized %d", initialized);
    char value[64] = "";
    MPI_Session_get_info(s, &got);
    MPI_Info_get(got, "thread_level", sizeof value - 1, value, &flag);
    CHECK(flag && !strcmp(value, "MPI_THREAD_SERIALIZED"), "thread_level %s", value);
    MPI_Info_free(&got);

    int n = 0;
    MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n);
    CHECK(n == 2, "%d process sets", n);
    char name[64];
    for (int i = 0; i < n; i++) {
        int len = 0;
        MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL);
        CHECK(len == (i == 0 ? 12 : 11), "pset %d name length %d (NUL included)", i, len);
        MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name);
        CHECK(!strcmp(name, i == 0 ? "mpi://WORLD" : "mpi://SELF"), "pset %d is %s", i, name);
    }

    MPI_Group world, self;
    MPI_Group_from_session_pset(s, "mpi://WORLD", &world);
    MPI_Group_from_session_pset(s, "mpi://SELF", &self);
    int wsize = 0, ssize = 0;
    MPI_Group_size(world, &wsize);
    MPI_Group_size(self, &ssize);
    MPI_Info pinfo;
    MPI_Session_get_pset_info(s, "mpi://WORLD", &pinfo);
    MPI_Info_get(pinfo, "mpi_size", sizeof value - 1, value, &flag);
    CHECK(flag && atoi(value) == wsize && ssize == 1, "mpi_size %s, world %d, self %d", value, wsize, ssize);
    MPI_Info_free(&pinfo);

    MPI_Comm comm;
    MPI_Comm_create_from_group(world, "org.vpml.test", MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm);
    MPI_Comm_rank(comm, &rank);
    int size = 0, sum = 0;
    MPI_Comm_size(comm, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, comm);
    CHECK(size == wsize && sum == size * (size - 1) / 2, "allreduce on the session's communicator: %d", sum);
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(comm, &eh);
    CHECK(eh == MPI_ERRORS_RETURN, "the communicator's error handler %x", (unsigned)eh);
    CHECK(MPI_Group_from_session_pset(s, "mpi://nowhere", &self) != MPI_SUCCESS, "an unknown process set fails");

    /* Even and odd ranks of the world, joined by an intercommunicator made
       from the two groups alone. */
    if (size >= 2) {
        int evens[64], odds[64], ne = 0, no = 0;
        for (int r = 0; r < size && r < 128; r++) {
            if (r % 2 == 0) evens[ne++] = r;
            else odds[no++] = r;
        }
        MPI_Group ge, go;
        MPI_Group_incl(world, ne, evens, &ge);
        MPI_Group_incl(world, no, odds, &go);
        MPI_Comm inter;
        int mine = rank % 2 == 0;
        MPI_Intercomm_create_from_groups(mine ? ge : go, 0, mine ? go : ge, 0, "org.vpml.halves", MPI_INFO_NULL,
                                         MPI_ERRORS_RETURN, &inter);
        int remote = -1, theirs = 0, want = 0;
        MPI_Comm_remote_size(inter, &remote);
        MPI_Allreduce(&rank, &theirs, 1, MPI_INT, MPI_SUM, inter);
        for (int r = mine ? 1 : 0; r < size; r += 2) want += r;
        CHECK(remote == (mine ? no : ne) && theirs == want, "intercommunicator from groups: remote %d, sum %d, not %d",
              remote, theirs, want);
        MPI_Comm_free(&inter);
        MPI_Group_free(&ge);
        MPI_Group_free(&go);
    }

    /* A session error handler of the program's, called on request. */
    MPI_Errhandler seh;
    MPI_Session_create_errhandler(on_session_error, &seh);
    MPI_Session_set_errhandler(s, seh);
    MPI_Session_call_errhandler(s, MPI_ERR_OTHER);
    CHECK(session_handled == MPI_ERR_OTHER, "the session's handler saw %d", session_handled);
    MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&seh);

    /* The environment as MPI_INFO_ENV and MPI_Info_create_env say it. */
    char *args[] = {"session-test", "a", "b"};
    MPI_Info env;
    MPI_Info_create_env(3, args, &env);
    MPI_Info_get(env, "argv", sizeof value - 1, value, &flag);
    CHECK(flag && !strcmp(value, "a b"), "Info_create_env argv '%s'", value);
    MPI_Info_get(env, "maxprocs", sizeof value - 1, value, &flag);
    CHECK(flag && atoi(value) == wsize, "Info_create_env maxprocs '%s'", value);
    MPI_Info_free(&env);
    MPI_Info_get(MPI_INFO_ENV, "command", sizeof value - 1, value, &flag);
    CHECK(flag && strstr(value, "session") != NULL, "MPI_INFO_ENV command '%s'", value);

    int failed_all = 0;
    MPI_Reduce(&failed, &failed_all, 1, MPI_INT, MPI_SUM, 0, comm);
    MPI_Comm_free(&comm);
    MPI_Group_free(&world);
    MPI_Group_free(&self);
    CHECK(MPI_Session_finalize(&s) == MPI_SUCCESS && s == MPI_SESSION_NULL, "Session_finalize");
    if (rank == 0 && failed_all == 0 && failed == 0) printf("session ok %d\n", checks);
    return failed_all != 0;
}
