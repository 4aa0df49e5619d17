/*
 * fuzz_input.h — hands a libFuzzer input to a reader that takes a path: the bytes go into an
 * anonymous in-memory file (memfd) opened again through /proc/self/fd. memfd_create needs
 * _GNU_SOURCE, which tests/fuzz/CMakeLists.txt defines.
 */
#ifndef NB_FUZZ_INPUT_H
#define NB_FUZZ_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Write data to a new memfd; returns its fd and its path in path[32]. Aborts when the system refuses. */
static int fuzz_input_file(const uint8_t *data, size_t size, char path[32]) {
    int fd = memfd_create("nabla-fuzz", MFD_CLOEXEC);
    if (fd < 0) abort();
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) abort();
        done += (size_t)w;
    }
    snprintf(path, 32, "/proc/self/fd/%d", fd);
    return fd;
}

/* Read every byte of a host tensor's data, so ASan checks the whole buffer the reader handed out. */
static unsigned fuzz_touch(const nb_tensor *t) {
    const unsigned char *p = nb_data_ptr(t);
    size_t n = (size_t)nb_numel(t) * nb_dtype_size(nb_dtype_of(t));
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++) sum += p[i];
    return sum;
}

#endif
