/*
 * fuzz_idx.c — libFuzzer target for the IDX reader (plain or gzip'd): load the input as a file and
 * read the whole tensor. Any crash, sanitizer report or leak is a bug; an error status is the
 * expected answer to bad input.
 */
#include <nabla.h>

#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[32];
    int fd = fuzz_input_file(data, size, path);
    nb_tensor *t = nb_idx_load(path);
    close(fd);
    volatile unsigned sink = 0;
    if (t) {
        sink += fuzz_touch(t);
        nb_release(t);
    } else if (nb_last_status() == NB_OK) {
        abort(); /* a failure must say why */
    }
    (void)sink;
    nb_clear_error();
    return 0;
}
