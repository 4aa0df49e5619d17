/* quant.h — the CPU backend's low-precision entries (backend.h; quant.c). */
#ifndef NB_CPU_QUANT_H
#define NB_CPU_QUANT_H

#include "../backend.h"

nb_status nb__cpu_quantize(const nb_lowp_row *r, int64_t rows, const nb_tensor *x, nb_tensor *codes, nb_tensor *scales);
nb_status nb__cpu_dequantize(const nb_lowp_row *r, int64_t rows, const nb_tensor *codes, const nb_tensor *scales,
                             nb_tensor *out);
nb_status nb__cpu_scaled_matmul(const nb_lowp_row *ra, int64_t ma, const nb_tensor *a, const nb_tensor *as,
                                const nb_lowp_row *rb, int64_t nb, const nb_tensor *b, const nb_tensor *bs,
                                nb_tensor *out);

#endif
