/* conv.h — how the sliding-window primitives keep their geometry in nb_attrs (shared by conv.c and vjp_conv.c). */
#ifndef NB_CONV_H
#define NB_CONV_H

#include "ops.h"

/** Store w in attrs->i[0..7]: kernel, stride, padding, dilation (each {h, w}). */
static inline void nb__window_to_attrs(nb_attrs *a, const nb_window2d *w) {
    for (int k = 0; k < 2; k++) {
        a->i[0 + k] = w->kernel[k];
        a->i[2 + k] = w->stride[k];
        a->i[4 + k] = w->padding[k];
        a->i[6 + k] = w->dilation[k];
    }
    a->ni = 8;
}

/** True when conv2d's window w (its kernel the weight's) is 1x1 with stride 1 and no padding: the
 *  unfolded columns are the image itself, so conv2d, its rule and its kernels skip the unfold. */
static inline bool nb__window_pointwise(const nb_window2d *w) {
    return w->kernel[0] == 1 && w->kernel[1] == 1 && w->stride[0] == 1 && w->stride[1] == 1 && w->padding[0] == 0 &&
           w->padding[1] == 0;
}

/** The geometry stored by nb__window_to_attrs. */
static inline nb_window2d nb__window_from_attrs(const nb_attrs *a) {
    return (nb_window2d){{a->i[0], a->i[1]}, {a->i[2], a->i[3]}, {a->i[4], a->i[5]}, {a->i[6], a->i[7]}};
}

#endif
