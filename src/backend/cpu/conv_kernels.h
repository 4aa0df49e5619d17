/* conv_kernels.h — the CPU backend's sliding-window entry point (conv_kernels.c) and its
 * conv2d image by image (conv_images.c). */
#ifndef NB_CPU_CONV_KERNELS_H
#define NB_CPU_CONV_KERNELS_H

#include "../backend.h"

#include <stdatomic.h>

/** One sliding-window pass (UNFOLD, FOLD, MAX_POOL2D, MAX_UNPOOL2D) over f32 [H, W] planes of
 *  one geometry: what the plane kernels read. */
typedef struct nb_cpu_win {
    nb_op op;
    const float *x;
    float *out;
    int64_t *idx;
    nb_window2d w;
    int64_t H, W, OH, OW;  /* image plane [H, W]; window grid [OH, OW] */
    int64_t work;          /* grid elements per plane */
    /* 2x2 / stride-2 max pooling with indices: the ISA's row kernel (nb_cpu_kernels pool2x2_idx),
     * or else each output's first tap in the plane for the plane loop; both NULL otherwise */
    void (*pool_row)(const float *x, int64_t first, int64_t W, int64_t n, float *out, int64_t *idx);
    const int32_t *taps;
    const uint8_t *inside; /* shifted unfold / fold: per kernel column q, OH*W flags (1: the tap lies in its image row) */
    void *table;           /* the allocation taps or inside point into (table_size bytes), or NULL */
    size_t table_size;
    _Atomic int64_t *bad_plane; /* MAX_UNPOOL2D: lowered to the first plane holding an index outside it */
} nb_cpu_win;

/** Prepare pass c of op over [H, W] planes (grid: MAX_UNPOOL2D's pooled [h, w]; w: the other
 *  ops' geometry; idx: MAX_POOL2D writes indices), its table built here, on the calling
 *  thread, so that nb__cpu_win_run allocates nothing.  NB_OK or NB_ERR_OOM (nothing to release). */
nb_status nb__cpu_win_prepare(nb_cpu_win *c, nb_op op, int64_t H, int64_t W, const int64_t *grid,
                              const nb_window2d *w, bool idx);
/** Planes [0, planes) of prepared pass c from x into out (and idx), on the calling thread. */
void nb__cpu_win_run(const nb_cpu_win *c, const float *x, float *out, int64_t *idx, int64_t planes);
/** Free c's table. */
void nb__cpu_win_release(nb_cpu_win *c);

/** backend.h `window` for the CPU backend: f32 in parallel planes, other dtypes via the reference kernels. */
nb_status nb__cpu_window(nb_op op, nb_tensor *out, nb_tensor *idx, const nb_tensor *x, const nb_window2d *w);

/** backend.h `conv2d`: image by image, each image's columns in a per-thread buffer. */
nb_status nb__cpu_conv2d(nb_tensor *y, const nb_tensor *x, const nb_tensor *w, const nb_tensor *b,
                         const nb_window2d *win, int64_t groups, bool relu);

/** backend.h `conv2d_backward`, image by image as nb__cpu_conv2d. */
nb_status nb__cpu_conv2d_backward(nb_tensor *dx, nb_tensor *dwi, nb_tensor *db, const nb_tensor *x,
                                  const nb_tensor *w, const nb_tensor *g, const nb_tensor *y, const nb_window2d *win,
                                  int64_t groups);

#endif
