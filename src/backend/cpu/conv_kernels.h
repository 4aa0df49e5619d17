/* conv_kernels.h — the CPU backend's sliding-window entry point (conv_kernels.c). */
#ifndef NB_CPU_CONV_KERNELS_H
#define NB_CPU_CONV_KERNELS_H

#include "../backend.h"

/** backend.h `window` for the CPU backend: f32 in parallel planes, other dtypes via the reference kernels. */
nb_status nb__cpu_window(nb_op op, nb_tensor *out, nb_tensor *idx, const nb_tensor *x, const nb_window2d *w);

#endif
