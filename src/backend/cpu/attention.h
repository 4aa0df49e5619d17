/* attention.h — the CPU backend's attention entry (backend.h; attention.c). */
#ifndef NB_CPU_ATTENTION_H
#define NB_CPU_ATTENTION_H

#include "../backend.h"

nb_status nb__cpu_attention(nb_tensor *out, nb_tensor *lse, const nb_tensor *q, const nb_tensor *k,
                            const nb_tensor *v, int mask, int64_t window, double scale);
nb_status nb__cpu_attention_backward(nb_tensor *dq, nb_tensor *dk, nb_tensor *dv, const nb_tensor *const *in,
                                     int mask, int64_t window, double scale);

#endif
