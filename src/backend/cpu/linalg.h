/* linalg.h — the CPU backend's linalg entry (backend.h; linalg.c). */
#ifndef NB_CPU_LINALG_H
#define NB_CPU_LINALG_H

#include "../backend.h"

nb_status nb__cpu_linalg(nb_op op, int flags, const nb_tensor *a, const nb_tensor *b, nb_tensor *out,
                         nb_tensor *out2, nb_tensor *info);

#endif
