/* The checks of the C test programs: CHECK(cond, printf-args) counts a
   check and, when `cond` is false, prints "FAIL rank R line L: ..." and
   counts a failure. The program sets `rank`. */
#ifndef VPML_TEST_CHECK_H
#define VPML_TEST_CHECK_H
#include <stdio.h>

static int rank, checks, failed;

#define CHECK(cond, ...)                                     \
    do {                                                     \
        checks++;                                            \
        if (!(cond)) {                                       \
            failed++;                                        \
            printf("FAIL rank %d line %d: ", rank, __LINE__); \
            printf(__VA_ARGS__);                             \
            printf("\n");                                    \
        }                                                    \
    } while (0)

#endif
