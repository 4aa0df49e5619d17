/*
 * fuzz_safetensors.c — libFuzzer target for the safetensors reader: open the input as a file, read
 * every tensor it lists, release everything. Any crash, sanitizer report
 * or leak is a bug; an error status is the expected answer to bad input.
 */
#include <nabla.h>

#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[32];
    int fd = fuzz_input_file(data, size, path);
    nb_safetensors *h = nb_safetensors_open(path);
    close(fd); /* the reader keeps its own mapping */
    volatile unsigned sink = 0;
    if (h) {
        nb_scope_begin();
        int n = nb_safetensors_count(h);
        for (int i = 0; i < n; i++) {
            nb_tensor *t = nb_safetensors_get(h, nb_safetensors_name(h, i));
            if (t) sink += fuzz_touch(t);
        }
        if (nb_safetensors_name(h, n)) abort(); /* one past the end */
        nb_safetensors_close(h); /* tensors borrowed from the mapping outlive the handle */
        nb_scope_end();
    }
    (void)sink;
    nb_clear_error();
    return 0;
}
