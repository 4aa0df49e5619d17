/*
 * example.c — a small program built against an installed nabla (install_test.sh builds it by each
 * route: shared and static via pkg-config, and CMake's find_package). It touches every dependency of
 * the library: autograd and libm (the gradient of sum(x^3 / 3 + 2x) against its formula), jansson
 * (a safetensors round trip) and zlib (the IDX reader), and exits 0 only when all give the right
 * answers. It needs no library of its own (not even libm): the README's one-line link command suffices.
 */
#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "example: %s: %s\n", what, nb_last_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: example SCRATCH_DIR\n");
        return 2;
    }
    double xv[] = {0, 1, 2};
    nb_scope_begin();
    nb_tensor *x = nb_from_data(xv, NB_SHAPE(3), NB_F64);
    if (!x || nb_set_requires_grad(x, true) != NB_OK) return fail("from_data");
    nb_tensor *loss = nb_sum(nb_add(nb_div(nb_pow(x, 3.0), 3.0), nb_mul(x, 2.0)), NULL, 0, false);
    if (!loss || nb_backward(loss, NULL, false) != NB_OK) return fail("backward");
    const double *g = nb_data_ptr(nb_grad(x));
    for (int i = 0; i < 3; i++) {
        double want = xv[i] * xv[i] + 2, err = g[i] - want;
        if (err > 1e-12 * want || -err > 1e-12 * want) {
            fprintf(stderr, "example: gradient %d is %.17g, expected %.17g\n", i, g[i], want);
            return 1;
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/x.safetensors", argv[1]);
    const char *names[] = {"x"};
    if (nb_safetensors_save(path, names, &x, 1) != NB_OK) return fail("safetensors_save");
    nb_safetensors *h = nb_safetensors_open(path);
    nb_tensor *back = h ? nb_safetensors_get(h, "x") : NULL;
    if (!back || memcmp(nb_data_ptr(back), xv, sizeof xv) != 0) return fail("safetensors round trip");
    nb_safetensors_close(h);
    snprintf(path, sizeof path, "%s/missing-idx1-ubyte.gz", argv[1]);
    if (nb_idx_load(path) || nb_last_status() != NB_ERR_IO) return fail("idx_load of a missing file");
    nb_clear_error();
    nb_scope_end();
    puts("example: ok");
    return 0;
}
