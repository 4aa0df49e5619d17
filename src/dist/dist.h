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

/** t /= n elementwise (t contiguous f32 or f64). */
void nb__dist_divide(nb_tensor *t, int n);
/** True while MPI is initialized and attached (nb_dist_init), with more than... any size. */
bool nb__dist_active(void);
/** Every rank agrees on t's dtype and shape (one small all-reduce); NB_ERR_SHAPE naming op and
 *  this rank's tensor otherwise.  NB_OK at once outside MPI. */
nb_status nb__dist_agree(const char *op, nb_dtype dt, const int64_t *shape, int ndim);

#endif
