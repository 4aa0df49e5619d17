/* ref_attention.h — the reference backend's attention entry (backend.h; ref_attention.c). */
#ifndef NB_REF_ATTENTION_H
#define NB_REF_ATTENTION_H

#include "../backend.h"

nb_status nb__ref_attention(nb_tensor *out, nb_tensor *lse, const nb_tensor *q, const nb_tensor *k,
                            const nb_tensor *v, int mask, int64_t window, double scale);
nb_status nb__ref_attention_backward(nb_tensor *dq, nb_tensor *dk, nb_tensor *dv, const nb_tensor *const *in,
                                     int mask, int64_t window, double scale);

#endif
