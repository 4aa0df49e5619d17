/*
 * test_io_idx.c — IDX reading (plain and gzip, every type code, hostile
 * files), the Fashion-MNIST loader (crafted and, when installed, the real
 * data set), and mini-batch gathering with nb_take_rows.
 */
#include "io_support.h"

#include <sys/stat.h>
#include <zlib.h>

/* ---- writing IDX files (the test's own encoder) ---- */

/* An IDX image in memory: header (type code, sizes) + big-endian elements. */
typedef struct idx_file {
    unsigned char bytes[1 << 16];
    size_t n;
} idx_file;

static void put_be(idx_file *f, uint64_t v, int size) {
    for (int b = size - 1; b >= 0; b--) f->bytes[f->n++] = (unsigned char)(v >> (8 * b));
}

static void idx_header(idx_file *f, uint8_t type, int ndim, const uint32_t *dims) {
    f->n = 0;
    put_be(f, type << 8 | (uint32_t)ndim, 4);
    for (int i = 0; i < ndim; i++) put_be(f, dims[i], 4);
}

/* Element i of each IDX type used by the tests, as a double (exact in the type). */
static double value_of(uint8_t type, int64_t i) {
    switch (type) {
    case 0x08: return (double)(i * 11 % 256);
    case 0x09: return (double)(i - 3);
    case 0x0C: return (double)(-100000 + i * 12345);
    case 0x0D: return (double)(float)(i * 0.5 - 2.25);
    default: return ((double)i - 2) / 3.0; /* 0x0E */
    }
}

static void put_value(idx_file *f, uint8_t type, double v) {
    switch (type) {
    case 0x08: put_be(f, (uint8_t)v, 1); break;
    case 0x09: put_be(f, (uint8_t)(int8_t)v, 1); break;
    case 0x0C: put_be(f, (uint32_t)(int32_t)v, 4); break;
    case 0x0D: {
        float x = (float)v;
        uint32_t u;
        memcpy(&u, &x, 4);
        put_be(f, u, 4);
        break;
    }
    default: {
        uint64_t u;
        memcpy(&u, &v, 8);
        put_be(f, u, 8);
    }
    }
}

/* Header plus `count` elements value_of(type, 0..count-1). */
static void idx_make(idx_file *f, uint8_t type, int ndim, const uint32_t *dims, int64_t count) {
    idx_header(f, type, ndim, dims);
    for (int64_t i = 0; i < count; i++) put_value(f, type, value_of(type, i));
}

static void write_gz(const char *path, const void *data, size_t n) {
    remove(path); /* see io_write */
    gzFile g = gzopen(path, "wb");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, data, (unsigned)n), (int)n);
    assert_int_equal(gzclose(g), Z_OK);
}

/* Write f to io_dir/name, gzip'd when gz. Returns the path in buf. */
static const char *save_idx(char *buf, const char *name, const idx_file *f, bool gz) {
    io_path(buf, name);
    if (gz) write_gz(buf, f->bytes, f->n);
    else io_write(buf, f->bytes, f->n);
    return buf;
}

static void check_values(nb_tensor *t, uint8_t type, nb_dtype dt) {
    assert_int_equal(nb_dtype_of(t), dt);
    for (int64_t i = 0; i < nb_numel(t); i++) assert_true(nbt_at(t, i) == value_of(type, i));
}

/* ---- IDX reader ---- */

static void plain_u8_images(void **state) {
    (void)state;
    nb_scope_begin();
    idx_file f;
    idx_make(&f, 0x08, 3, (uint32_t[]){2, 3, 4}, 24);
    char path[4096];
    nb_tensor *t = NBT(nb_idx_load(save_idx(path, "u8.idx", &f, false)));
    assert_int_equal(nb_ndim(t), 3);
    assert_int_equal(nb_shape(t)[0], 2);
    assert_int_equal(nb_shape(t)[1], 3);
    assert_int_equal(nb_shape(t)[2], 4);
    assert_true(nb_is_contiguous(t));
    check_values(t, 0x08, NB_U8);
    nb_scope_end();
}

static void every_type_plain_and_gzip(void **state) {
    (void)state;
    static const struct { uint8_t type; nb_dtype dt; } types[] = {
        {0x08, NB_U8}, {0x09, NB_I8}, {0x0C, NB_I32}, {0x0D, NB_F32}, {0x0E, NB_F64}};
    nb_scope_begin();
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        for (int gz = 0; gz < 2; gz++) {
            idx_file f;
            idx_make(&f, types[k].type, 2, (uint32_t[]){5, 7}, 35);
            char path[4096];
            nb_tensor *t = NBT(nb_idx_load(save_idx(path, gz ? "t.idx.gz" : "t.idx", &f, gz)));
            assert_int_equal(nb_ndim(t), 2);
            assert_int_equal(nb_shape(t)[0], 5);
            assert_int_equal(nb_shape(t)[1], 7);
            check_values(t, types[k].type, types[k].dt);
        }
    }
    nb_scope_end();
}

static void empty_dimension(void **state) {
    (void)state;
    nb_scope_begin();
    idx_file f;
    idx_make(&f, 0x08, 3, (uint32_t[]){0, 28, 28}, 0);
    char path[4096];
    nb_tensor *t = NBT(nb_idx_load(save_idx(path, "empty.idx.gz", &f, true)));
    assert_int_equal(nb_numel(t), 0);
    assert_int_equal(nb_shape(t)[1], 28);
    nb_scope_end();
}

static void header_errors(void **state) {
    (void)state;
    char path[4096];
    idx_file f;
    nb_clear_error();

    idx_make(&f, 0x0B, 1, (uint32_t[]){4}, 0); /* i16: valid IDX, no nabla dtype */
    put_be(&f, 0, 8);
    io_expect_error(nb_idx_load(save_idx(path, "i16.idx", &f, false)), NB_ERR_UNSUPPORTED, "i16.idx");

    idx_make(&f, 0x07, 1, (uint32_t[]){4}, 0);
    put_be(&f, 0, 4);
    io_expect_error(nb_idx_load(save_idx(path, "type7.idx", &f, false)), NB_ERR_FORMAT, "bad magic");

    idx_make(&f, 0x08, 1, (uint32_t[]){4}, 4);
    f.bytes[0] = 1; /* magic 0x01000801 */
    io_expect_error(nb_idx_load(save_idx(path, "magic.idx", &f, true)), NB_ERR_FORMAT, "0x01000801");
    idx_make(&f, 0x08, 1, (uint32_t[]){4}, 4);
    f.bytes[1] = 1; /* magic 0x00010801: both leading bytes must be zero, not just the first */
    io_expect_error(nb_idx_load(save_idx(path, "magic1.idx", &f, true)), NB_ERR_FORMAT, "0x00010801");

    idx_header(&f, 0x08, 0, NULL);
    io_expect_error(nb_idx_load(save_idx(path, "rank0.idx", &f, false)), NB_ERR_FORMAT, "rank 0");

    uint32_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    idx_make(&f, 0x08, 9, nine, 1);
    io_expect_error(nb_idx_load(save_idx(path, "rank9.idx", &f, false)), NB_ERR_FORMAT, "rank 9");

    idx_make(&f, 0x08, 3, (uint32_t[]){2, 3, 4}, 0);
    f.n = 6; /* ends inside the sizes */
    io_expect_error(nb_idx_load(save_idx(path, "hdr.idx", &f, false)), NB_ERR_FORMAT, "header truncated");
    f.n = 2; /* ends inside the magic */
    io_expect_error(nb_idx_load(save_idx(path, "magic2.idx", &f, true)), NB_ERR_FORMAT, "inside the 4-byte magic");
}

static void size_errors(void **state) {
    (void)state;
    char path[4096];
    idx_file f;
    nb_clear_error();

    /* 10 elements declared, 7 present: expected and actual byte counts named */
    idx_make(&f, 0x08, 1, (uint32_t[]){10}, 7);
    io_expect_error(nb_idx_load(save_idx(path, "short.idx", &f, false)), NB_ERR_FORMAT,
                    "need 10 data bytes, the file has 7");
    io_expect_error(nb_idx_load(save_idx(path, "short.idx.gz", &f, true)), NB_ERR_FORMAT, "need 10 data bytes, got 7");
    idx_make(&f, 0x0D, 1, (uint32_t[]){3}, 2); /* f32: counts in bytes */
    io_expect_error(nb_idx_load(save_idx(path, "shortf.idx.gz", &f, true)), NB_ERR_FORMAT, "need 12 data bytes, got 8");

    /* bytes after the data */
    idx_make(&f, 0x08, 1, (uint32_t[]){3}, 5);
    io_expect_error(nb_idx_load(save_idx(path, "long.idx", &f, false)), NB_ERR_FORMAT, "need 3 data bytes, the file has 5");
    io_expect_error(nb_idx_load(save_idx(path, "long.idx.gz", &f, true)), NB_ERR_FORMAT, "trailing bytes");

    /* sizes whose product overflows int64 */
    uint32_t big[8] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu,
                       0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    idx_make(&f, 0x08, 8, big, 0);
    io_expect_error(nb_idx_load(save_idx(path, "overflow.idx", &f, false)), NB_ERR_OVERFLOW, "overflow.idx");
    idx_make(&f, 0x0E, 2, (uint32_t[]){0x80000000u, 0x80000000u}, 0); /* 2^62 elements * 8 bytes */
    io_expect_error(nb_idx_load(save_idx(path, "overflow2.idx.gz", &f, true)), NB_ERR_OVERFLOW, NULL);

    /* huge but representable: rejected from the file size, before any allocation */
    idx_make(&f, 0x08, 3, (uint32_t[]){65536, 65536, 65536}, 16);
    io_expect_error(nb_idx_load(save_idx(path, "huge.idx", &f, false)), NB_ERR_FORMAT,
                    "need 281474976710656 data bytes, the file has 16");
    io_expect_error(nb_idx_load(save_idx(path, "huge.idx.gz", &f, true)), NB_ERR_FORMAT, "gzip file can hold");
}

/* A gzip'd IDX file of 4096 pseudo-random bytes, compressed in memory. */
static unsigned char *gz_sample(char *path, size_t *n) {
    idx_file f;
    idx_header(&f, 0x08, 1, (uint32_t[]){4096});
    uint32_t s = 12345;
    for (int i = 0; i < 4096; i++) {
        s = s * 1103515245u + 12345u; /* ANSI C LCG */
        f.bytes[f.n++] = (unsigned char)(s >> 24 & 0x3F);
    }
    save_idx(path, "sample.idx.gz", &f, true);
    return io_read(path, n);
}

static void corrupted_gzip(void **state) {
    (void)state;
    char path[4096], bad[4096];
    size_t n;
    unsigned char *gz = gz_sample(path, &n);
    nb_scope_begin();
    NBT(nb_idx_load(path)); /* the intact file loads */
    nb_scope_end();
    assert_true(n > 100);
    nb_clear_error();

    unsigned char *copy = malloc(n);
    memcpy(copy, gz, n);
    for (size_t i = n / 2; i < n / 2 + 8; i++) copy[i] ^= 0xFF; /* damage the deflate data */
    io_write(io_path(bad, "bad_deflate.idx.gz"), copy, n);
    io_expect_error(nb_idx_load(bad), NB_ERR_FORMAT, "bad_deflate.idx.gz");

    memcpy(copy, gz, n);
    copy[n - 6] ^= 0x01; /* damage only the CRC-32 in the gzip trailer */
    io_write(io_path(bad, "bad_crc.idx.gz"), copy, n);
    io_expect_error(nb_idx_load(bad), NB_ERR_FORMAT, "corrupted gzip stream");

    io_write(io_path(bad, "cut.idx.gz"), gz, n / 2); /* stream cut in the middle */
    io_expect_error(nb_idx_load(bad), NB_ERR_FORMAT, "truncated");
    io_write(io_path(bad, "no_trailer.idx.gz"), gz, n - 8); /* all the data, no CRC-32 and length */
    io_expect_error(nb_idx_load(bad), NB_ERR_FORMAT, "ends before its trailer");

    /* bytes after the gzip stream are an error (gzread would ignore them) */
    copy = realloc(copy, n + 16);
    memcpy(copy, gz, n);
    memcpy(copy + n, "garbage-garbage", 16);
    io_write(io_path(bad, "garbage.idx.gz"), copy, n + 16);
    io_expect_error(nb_idx_load(bad), NB_ERR_FORMAT, "trailing bytes after the gzip stream");
    copy[n] = 0; /* zero padding too */
    io_write(io_path(bad, "padded.idx.gz"), copy, n + 1);
    io_expect_error(nb_idx_load(bad), NB_ERR_FORMAT, "trailing bytes after the gzip stream");
    free(copy);
    free(gz);
}

/* gzip members concatenate (RFC 1952, `cat a.gz b.gz`): the header in one member, the data in the next. */
static void gzip_members(void **state) {
    (void)state;
    char path[4096], one[4096];
    idx_file f;
    idx_make(&f, 0x08, 2, (uint32_t[]){3, 5}, 15);
    write_gz(io_path(one, "head.gz"), f.bytes, 12);
    size_t a, b;
    unsigned char *head = io_read(one, &a);
    write_gz(one, f.bytes + 12, f.n - 12);
    unsigned char *rest = io_read(one, &b), *both = malloc(a + b);
    memcpy(both, head, a);
    memcpy(both + a, rest, b);
    io_write(io_path(path, "members.idx.gz"), both, a + b);
    nb_clear_error();
    nb_scope_begin();
    nb_tensor *t = NBT(nb_idx_load(path));
    assert_int_equal(nb_numel(t), 15);
    check_values(t, 0x08, NB_U8);
    nb_scope_end();
    free(head);
    free(rest);
    free(both);
}

/* Every header byte of a plain and a gzip'd file replaced by several values:
 * a typed error or a tensor whose size matches the file. */
static void single_byte_corruptions(void **state) {
    (void)state;
    char path[4096];
    for (int gz = 0; gz < 2; gz++) {
        int loaded = 0;
        for (int pos = 0; pos < 16; pos++) {
            static const unsigned char values[] = {0x00, 0x01, 0x02, 0x04, 0x08, 0x0B, 0x0C, 0x0D, 0x80, 0xff};
            for (size_t v = 0; v < sizeof values; v++) {
                idx_file f;
                idx_make(&f, 0x0C, 3, (uint32_t[]){2, 3, 4}, 24);
                if (f.bytes[pos] == values[v]) continue;
                f.bytes[pos] = values[v];
                nb_clear_error();
                nb_scope_begin();
                nb_tensor *t = nb_idx_load(save_idx(path, gz ? "sweep.idx.gz" : "sweep.idx", &f, gz));
                if (t) {
                    loaded++;
                    int64_t bytes = nb_numel(t) * (int64_t)nb_dtype_size(nb_dtype_of(t));
                    assert_int_equal(4 + 4 * nb_ndim(t) + bytes, (int64_t)f.n);
                } else {
                    nb_status s = nb_last_status();
                    assert_true(s == NB_ERR_FORMAT || s == NB_ERR_OVERFLOW || s == NB_ERR_UNSUPPORTED);
                }
                nb_scope_end();
            }
        }
        assert_true(loaded > 0); /* e.g. [2, 3, 4] i32 read as [2, 12, 2] */
    }
    nb_clear_error();
}

static void io_errors(void **state) {
    (void)state;
    char path[4096];
    nb_clear_error();
    io_expect_error(nb_idx_load(io_path(path, "no-such-file.idx")), NB_ERR_IO, "no-such-file.idx");
    io_expect_error(nb_idx_load(io_dir), NB_ERR_IO, io_dir); /* a directory */
    io_expect_error(nb_idx_load(NULL), NB_ERR_NULL, NULL);
}

/* ---- Fashion-MNIST loader ---- */

/* Write split-images-idx3-ubyte[.gz] (n images of h x w, pixel i*20 % 256) and labels (i*7 % 10). */
static void write_split(const char *dir, const char *split, int n, int h, int w, int nlabels, bool gz) {
    char path[4096];
    idx_file f;
    idx_header(&f, 0x08, 3, (uint32_t[]){(uint32_t)n, (uint32_t)h, (uint32_t)w});
    for (int i = 0; i < n * h * w; i++) put_be(&f, (uint32_t)(i * 20 % 256), 1);
    if (snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, split, gz ? ".gz" : "") >= (int)sizeof path) fail();
    gz ? write_gz(path, f.bytes, f.n) : io_write(path, f.bytes, f.n);
    idx_header(&f, 0x08, 1, (uint32_t[]){(uint32_t)nlabels});
    for (int i = 0; i < nlabels; i++) put_be(&f, (uint32_t)(i * 7 % 10), 1);
    if (snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, split, gz ? ".gz" : "") >= (int)sizeof path) fail();
    gz ? write_gz(path, f.bytes, f.n) : io_write(path, f.bytes, f.n);
}

static void check_split(nb_tensor *x, nb_tensor *y, int n, int pixels) {
    assert_int_equal(nb_dtype_of(x), NB_F32);
    assert_int_equal(nb_ndim(x), 2);
    assert_int_equal(nb_shape(x)[0], n);
    assert_int_equal(nb_shape(x)[1], pixels);
    assert_int_equal(nb_dtype_of(y), NB_I64);
    assert_int_equal(nb_ndim(y), 1);
    assert_int_equal(nb_shape(y)[0], n);
    for (int i = 0; i < n * pixels; i++) assert_true(nbt_at(x, i) == (double)((float)(i * 20 % 256) / 255.0f));
    for (int i = 0; i < n; i++) assert_true(nbt_at(y, i) == i * 7 % 10);
}

static void fashion_mnist_crafted(void **state) {
    (void)state;
    char dir[4096], bad[4096];
    io_path(dir, "fmnist");
    assert_int_equal(mkdir(dir, 0777), 0);
    write_split(dir, "train", 3, 2, 2, 3, true);  /* gzip'd */
    write_split(dir, "t10k", 2, 3, 3, 2, false);  /* plain (unpacked MNIST downloads) */
    nb_scope_begin();
    nb_tensor *x, *y;
    assert_int_equal(nb_fashion_mnist_load(dir, true, &x, &y), NB_OK);
    check_split(x, y, 3, 4);
    assert_int_equal(nb_fashion_mnist_load(dir, false, &x, &y), NB_OK);
    check_split(x, y, 2, 9);
    nb_scope_end();

    nb_clear_error();
    io_path(bad, "fmnist_bad");
    assert_int_equal(mkdir(bad, 0777), 0);
    write_split(bad, "train", 3, 2, 2, 2, true); /* 3 images, 2 labels */
    x = y = (nb_tensor *)1;
    assert_int_equal(nb_fashion_mnist_load(bad, true, &x, &y), NB_ERR_FORMAT);
    assert_null(x);
    assert_null(y);
    assert_non_null(strstr(nb_last_message(), "[3, 2, 2]"));
    nb_clear_error();
    assert_int_equal(nb_fashion_mnist_load(bad, false, &x, &y), NB_ERR_IO); /* no t10k files */
    assert_non_null(strstr(nb_last_message(), "t10k-images-idx3-ubyte"));
    assert_non_null(strstr(nb_last_message(), "dataset-fashion-mnist"));
    nb_clear_error();
    assert_int_equal(nb_fashion_mnist_load(dir, true, NULL, &y), NB_ERR_NULL);
    nb_clear_error();
}

static void fashion_mnist_real(void **state) {
    (void)state;
    if (access(NB_FASHION_MNIST_DIR "/train-labels-idx1-ubyte.gz", R_OK) != 0) {
        fprintf(stderr, "skipped: %s absent (Debian package dataset-fashion-mnist)\n", NB_FASHION_MNIST_DIR);
        skip();
    }
    static const struct { bool train; int64_t n; } splits[] = {{true, 60000}, {false, 10000}};
    for (int s = 0; s < 2; s++) {
        nb_scope_begin();
        nb_tensor *x, *y;
        assert_int_equal(nb_fashion_mnist_load(NULL, splits[s].train, &x, &y), NB_OK);
        int64_t n = splits[s].n;
        assert_int_equal(nb_shape(x)[0], n);
        assert_int_equal(nb_shape(x)[1], 784);
        assert_int_equal(nb_shape(y)[0], n);
        const float *px = nb_data_ptr(x);
        float lo = 1, hi = 0;
        for (int64_t i = 0; i < n * 784; i++) {
            lo = px[i] < lo ? px[i] : lo;
            hi = px[i] > hi ? px[i] : hi;
        }
        assert_true(lo == 0.0f && hi == 1.0f);
        /* Fashion-MNIST is balanced: n/10 examples of each class (Xiao et al. 2017) */
        const int64_t *py = nb_data_ptr(y);
        int64_t count[10] = {0};
        for (int64_t i = 0; i < n; i++) {
            assert_true(py[i] >= 0 && py[i] <= 9);
            count[py[i]]++;
        }
        for (int c = 0; c < 10; c++) assert_int_equal(count[c], n / 10);
        if (splits[s].train) assert_int_equal(py[0], 9); /* the first training image is an ankle boot */
        nb_scope_end();
    }
}

/* ---- mini-batches ---- */

static void take_rows_matches_index_select(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *x = NBT(nb_reshape(nb_arange(0, 30, 1, NB_F32), NB_SHAPE(5, 2, 3)));
    int64_t pv[] = {4, 0, 2, 1, 3};
    nb_tensor *perm = NBT(nb_from_data(pv, NB_SHAPE(5), NB_I64));
    nb_tensor *b = NBT(nb_take_rows(x, perm, 1, 3));
    assert_true(nb_is_contiguous(b));
    assert_close(b, nb_index_select(x, 0, nb_narrow(perm, 0, 1, 3)), 0, 1e-12);

    /* the last batch is short; start == length gives an empty batch */
    b = NBT(nb_take_rows(x, perm, 3, 10));
    assert_int_equal(nb_shape(b)[0], 2);
    assert_close(b, nb_index_select(x, 0, nb_narrow(perm, 0, 3, 2)), 0, 1e-12);
    b = NBT(nb_take_rows(x, perm, 5, 4));
    assert_int_equal(nb_shape(b)[0], 0);
    assert_int_equal(nb_shape(b)[2], 3);

    /* non-contiguous x (axes swapped), an int32 perm, a strided perm */
    nb_tensor *xt = NBT(nb_transpose(x, 0, 2)); /* [3, 2, 5] */
    int32_t qv[] = {2, 0, 1};
    nb_tensor *q = NBT(nb_from_data(qv, NB_SHAPE(3), NB_I32));
    assert_close(NBT(nb_take_rows(xt, q, 0, 3)), nb_index_select(xt, 0, q), 0, 1e-12);
    nb_tensor *every_other = NBT(nb_slice(perm, 0, 0, NB_END, 2)); /* 4, 2, 3 */
    assert_close(NBT(nb_take_rows(x, every_other, 0, 3)), nb_index_select(x, 0, every_other), 0, 1e-12);

    /* 1-D x (labels) */
    nb_tensor *lab = NBT(nb_arange(10, 15, 1, NB_I64));
    assert_close(NBT(nb_take_rows(lab, perm, 0, 5)), nb_index_select(lab, 0, perm), 0, 1e-12);
    nb_scope_end();
}

static void take_rows_errors(void **state) {
    (void)state;
    nb_scope_begin();
    nb_clear_error();
    nb_tensor *x = NBT(nb_zeros(NB_SHAPE(4, 2), NB_F32));
    int64_t pv[] = {0, 1, 4, 2};
    nb_tensor *perm = NBT(nb_from_data(pv, NB_SHAPE(4), NB_I64));
    io_expect_error(nb_take_rows(x, perm, 0, 4), NB_ERR_INDEX, "perm[2] = 4 outside [0, 4)");
    io_expect_error(nb_take_rows(x, perm, 5, 1), NB_ERR_ARG, "start 5");
    io_expect_error(nb_take_rows(x, perm, -1, 1), NB_ERR_ARG, NULL);
    io_expect_error(nb_take_rows(x, perm, 0, -1), NB_ERR_ARG, NULL);
    io_expect_error(nb_take_rows(nb_scalar(1, NB_F32), perm, 0, 1), NB_ERR_SHAPE, "no rows");
    io_expect_error(nb_take_rows(x, nb_zeros(NB_SHAPE(2, 2), NB_I64), 0, 1), NB_ERR_SHAPE, "not 1-D");
    io_expect_error(nb_take_rows(x, nb_zeros(NB_SHAPE(2), NB_F32), 0, 1), NB_ERR_DTYPE, "float32");
    io_expect_error(nb_take_rows(NULL, perm, 0, 1), NB_ERR_NULL, NULL);
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_u8_images),
        cmocka_unit_test(every_type_plain_and_gzip),
        cmocka_unit_test(empty_dimension),
        cmocka_unit_test(header_errors),
        cmocka_unit_test(size_errors),
        cmocka_unit_test(corrupted_gzip),
        cmocka_unit_test(gzip_members),
        cmocka_unit_test(single_byte_corruptions),
        cmocka_unit_test(io_errors),
        cmocka_unit_test(fashion_mnist_crafted),
        cmocka_unit_test(fashion_mnist_real),
        cmocka_unit_test(take_rows_matches_index_select),
        cmocka_unit_test(take_rows_errors),
    };
    return cmocka_run_group_tests(tests, io_setup, io_teardown);
}
