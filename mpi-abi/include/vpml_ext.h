/* vpml_ext.h — vpml's extensions for MPI C programs.
 *
 * Without them an MPI program still recovers from a crashed rank under
 * `vpml run --protocol pessimist`: the rank restarts from the beginning
 * and replays. With them it restarts from its last checkpoint:
 *
 *     size_t n = sizeof st;
 *     if (VPMLX_Restarted(&st, &n)) { ... resume from st ... }
 *     for (...) { ...; if (step % 100 == 0) VPMLX_Checkpoint(&st, sizeof st); }
 *
 * Call VPMLX_Checkpoint where no request is in flight and, under a
 * protocol, no one-sided window is alive (it fails otherwise). Without a
 * protocol it saves nothing and VPMLX_Restarted returns 0. */
#ifndef VPML_EXT_H
#define VPML_EXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Save len bytes at state as this rank's checkpoint. MPI_SUCCESS or an
   error code (through MPI_COMM_WORLD's error handler). */
int VPMLX_Checkpoint(const void *state, size_t len);

/* 1 if this process resumes from a checkpoint, else 0. On 1, *len becomes
   the state's length and, when buf is not NULL and *len (its capacity)
   was large enough, the state is copied into buf. */
int VPMLX_Restarted(void *buf, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* VPML_EXT_H */
