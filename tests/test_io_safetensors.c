/*
 * test_io_safetensors.c — safetensors: round trips of every dtype and odd
 * shapes, zero-copy borrowing, atomic save, hostile headers, and interop with
 * the Python `safetensors` package in both directions.
 */
#include "io_support.h"

#include <sys/stat.h>
#include <dirent.h>

/* ---- tensors defined by formulas of the flat index (shared with tests/gen_safetensors.py) ---- */

typedef struct formula {
    const char *name;
    nb_dtype dt;
    int ndim;
    int64_t shape[3];
    double (*f)(int64_t i);
} formula;

static double f_f32_matrix(int64_t i) { return (double)i * 0.25 - 3; }
static double f_f64_vector(int64_t i) { return ((double)i * 0.5 - 7) / ((double)i + 1); }
static double f_f16_vector(int64_t i) { return (double)i * 0.5 - 1; }
static double f_i64_matrix(int64_t i) { return (double)(i * 1000000007 - 5); }
static double f_i32_vector(int64_t i) { return (double)(i * -3); }
static double f_i8_vector(int64_t i) { return (double)(i - 4); }
static double f_u8_vector(int64_t i) { return (double)(i * 37 % 256); }
static double f_bool_vector(int64_t i) { return i % 3 == 0; }
static double f_f32_scalar(int64_t i) { return 3.5 + (double)i; }
static double f_zero(int64_t i) { return (double)i * 0; }

static const formula PY_TENSORS[] = {
    {"f32_matrix", NB_F32, 3, {2, 3, 4}, f_f32_matrix}, {"f64_vector", NB_F64, 1, {5}, f_f64_vector},
    {"f16_vector", NB_F16, 1, {6}, f_f16_vector},       {"i64_matrix", NB_I64, 2, {3, 2}, f_i64_matrix},
    {"i32_vector", NB_I32, 1, {4}, f_i32_vector},       {"i8_vector", NB_I8, 1, {9}, f_i8_vector},
    {"u8_vector", NB_U8, 1, {7}, f_u8_vector},          {"bool_vector", NB_BOOL, 1, {5}, f_bool_vector},
    {"f32_scalar", NB_F32, 0, {0}, f_f32_scalar},       {"f32_empty", NB_F32, 2, {0, 3}, f_zero},
};
#define N_PY ((int)(sizeof PY_TENSORS / sizeof PY_TENSORS[0]))

/* A new (scoped) tensor holding the formula's values. */
static nb_tensor *from_formula(const formula *fm) {
    nb_tensor *t = NBT(nb_empty(fm->shape, fm->ndim, fm->dt));
    int64_t n = nb_numel(t), idx[3];
    for (int64_t i = 0; i < n; i++) {
        int64_t r = i;
        for (int d = fm->ndim - 1; d >= 0; d--) {
            idx[d] = r % fm->shape[d];
            r /= fm->shape[d];
        }
        assert_int_equal(nb_set(t, idx, fm->f(i)), NB_OK);
    }
    return t;
}

static void check_formula(nb_tensor *t, const formula *fm) {
    assert_int_equal(nb_dtype_of(t), fm->dt);
    assert_int_equal(nb_ndim(t), fm->ndim);
    for (int d = 0; d < fm->ndim; d++) assert_int_equal(nb_shape(t)[d], fm->shape[d]);
    for (int64_t i = 0; i < nb_numel(t); i++) assert_true(nbt_at(t, i) == fm->f(i));
}

/* Same dtype, shape and bytes (row-major). */
static void assert_same(nb_tensor *a, nb_tensor *b) {
    assert_int_equal(nb_dtype_of(a), nb_dtype_of(b));
    assert_int_equal(nb_ndim(a), nb_ndim(b));
    for (int d = 0; d < nb_ndim(a); d++) assert_int_equal(nb_shape(a)[d], nb_shape(b)[d]);
    size_t n = (size_t)nb_numel(a) * nb_dtype_size(nb_dtype_of(a));
    unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
    assert_int_equal(nb_copy_to_host(a, x, n), NB_OK);
    assert_int_equal(nb_copy_to_host(b, y, n), NB_OK);
    assert_memory_equal(x, y, n);
    free(x);
    free(y);
}

/* Path of a file next to this test's source (tests/...). */
static const char *source_path(char *buf, const char *rel) {
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;
    snprintf(buf, 4096, "%.*s/%s", dir, slash ? __FILE__ : ".", rel);
    return buf;
}

/* ---- round trips ---- */

static void round_trip(void **state) {
    (void)state;
    nb_scope_begin();
    enum { N = N_PY + 3 };
    const char *names[N];
    nb_tensor *ts[N];
    for (int i = 0; i < N_PY; i++) {
        names[i] = PY_TENSORS[i].name;
        ts[i] = from_formula(&PY_TENSORS[i]);
    }
    names[N_PY] = "bf16 matrix";
    ts[N_PY] = NBT(nb_cast(nb_reshape(nb_arange(-2, 2, 0.5, NB_F32), NB_SHAPE(2, 4)), NB_BF16));
    names[N_PY + 1] = "transposed view";
    ts[N_PY + 1] = NBT(nb_transpose(nb_reshape(nb_arange(0, 12, 1, NB_F64), NB_SHAPE(3, 4)), 0, 1));
    names[N_PY + 2] = "ref device/ü";
    ts[N_PY + 2] = NBT(nb_to_device(nb_arange(0, 5, 1, NB_I32), NB_REF));
    char path[4096];
    io_path(path, "round.safetensors");
    assert_int_equal(nb_safetensors_save(path, names, ts, N), NB_OK);

    /* header length padded so the data buffer starts 8-byte aligned */
    size_t size;
    unsigned char *bytes = io_read(path, &size);
    uint64_t hlen;
    memcpy(&hlen, bytes, 8);
    assert_int_equal((8 + hlen) % 8, 0);
    assert_true(8 + hlen <= size);
    free(bytes);

    nb_safetensors *h = nb_safetensors_open(path);
    assert_non_null(h);
    assert_int_equal(nb_safetensors_count(h), N);
    for (int i = 0; i < N; i++) {
        nb_tensor *t = NBT(nb_safetensors_get(h, names[i]));
        assert_same(t, ts[i]);
        if (nb_numel(t) > 0) /* borrowed from the mapping, naturally aligned */
            assert_int_equal((uintptr_t)nb_data_ptr(t) % nb_dtype_size(nb_dtype_of(t)), 0);
        bool listed = false;
        for (int j = 0; j < N; j++) listed |= strcmp(nb_safetensors_name(h, j), names[i]) == 0;
        assert_true(listed);
    }
    nb_safetensors_close(h);

    /* no tensors at all is a valid file */
    assert_int_equal(nb_safetensors_save(path, NULL, NULL, 0), NB_OK);
    h = nb_safetensors_open(path);
    assert_non_null(h);
    assert_int_equal(nb_safetensors_count(h), 0);
    nb_safetensors_close(h);
    nb_scope_end();
}

static void borrowed_tensors_outlive_the_handle(void **state) {
    (void)state;
    char path[4096];
    io_path(path, "borrow.safetensors");
    nb_scope_begin();
    nb_tensor *orig = from_formula(&PY_TENSORS[0]);
    assert_int_equal(nb_safetensors_save(path, (const char *[]){"w"}, &orig, 1), NB_OK);
    nb_safetensors *h = nb_safetensors_open(path);
    assert_non_null(h);
    nb_tensor *w = NBT(nb_safetensors_get(h, "w"));
    nb_tensor *w2 = NBT(nb_safetensors_get(h, "w"));
    assert_true(nb_shares_storage(w, w2) && nb_data_ptr(w) == nb_data_ptr(w2)); /* zero-copy: same bytes */
    nb_safetensors_close(h);
    check_formula(w, &PY_TENSORS[0]); /* the mapping is still alive */
    assert_int_equal(nb_fill_(w, 42), NB_OK); /* copy-on-write: the file keeps its values */
    assert_true(nbt_at(w2, 3) == 42);
    nb_scope_end();

    nb_scope_begin();
    h = nb_safetensors_open(path);
    assert_non_null(h);
    nb_tensor *old = NBT(nb_safetensors_get(h, "w"));
    check_formula(old, &PY_TENSORS[0]);
    /* overwrite the file while `old` borrows its mapping: the rename leaves the old inode mapped */
    nb_tensor *doubled = NBT(nb_mul(old, 2.0));
    assert_int_equal(nb_safetensors_save(path, (const char *[]){"w"}, &doubled, 1), NB_OK);
    check_formula(old, &PY_TENSORS[0]);
    nb_safetensors_close(h);
    h = nb_safetensors_open(path);
    assert_non_null(h);
    assert_same(NBT(nb_safetensors_get(h, "w")), doubled);
    nb_safetensors_close(h);
    nb_scope_end();
}

/* Write u64 header length `len`, `header`, then `data_len` bytes i % 251. */
static const char *craft_len(char *path, const char *name, uint64_t len, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    unsigned char *buf = malloc(8 + hl + data_len + 1);
    memcpy(buf, &len, 8);
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) buf[8 + hl + i] = (unsigned char)(i % 251);
    io_write(io_path(path, name), buf, 8 + hl + data_len);
    free(buf);
    return path;
}
static const char *craft(char *path, const char *name, const char *header, size_t data_len) {
    return craft_len(path, name, strlen(header), header, data_len);
}

static void unaligned_data_is_copied(void **state) {
    (void)state;
    char path[4096];
    /* "f" starts at file offset 8 + 106 + 1, not a multiple of 4: it is copied, not borrowed */
    const char *hdr = "{\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                      "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}";
    assert_true((8 + strlen(hdr) + 1) % 4 != 0); /* the mapping is page-aligned */
    nb_scope_begin();
    nb_safetensors *h = nb_safetensors_open(craft(path, "odd.safetensors", hdr, 9));
    assert_non_null(h);
    nb_tensor *f = NBT(nb_safetensors_get(h, "f"));
    nb_safetensors_close(h);
    unsigned char raw[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* bytes i % 251 at data offsets 1..8 */
    float want[2];
    memcpy(want, raw, 8);
    assert_true(nbt_at(f, 0) == want[0] && nbt_at(f, 1) == want[1]);
    assert_int_equal((uintptr_t)nb_data_ptr(f) % 4, 0); /* a copy, aligned */
    nb_scope_end();
}

/* ---- atomic save ---- */

static bool temp_files_left(void) {
    DIR *d = opendir(io_dir);
    assert_non_null(d);
    bool found = false;
    for (struct dirent *e; (e = readdir(d));) found |= strstr(e->d_name, ".tmp-") != NULL;
    closedir(d);
    return found;
}

static void atomic_save(void **state) {
    (void)state;
    char path[4096], sub[4096], missing[4096];
    io_path(path, "atomic.safetensors");
    nb_scope_begin();
    nb_tensor *a = NBT(nb_arange(0, 6, 1, NB_F32)), *b = NBT(nb_ones(NB_SHAPE(2), NB_I64));
    assert_int_equal(nb_safetensors_save(path, (const char *[]){"a", "b"}, (nb_tensor *[]){a, b}, 2), NB_OK);
    size_t n0;
    unsigned char *before = io_read(path, &n0);
    nb_clear_error();

    static const struct { const char *names[2]; nb_status s; const char *needle; } bad[] = {
        {{"x", "x"}, NB_ERR_ARG, "'x' is used twice"},
        {{"x", ""}, NB_ERR_ARG, "empty or reserved"},
        {{"__metadata__", "y"}, NB_ERR_ARG, "empty or reserved"},
        {{"x", "\xff\xfe"}, NB_ERR_ARG, "UTF-8"},
        {{"x", NULL}, NB_ERR_NULL, NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(nb_safetensors_save(path, bad[k].names, (nb_tensor *[]){a, b}, 2), bad[k].s);
        if (bad[k].needle) assert_non_null(strstr(nb_last_message(), bad[k].needle));
        nb_clear_error();
    }
    assert_int_equal(nb_safetensors_save(path, (const char *[]){"a", "b"}, (nb_tensor *[]){a, NULL}, 2), NB_ERR_NULL);
    assert_int_equal(nb_safetensors_save(path, (const char *[]){"a"}, &a, -1), NB_ERR_ARG);
    assert_int_equal(nb_safetensors_save(NULL, (const char *[]){"a"}, &a, 1), NB_ERR_NULL);
    nb_clear_error();

    /* the rename fails (the target is a directory): the temporary file is removed */
    io_path(sub, "a_directory");
    assert_int_equal(mkdir(sub, 0777), 0);
    assert_int_equal(nb_safetensors_save(sub, (const char *[]){"a"}, &a, 1), NB_ERR_IO);
    assert_non_null(strstr(nb_last_message(), "a_directory"));
    assert_false(temp_files_left());
    nb_clear_error();
    /* the directory does not exist */
    io_path(missing, "no/such/dir/x.safetensors");
    assert_int_equal(nb_safetensors_save(missing, (const char *[]){"a"}, &a, 1), NB_ERR_IO);
    assert_non_null(strstr(nb_last_message(), "no/such/dir"));
    nb_clear_error();

    size_t n1;
    unsigned char *after = io_read(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
    assert_false(temp_files_left());
    nb_scope_end();
}

/* What is at the path decides what a save replaces: a FIFO (as a device node) is refused and left as it
 * is, a symlink is written through and stays a link, an existing file keeps its mode. */
static void save_target_kinds(void **state) {
    (void)state;
    char fifo[4096], real[4096], link[4096], dangling[4096];
    struct stat st;
    nb_scope_begin();
    nb_tensor *a = NBT(nb_arange(0, 6, 1, NB_F32));
    const char *names[] = {"a"};

    io_path(fifo, "a_fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(nb_safetensors_save(fifo, names, &a, 1), NB_ERR_IO);
    assert_non_null(strstr(nb_last_message(), "not a regular file"));
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    nb_clear_error();

    io_path(real, "real.safetensors");
    io_write(real, "old", 3);
    assert_int_equal(chmod(real, 0640), 0);
    io_path(link, "link.safetensors");
    assert_int_equal(symlink("real.safetensors", link), 0); /* relative, as users make them */
    assert_int_equal(nb_safetensors_save(link, names, &a, 1), NB_OK);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(real, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    nb_safetensors *h = nb_safetensors_open(real);
    assert_non_null(h);
    assert_int_equal(nb_safetensors_count(h), 1);
    nb_safetensors_close(h);

    io_path(dangling, "dangling.safetensors");
    assert_int_equal(symlink("no-such-target", dangling), 0);
    assert_int_equal(nb_safetensors_save(dangling, names, &a, 1), NB_ERR_IO);
    assert_non_null(strstr(nb_last_message(), "missing file"));
    nb_clear_error();
    assert_false(temp_files_left());
    nb_scope_end();
}

/* ---- hostile files ---- */

#define T(shape_, off_) "{\"dtype\":\"F32\",\"shape\":" shape_ ",\"data_offsets\":" off_ "}"

static void hostile_headers(void **state) {
    (void)state;
    static const struct { const char *header; size_t data; nb_status s; const char *needle; } cases[] = {
        {"hello", 0, NB_ERR_FORMAT, "not valid JSON"},
        {"{\"a\":", 0, NB_ERR_FORMAT, "not valid JSON"},
        {"[1, 2]", 0, NB_ERR_FORMAT, "is a JSON array, not an object"},
        {"\"str\"", 0, NB_ERR_FORMAT, "not valid JSON"}, /* jansson rejects non-container roots */
        {"{\"a\":5}", 0, NB_ERR_FORMAT, "tensor 'a': entry is a JSON integer"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NB_ERR_FORMAT, "'dtype' is missing"},
        {"{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NB_ERR_FORMAT, "'dtype' is integer"},
        {"{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, NB_ERR_UNSUPPORTED, "'F33'"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, NB_ERR_FORMAT, "'shape' is missing"},
        {"{\"a\":" T("3", "[0,4]") "}", 4, NB_ERR_FORMAT, "'shape' is integer"},
        {"{\"a\":" T("[-1]", "[0,4]") "}", 4, NB_ERR_FORMAT, "shape[0] is not a non-negative integer"},
        {"{\"a\":" T("[1.5]", "[0,4]") "}", 4, NB_ERR_FORMAT, "shape[0]"},
        {"{\"a\":" T("[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, NB_ERR_UNSUPPORTED, "rank 9"},
        {"{\"a\":" T("[4294967296,4294967296,4294967296]", "[0,4]") "}", 4, NB_ERR_OVERFLOW, "overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, NB_ERR_FORMAT, "'data_offsets'"},
        {"{\"a\":" T("[1]", "[0]") "}", 4, NB_ERR_FORMAT, "'data_offsets'"},
        {"{\"a\":" T("[1]", "[-4,0]") "}", 4, NB_ERR_FORMAT, "'data_offsets'"},
        {"{\"a\":" T("[1]", "[0,\"4\"]") "}", 4, NB_ERR_FORMAT, "'data_offsets'"},
        {"{\"a\":" T("[1]", "[0,99999999999999999999]") "}", 4, NB_ERR_FORMAT, "not valid JSON"},
        {"{\"a\":" T("[0]", "[4,0]") "}", 4, NB_ERR_FORMAT, "end before they begin"},
        {"{\"a\":" T("[100]", "[0,400]") "}", 4, NB_ERR_FORMAT, "run past the 4-byte data buffer"},
        {"{\"a\":" T("[2]", "[0,4]") "}", 4, NB_ERR_FORMAT, "span 4 bytes, shape [2] of F32 needs 8"},
        {"{\"a\":" T("[2]", "[0,8]") ",\"b\":" T("[1]", "[4,8]") "}", 8, NB_ERR_FORMAT, "overlap"},
        {"{\"a\":" T("[1]", "[0,4]") ",\"b\":" T("[0]", "[2,2]") "}", 4, NB_ERR_FORMAT, "overlap"},
        {"{\"a\":" T("[1]", "[0,4]") ",\"b\":" T("[1]", "[8,12]") "}", 12, NB_ERR_FORMAT,
         "data bytes [4, 8) belong to no tensor"},
        {"{\"a\":" T("[1]", "[4,8]") "}", 8, NB_ERR_FORMAT, "data bytes [0, 4) belong to no tensor"},
        {"{\"a\":" T("[1]", "[0,4]") "}", 8, NB_ERR_FORMAT, "[4, 8) at the end"},
        {"{\"a\":" T("[1]", "[0,4]") ",\"a\":" T("[1]", "[4,8]") "}", 8, NB_ERR_FORMAT, "duplicate"},
        {"{\"\":" T("[1]", "[0,4]") "}", 4, NB_ERR_FORMAT, "name is empty"},
        {"{\"__metadata__\":3}", 0, NB_ERR_FORMAT, "__metadata__ is a JSON integer"},
        {"{\"__metadata__\":{\"k\":1}}", 0, NB_ERR_FORMAT, "__metadata__['k']"},
        {"{\"a\\u0000b\":" T("[1]", "[0,4]") "}", 4, NB_ERR_FORMAT, "not valid JSON"}, /* NUL in a key */
        {"{\"a\":" T("[1]", "[0,4]") "}\xff", 4, NB_ERR_FORMAT, "not valid JSON"},
    };
    char path[4096];
    nb_clear_error();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        craft(path, "hostile.safetensors", cases[k].header, cases[k].data);
        nb_safetensors *h = nb_safetensors_open(path);
        if (h || nb_last_status() != cases[k].s) fprintf(stderr, "case %zu: %s\n", k, cases[k].header);
        io_expect_error(h, cases[k].s, cases[k].needle);
    }
}

static void hostile_lengths(void **state) {
    (void)state;
    char path[4096];
    nb_clear_error();
    io_expect_error(nb_safetensors_open(craft_len(path, "long.safetensors", 1000, "{}", 0)), NB_ERR_FORMAT,
                    "header length 1000");
    io_expect_error(nb_safetensors_open(craft_len(path, "zero.safetensors", 0, "{}", 0)), NB_ERR_FORMAT,
                    "header length 0");
    io_expect_error(nb_safetensors_open(craft_len(path, "huge.safetensors", 100000001, "{}", 0)), NB_ERR_FORMAT,
                    "header length 100000001");
    io_expect_error(nb_safetensors_open(craft_len(path, "max.safetensors", UINT64_MAX, "{}", 0)), NB_ERR_FORMAT,
                    "header length");
    io_write(io_path(path, "tiny.safetensors"), "\x02\0\0", 3);
    io_expect_error(nb_safetensors_open(path), NB_ERR_FORMAT, "shorter than the 8-byte header length");
    io_write(io_path(path, "empty.safetensors"), "", 0);
    io_expect_error(nb_safetensors_open(path), NB_ERR_FORMAT, "empty.safetensors");
    io_expect_error(nb_safetensors_open(io_path(path, "missing.safetensors")), NB_ERR_IO, "missing.safetensors");
    io_expect_error(nb_safetensors_open(io_dir), NB_ERR_IO, "not a regular file");
    io_expect_error(nb_safetensors_open(NULL), NB_ERR_NULL, NULL);
}

static void valid_edge_cases(void **state) {
    (void)state;
    char path[4096];
    nb_scope_begin();
    /* metadata, trailing spaces, a zero-size tensor at the end, a dtype nabla lacks (I16) */
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},\"s\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                      "\"a\":" T("[1]", "[0,4]") ",\"z\":" T("[0,7]", "[8,8]") "}   ";
    nb_safetensors *h = nb_safetensors_open(craft(path, "edge.safetensors", hdr, 8));
    assert_non_null(h);
    assert_int_equal(nb_safetensors_count(h), 3);
    assert_string_equal(nb_safetensors_name(h, 0), "a"); /* data-offset order */
    assert_string_equal(nb_safetensors_name(h, 1), "s");
    assert_string_equal(nb_safetensors_name(h, 2), "z");
    nb_clear_error();
    io_expect_error(nb_safetensors_name(h, 3), NB_ERR_INDEX, NULL);
    io_expect_error(nb_safetensors_get(h, "s"), NB_ERR_UNSUPPORTED, "I16");
    io_expect_error(nb_safetensors_get(h, "nope"), NB_ERR_ARG, "'nope'");
    io_expect_error(nb_safetensors_get(h, NULL), NB_ERR_NULL, NULL);
    nb_tensor *z = NBT(nb_safetensors_get(h, "z"));
    assert_int_equal(nb_numel(z), 0);
    assert_int_equal(nb_shape(z)[1], 7);
    unsigned char raw[4] = {0, 1, 2, 3};
    float want;
    memcpy(&want, raw, 4);
    assert_true(nbt_at(NBT(nb_safetensors_get(h, "a")), 0) == want);
    nb_safetensors_close(h);
    nb_safetensors_close(NULL);
    assert_int_equal(nb_safetensors_count(NULL), -1);
    nb_clear_error();
    nb_scope_end();
}

/* Every byte of the length field and header replaced by several values: each
 * result is a typed error, or a handle whose every tensor reads in bounds. */
static void single_byte_corruptions(void **state) {
    (void)state;
    char path[4096], bad[4096];
    io_path(path, "sweep.safetensors");
    nb_scope_begin();
    nb_tensor *ts[3] = {from_formula(&PY_TENSORS[0]), from_formula(&PY_TENSORS[3]), from_formula(&PY_TENSORS[8])};
    assert_int_equal(nb_safetensors_save(path, (const char *[]){"a", "bb", "c"}, ts, 3), NB_OK);
    nb_scope_end();
    size_t n;
    unsigned char *orig = io_read(path, &n), *buf = malloc(n);
    uint64_t hlen;
    memcpy(&hlen, orig, 8);
    static const unsigned char values[] = {0x00, '"', '{', ']', '9', '-', 0xff};
    int opened = 0, failed = 0;
    for (size_t pos = 0; pos < 8 + hlen; pos++) {
        for (size_t v = 0; v <= sizeof values; v++) {
            memcpy(buf, orig, n);
            buf[pos] = v < sizeof values ? values[v] : (unsigned char)(orig[pos] ^ 1);
            io_write(io_path(bad, "sweep_bad.safetensors"), buf, n);
            nb_clear_error();
            nb_safetensors *h = nb_safetensors_open(bad);
            if (!h) {
                assert_true(nb_last_status() == NB_ERR_FORMAT || nb_last_status() == NB_ERR_UNSUPPORTED ||
                            nb_last_status() == NB_ERR_OVERFLOW);
                failed++;
                continue;
            }
            opened++;
            nb_scope_begin();
            for (int i = 0; i < nb_safetensors_count(h); i++) {
                nb_tensor *t = nb_safetensors_get(h, nb_safetensors_name(h, i));
                if (!t) assert_int_equal(nb_last_status(), NB_ERR_UNSUPPORTED);
                else if (nb_numel(t) > 0) nbt_at(t, nb_numel(t) - 1); /* the last element is inside the file */
            }
            nb_scope_end();
            nb_safetensors_close(h);
        }
    }
    assert_true(opened > 0 && failed > 0);
    nb_clear_error();
    free(orig);
    free(buf);
}

/* ---- interop with the Python safetensors package ---- */

static void reads_python_written_file(void **state) {
    (void)state;
    char path[4096];
    nb_scope_begin();
    nb_safetensors *h = nb_safetensors_open(source_path(path, "data/py_written.safetensors"));
    assert_non_null(h);
    assert_int_equal(nb_safetensors_count(h), N_PY);
    for (int i = 0; i < N_PY; i++) check_formula(NBT(nb_safetensors_get(h, PY_TENSORS[i].name)), &PY_TENSORS[i]);
    nb_safetensors_close(h);
    nb_scope_end();
}

static void python_reads_our_file(void **state) {
    (void)state;
    char out[4096];
    io_path(out, "c_written.safetensors");
    const char *names[N_PY];
    nb_tensor *ts[N_PY];
    nb_scope_begin();
    for (int i = 0; i < N_PY; i++) {
        names[i] = PY_TENSORS[i].name;
        ts[i] = from_formula(&PY_TENSORS[i]);
    }
    assert_int_equal(nb_safetensors_save(out, names, ts, N_PY), NB_OK);
    nb_scope_end();
    if (system("python3 -c 'import numpy, safetensors.numpy' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skipped: python3 with numpy and safetensors unavailable (pip install safetensors numpy)\n");
        skip();
    }
    char script[4096], cmd[8300];
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", source_path(script, "check_safetensors.py"), out);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(borrowed_tensors_outlive_the_handle),
        cmocka_unit_test(unaligned_data_is_copied),
        cmocka_unit_test(save_target_kinds),
        cmocka_unit_test(atomic_save),
        cmocka_unit_test(hostile_headers),
        cmocka_unit_test(hostile_lengths),
        cmocka_unit_test(valid_edge_cases),
        cmocka_unit_test(single_byte_corruptions),
        cmocka_unit_test(reads_python_written_file),
        cmocka_unit_test(python_reads_our_file),
    };
    return cmocka_run_group_tests(tests, io_setup, io_teardown);
}
