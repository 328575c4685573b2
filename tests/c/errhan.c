/* User error handlers and user error classes, codes and strings, on any
   number of ranks. Every check that fails prints "FAIL <what>" and the
   program exits 1; rank 0 ends with "errhan ok <checks>". Built with
   `vpml mpicc` or MPICH's mpicc.mpich. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static int calls, last_code;
static MPI_Comm last_comm;


static void handler(MPI_Comm *comm, int *code, ...) {
    calls++;
    last_code = *code;
    last_comm = *comm;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    /* A user class with two codes and strings. */
    int class = -1, code1 = -1, code2 = -1, got = -1, len = -1;
    MPI_Add_error_class(&class);
    MPI_Add_error_code(class, &code1);
    MPI_Add_error_code(MPI_ERR_ARG, &code2);
    MPI_Add_error_string(code1, "the solver diverged");
    char text[MPI_MAX_ERROR_STRING];
    MPI_Error_class(code1, &got);
    CHECK(got == class, "Error_class of a user code: %d, want %d", got, class);
    MPI_Error_class(class, &got);
    CHECK(got == class, "Error_class of a user class: %d", got);
    MPI_Error_class(code2, &got);
    CHECK(got == MPI_ERR_ARG, "a user code of a predefined class: %d", got);
    MPI_Error_string(code1, text, &len);
    CHECK(strcmp(text, "the solver diverged") == 0 && len == 19, "Error_string %s %d", text, len);
    MPI_Error_string(class, text, &len);
    CHECK(len == 0, "a class with no string: %s", text);

    /* A user handler on a duplicate: called with the communicator and
       the code, and the call returns the code. */
    MPI_Errhandler eh;
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_create_errhandler(handler, &eh);
    MPI_Comm_set_errhandler(dup, eh);
    MPI_Errhandler_free(&eh);
    CHECK(eh == MPI_ERRHANDLER_NULL, "Errhandler_free");
    MPI_Comm_call_errhandler(dup, code1);
    CHECK(calls == 1 && last_code == code1 && last_comm == dup, "Comm_call_errhandler %d %d", calls, last_code);
    int r = MPI_Send(NULL, 0, MPI_INT, 99, 0, dup);
    CHECK(r != MPI_SUCCESS && calls == 2 && last_code == r, "a failing call runs the handler: %d %d %d", r, calls, last_code);
    MPI_Error_class(r, &got);
    CHECK(got == MPI_ERR_RANK, "class of the failed call %d", got);
    /* MPI_ERRORS_RETURN: nothing is called. */
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    MPI_Comm_call_errhandler(dup, code2);
    CHECK(calls == 2, "ERRORS_RETURN calls nothing");
    MPI_Comm_free(&dup);

    int all_failed = 0;
    MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all_failed == 0) printf("errhan ok %d\n", checks);
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
