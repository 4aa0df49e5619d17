/* io_support.h — file helpers shared by the I/O tests: a scratch directory, whole-file reads and writes. */
#ifndef NB_TEST_IO_SUPPORT_H
#define NB_TEST_IO_SUPPORT_H

#define _GNU_SOURCE /* nftw; must precede every system header, so include this file first */

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

/* The scratch directory of the running test program (created by io_setup). */
static char io_dir[64];

static int io_unlink_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* cmocka group setup / teardown: create and remove io_dir */
static int io_setup(void **state) {
    (void)state;
    snprintf(io_dir, sizeof io_dir, "/tmp/nabla-io-XXXXXX");
    return mkdtemp(io_dir) ? 0 : -1;
}
static int io_teardown(void **state) {
    (void)state;
    return nftw(io_dir, io_unlink_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* io_dir/name into buf (PATH_MAX-sized); returns buf */
static const char *io_path(char *buf, const char *name) {
    snprintf(buf, 4096, "%s/%s", io_dir, name);
    return buf;
}

/* Replace path with n bytes (unlinked first: rewriting in place makes ext4 flush on close). */
static void io_write(const char *path, const void *data, size_t n) {
    remove(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Whole file into a malloc'd buffer (freed by the caller); *n gets its size. */
static unsigned char *io_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* The call returned NULL with status s and a message containing `needle` (NULL: any). */
static void io_expect_error(const void *result, nb_status s, const char *needle) {
    if (result || nb_last_status() != s || (needle && !strstr(nb_last_message(), needle)))
        fprintf(stderr, "expected %s mentioning '%s', got %s%s: %s\n", nb_status_name(s), needle ? needle : "",
                result ? "a result and " : "", nb_status_name(nb_last_status()), nb_last_message());
    assert_null(result);
    assert_int_equal(nb_last_status(), s);
    if (needle) assert_non_null(strstr(nb_last_message(), needle));
    nb_clear_error();
}

#endif
