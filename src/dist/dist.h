/* dist.h — inside the distributed layer (D1): MPI's state shared by the collectives (dist.c) and the
 * gradient synchronizer (ddp.c). */
#ifndef NB_DIST_H
#define NB_DIST_H

#include "../backend/backend.h"

#ifdef NB_HAVE_MPI
#include <mpi.h>
/** MPI's datatype of a float dtype's elements as reduced (f16, bf16: none, NULL-equivalent). */
MPI_Datatype nb__dist_mpi_type(nb_dtype dt);
/** NB_ERR_DEVICE naming op and MPI's message for error code rc; NB_OK for MPI_SUCCESS. */
nb_status nb__dist_check(const char *op, int rc);
#endif

/** dst[i] = src[i] / by for n elements of f32 or f64 (dst may be src). */
void nb__dist_divide(void *dst, const void *src, int64_t n, nb_dtype dt, int by);
/** True while MPI is initialized and attached (nb_dist_init), with more than... any size. */
bool nb__dist_active(void);
/** The ranks agree (one small all-reduce every rank takes part in, whatever its own checks gave):
 *  `local` is this rank's verdict on its arguments (its error already recorded), sig[0..n) (n <= 32)
 *  what must be equal everywhere, `mine` this rank's in words.  Returns local when it failed, else
 *  NB_ERR_ARG when another rank's failed, NB_ERR_SHAPE when the signatures differ, else NB_OK.
 *  Outside MPI: local. */
nb_status nb__dist_agree(const char *op, nb_status local, const int64_t *sig, int n, const char *mine);

#endif
