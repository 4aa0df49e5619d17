/* ref_linalg.h — the reference backend's linalg entry (backend.h; ref_linalg.c). */
#ifndef NB_REF_LINALG_H
#define NB_REF_LINALG_H

#include "../backend.h"

nb_status nb__ref_linalg(nb_op op, int flags, const nb_tensor *a, const nb_tensor *b, nb_tensor *out,
                         nb_tensor *out2, nb_tensor *info);

#endif
