/*
 * safetensors.c — the safetensors format (huggingface/safetensors): atomic
 * save, and a memory-mapped loader that validates every header field (JSON
 * parsed by jansson) and hands out tensors borrowing the mapping.
 */
#include "../core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors.c maps little-endian file data directly: a little-endian host is required");

#define ST_MAX_HEADER 100000000ull /* MAX_HEADER_SIZE of the reference implementation */
#define ST_METADATA "__metadata__"
#define ST_IO_CHUNK ((size_t)1 << 30)

/* The dtype names of the safetensors spec with their element sizes and
 * nabla's dtype (-1 where nabla has none: the file is still validated). */
static const struct st_dtype {
    const char *name;
    uint64_t size;
    int dtype;
} st_dtypes[] = {
    {"F64", 8, NB_F64},   {"F32", 4, NB_F32},    {"F16", 2, NB_F16},     {"BF16", 2, NB_BF16},
    {"I64", 8, NB_I64},   {"I32", 4, NB_I32},    {"I8", 1, NB_I8},       {"U8", 1, NB_U8},
    {"BOOL", 1, NB_BOOL}, {"I16", 2, -1},        {"U16", 2, -1},         {"U32", 4, -1},
    {"U64", 8, -1},       {"F8_E4M3", 1, -1},    {"F8_E5M2", 1, -1},     {"F8_E8M0", 1, -1},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

static int st_kind_by_name(const char *name) {
    for (int k = 0; k < ST_NDTYPES; k++)
        if (strcmp(st_dtypes[k].name, name) == 0) return k;
    return -1;
}

static int st_kind_of(nb_dtype dt) {
    for (int k = 0; k < ST_NDTYPES; k++)
        if (st_dtypes[k].dtype == (int)dt) return k;
    nb__abort(__FILE__, __LINE__, "every nabla dtype has a safetensors name");
}

static const char *json_kind(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* ======================================================================== */
/* Loading                                                                  */
/* ======================================================================== */

typedef struct st_entry {
    char *name;
    int kind; /* index into st_dtypes */
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    uint64_t begin, end; /* byte range in the data buffer */
} st_entry;

struct nb_safetensors {
    atomic_int refs; /* the caller's handle + one per borrowing tensor storage */
    char *path;
    void *map;
    size_t map_size;
    const char *data; /* the data buffer inside the mapping */
    uint64_t data_size;
    int n;
    st_entry *entries; /* sorted by data offset */
};

static void st_destroy(nb_safetensors *h) {
    if (h->map) munmap(h->map, h->map_size);
    for (int i = 0; i < h->n; i++) nb__free(h->entries[i].name);
    nb__free(h->entries);
    nb__free(h->path);
    nb__free(h);
}

static void st_unref(nb_safetensors *h) {
    if (atomic_fetch_sub(&h->refs, 1) == 1) st_destroy(h);
}

/* storage release callback of a tensor borrowing the mapping */
static void st_release_blob(void *ctx, void *data) {
    (void)data;
    st_unref(ctx);
}

/* Set an error "safetensors_open: 'path': <message>"; returns false. */
__attribute__((format(printf, 3, 4))) static bool st_fail(const nb_safetensors *h, nb_status s,
                                                          const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nb__error(s, "safetensors_open: '%s': %s", h->path, msg);
    return false;
}

static bool map_file(nb_safetensors *h) {
    int fd = open(h->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block us */
    if (fd < 0) return st_fail(h, NB_ERR_IO, "cannot open: %s", strerror(errno));
    struct stat st;
    bool ok = false;
    if (fstat(fd, &st) != 0) st_fail(h, NB_ERR_IO, "cannot stat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode)) st_fail(h, NB_ERR_IO, "not a regular file");
    else if (st.st_size < 8)
        st_fail(h, NB_ERR_FORMAT, "file is %lld bytes, shorter than the 8-byte header length",
                (long long)st.st_size);
    else {
        /* private + writable: writes to borrowed tensors never reach the file */
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            st_fail(h, NB_ERR_IO, "cannot map %lld bytes: %s", (long long)st.st_size, strerror(errno));
        else {
            h->map = m;
            h->map_size = (size_t)st.st_size;
            ok = true;
        }
    }
    close(fd);
    return ok;
}

/* The header length, the JSON, its top level; sets h->data.  NULL on error. */
static json_t *parse_header(nb_safetensors *h) {
    uint64_t n;
    memcpy(&n, h->map, 8);
    uint64_t avail = h->map_size - 8;
    if (n == 0 || n > ST_MAX_HEADER || n > avail) {
        st_fail(h, NB_ERR_FORMAT, "header length %llu is not in [1, min(%llu, %llu bytes after the length field)]",
                (unsigned long long)n, ST_MAX_HEADER, (unsigned long long)avail);
        return NULL;
    }
    json_error_t je = {0}; /* jansson leaves it unset after some allocation failures */
    unsigned long failures = nb__alloc_failures();
    json_t *root = json_loadb((const char *)h->map + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    /* jansson may report an allocation failure as a syntax error, or not at all */
    if (!root && (json_error_code(&je) == json_error_out_of_memory || nb__alloc_failures() != failures)) {
        st_fail(h, NB_ERR_OOM, "out of memory parsing the %llu-byte JSON header", (unsigned long long)n);
        return NULL;
    }
    if (!root) {
        st_fail(h, NB_ERR_FORMAT, "header is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        st_fail(h, NB_ERR_FORMAT, "header is a JSON %s, not an object", json_kind(root));
        json_decref(root);
        return NULL;
    }
    h->data = (const char *)h->map + 8 + n;
    h->data_size = avail - n;
    return root;
}

static bool check_metadata(const nb_safetensors *h, json_t *meta) {
    if (!json_is_object(meta))
        return st_fail(h, NB_ERR_FORMAT, "%s is a JSON %s, not an object", ST_METADATA, json_kind(meta));
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        if (!json_is_string(v))
            return st_fail(h, NB_ERR_FORMAT, "%s['%s'] is a JSON %s, not a string", ST_METADATA, key,
                           json_kind(v));
    }
    return true;
}

/* "shape": array of non-negative integers; returns its byte size via *nbytes */
static bool parse_shape(const nb_safetensors *h, const char *name, json_t *sh, st_entry *e, uint64_t *nbytes) {
    if (!json_is_array(sh))
        return st_fail(h, NB_ERR_FORMAT, "tensor '%s': field 'shape' is %s, not an array", name,
                       sh ? json_kind(sh) : "missing");
    size_t rank = json_array_size(sh);
    if (rank > NB_MAX_DIMS)
        return st_fail(h, NB_ERR_UNSUPPORTED, "tensor '%s': rank %zu exceeds NB_MAX_DIMS (%d)", name, rank,
                       NB_MAX_DIMS);
    e->ndim = (int)rank;
    uint64_t bytes = st_dtypes[e->kind].size;
    bool overflow = false, empty = false;
    for (size_t i = 0; i < rank; i++) {
        json_t *d = json_array_get(sh, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return st_fail(h, NB_ERR_FORMAT, "tensor '%s': shape[%zu] is not a non-negative integer", name, i);
        e->shape[i] = json_integer_value(d);
        overflow |= __builtin_mul_overflow(bytes, (uint64_t)e->shape[i], &bytes);
        empty |= e->shape[i] == 0;
    }
    if (empty) bytes = 0;
    else if (overflow)
        return st_fail(h, NB_ERR_OVERFLOW, "tensor '%s': shape %s of %s overflows the byte count", name,
                       NB_DIMS_STR(e->shape, e->ndim), st_dtypes[e->kind].name);
    *nbytes = bytes;
    return true;
}

/* "data_offsets": [begin, end] inside the data buffer, spanning exactly nbytes */
static bool parse_offsets(const nb_safetensors *h, const char *name, json_t *off, st_entry *e, uint64_t nbytes) {
    json_t *b = json_array_get(off, 0), *x = json_array_get(off, 1);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(b) || !json_is_integer(x) ||
        json_integer_value(b) < 0 || json_integer_value(x) < 0)
        return st_fail(h, NB_ERR_FORMAT, "tensor '%s': field 'data_offsets' is not [begin, end] of non-negative integers",
                       name);
    e->begin = (uint64_t)json_integer_value(b);
    e->end = (uint64_t)json_integer_value(x);
    if (e->begin > e->end)
        return st_fail(h, NB_ERR_FORMAT, "tensor '%s': data_offsets [%llu, %llu] end before they begin", name,
                       (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > h->data_size)
        return st_fail(h, NB_ERR_FORMAT, "tensor '%s': data_offsets [%llu, %llu] run past the %llu-byte data buffer",
                       name, (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)h->data_size);
    if (e->end - e->begin != nbytes)
        return st_fail(h, NB_ERR_FORMAT, "tensor '%s': data_offsets [%llu, %llu] span %llu bytes, shape %s of %s needs %llu",
                       name, (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)(e->end - e->begin), NB_DIMS_STR(e->shape, e->ndim),
                       st_dtypes[e->kind].name, (unsigned long long)nbytes);
    return true;
}

static bool parse_entry(const nb_safetensors *h, const char *name, json_t *v, st_entry *e) {
    if (!*name) return st_fail(h, NB_ERR_FORMAT, "a tensor name is empty");
    if (!json_is_object(v))
        return st_fail(h, NB_ERR_FORMAT, "tensor '%s': entry is a JSON %s, not an object", name, json_kind(v));
    json_t *dt = json_object_get(v, "dtype");
    if (!json_is_string(dt))
        return st_fail(h, NB_ERR_FORMAT, "tensor '%s': field 'dtype' is %s, not a string", name,
                       dt ? json_kind(dt) : "missing");
    e->kind = st_kind_by_name(json_string_value(dt));
    if (e->kind < 0)
        return st_fail(h, NB_ERR_UNSUPPORTED, "tensor '%s': dtype '%s' is not a safetensors dtype nabla knows", name,
                       json_string_value(dt));
    uint64_t nbytes = 0;
    return parse_shape(h, name, json_object_get(v, "shape"), e, &nbytes) &&
           parse_offsets(h, name, json_object_get(v, "data_offsets"), e, nbytes);
}

static bool read_entries(nb_safetensors *h, json_t *root) {
    size_t count = json_object_size(root) - (json_object_get(root, ST_METADATA) ? 1 : 0);
    h->entries = nb__calloc(count ? count : 1, sizeof *h->entries);
    if (!h->entries) return st_fail(h, NB_ERR_OOM, "out of memory for %zu entries", count);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, ST_METADATA) == 0) {
            if (!check_metadata(h, v)) return false;
            continue;
        }
        st_entry *e = &h->entries[h->n];
        if (!parse_entry(h, key, v, e)) return false;
        if (!(e->name = nb__strdup(key))) return st_fail(h, NB_ERR_OOM, "out of memory");
        h->n++;
    }
    return true;
}

static int by_offset(const void *pa, const void *pb) {
    const st_entry *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The tensors must tile the data buffer: no overlap, no hole (the spec's rule). */
static bool check_coverage(nb_safetensors *h) {
    qsort(h->entries, (size_t)h->n, sizeof *h->entries, by_offset);
    uint64_t pos = 0;
    for (int i = 0; i < h->n; i++) {
        const st_entry *e = &h->entries[i];
        if (e->begin < pos)
            return st_fail(h, NB_ERR_FORMAT, "tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                           h->entries[i - 1].name, (unsigned long long)h->entries[i - 1].begin,
                           (unsigned long long)pos, e->name, (unsigned long long)e->begin,
                           (unsigned long long)e->end);
        if (e->begin > pos)
            return st_fail(h, NB_ERR_FORMAT, "data bytes [%llu, %llu) belong to no tensor (a hole before '%s')",
                           (unsigned long long)pos, (unsigned long long)e->begin, e->name);
        pos = e->end;
    }
    if (pos != h->data_size)
        return st_fail(h, NB_ERR_FORMAT, "data bytes [%llu, %llu) at the end belong to no tensor",
                       (unsigned long long)pos, (unsigned long long)h->data_size);
    return true;
}

nb_safetensors *nb_safetensors_open(const char *path) {
    if (!path) {
        nb__error(NB_ERR_NULL, "safetensors_open: path is NULL");
        return NULL;
    }
    nb_safetensors *h = nb__calloc(1, sizeof *h);
    if (!h || !(h->path = nb__strdup(path))) {
        nb__free(h);
        nb__error(NB_ERR_OOM, "safetensors_open: out of memory");
        return NULL;
    }
    atomic_init(&h->refs, 1);
    json_t *root = NULL;
    bool ok = map_file(h) && (root = parse_header(h)) && read_entries(h, root) && check_coverage(h);
    json_decref(root);
    if (!ok) {
        st_destroy(h);
        return NULL;
    }
    return h;
}

int nb_safetensors_count(const nb_safetensors *h) {
    if (!h) {
        nb__error(NB_ERR_NULL, "safetensors_count: handle is NULL");
        return -1;
    }
    return h->n;
}

const char *nb_safetensors_name(const nb_safetensors *h, int i) {
    if (!h) {
        nb__error(NB_ERR_NULL, "safetensors_name: handle is NULL");
        return NULL;
    }
    if (i < 0 || i >= h->n) {
        nb__error(NB_ERR_INDEX, "safetensors_name: index %d outside [0, %d) for '%s'", i, h->n, h->path);
        return NULL;
    }
    return h->entries[i].name;
}

nb_tensor *nb_safetensors_get(nb_safetensors *h, const char *name) {
    if (!h || !name) {
        nb__error(NB_ERR_NULL, "safetensors_get: handle or name is NULL");
        return NULL;
    }
    const st_entry *e = NULL;
    for (int i = 0; i < h->n && !e; i++)
        if (strcmp(h->entries[i].name, name) == 0) e = &h->entries[i];
    if (!e) {
        nb__error(NB_ERR_ARG, "safetensors_get: '%s' has no tensor named '%s'", h->path, name);
        return NULL;
    }
    const struct st_dtype *d = &st_dtypes[e->kind];
    if (d->dtype < 0) {
        nb__error(NB_ERR_UNSUPPORTED, "safetensors_get: '%s': tensor '%s' has dtype %s, which nabla lacks", h->path,
                  name, d->name);
        return NULL;
    }
    char *p = (char *)h->data + e->begin;
    if ((uintptr_t)p % d->size != 0) return nb_from_data(p, e->shape, e->ndim, (nb_dtype)d->dtype);
    atomic_fetch_add(&h->refs, 1); /* dropped by st_release_blob with the storage */
    nb_tensor *t = nb_from_blob(p, e->shape, NULL, e->ndim, (nb_dtype)d->dtype, st_release_blob, h);
    if (!t) st_unref(h);
    return t;
}

void nb_safetensors_close(nb_safetensors *h) {
    if (h) st_unref(h);
}

/* ======================================================================== */
/* Saving                                                                   */
/* ======================================================================== */

static const char *SAVE = "safetensors_save";

/* element count for an allocation of n (>= 0) items, at least 1 */
static size_t alloc_count(int n) { return n > 0 ? (size_t)n : 1; }

static int by_string(const void *pa, const void *pb) {
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

static nb_status check_inputs(const char *const *names, nb_tensor *const *tensors, int n) {
    for (int i = 0; i < n; i++) {
        if (!names[i] || !tensors[i]) return nb__error(NB_ERR_NULL, "%s: name or tensor %d is NULL", SAVE, i);
        if (!*names[i] || strcmp(names[i], ST_METADATA) == 0)
            return nb__error(NB_ERR_ARG, "%s: name %d ('%s') is empty or reserved", SAVE, i, names[i]);
    }
    if (n < 2) return NB_OK;
    const char **sorted = nb__malloc(sizeof *sorted * (size_t)n);
    if (!sorted) return nb__error(NB_ERR_OOM, "%s: out of memory", SAVE);
    memcpy(sorted, names, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, by_string);
    nb_status rc = NB_OK;
    for (int i = 1; i < n && rc == NB_OK; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            rc = nb__error(NB_ERR_ARG, "%s: name '%s' is used twice", SAVE, sorted[i]);
    nb__free(sorted);
    return rc;
}

/* What gets written: host contiguous data, each tensor's byte range, the padded header. */
typedef struct st_plan {
    int n;
    nb_tensor **data;  /* host, contiguous; owned by the caller's private scope */
    int *order;        /* layout order: decreasing element size, then input order */
    uint64_t *begin;   /* per input index */
    char *header;      /* JSON padded with spaces so that 8 + header_len is a multiple of 8 */
    size_t header_len;
} st_plan;

static void plan_free(st_plan *p) {
    nb__free(p->data);
    nb__free(p->order);
    nb__free(p->begin);
    nb__free(p->header);
}

static nb_status plan_data(st_plan *p, nb_tensor *const *tensors) {
    nb_status rc = NB_OK;
    nb_no_grad_begin(); /* saving is not recorded */
    for (int i = 0; i < p->n && rc == NB_OK; i++) {
        nb_tensor *t = tensors[i];
        nb_tensor *host = nb__is_host(t->storage->device) ? t : nb_to_device(t, NB_CPU);
        p->data[i] = nb_contiguous(host);
        if (!p->data[i]) rc = nb_last_status();
    }
    nb_no_grad_end();
    return rc;
}

static int by_size_desc(const void *pa, const void *pb) {
    const int64_t *a = pa, *b = pb; /* {element size, index} */
    if (a[0] != b[0]) return a[0] > b[0] ? -1 : 1;
    return a[1] < b[1] ? -1 : a[1] > b[1];
}

static nb_status plan_layout(st_plan *p) {
    int64_t (*keys)[2] = nb__malloc(sizeof *keys * alloc_count(p->n));
    if (!keys) return nb__error(NB_ERR_OOM, "%s: out of memory", SAVE);
    for (int i = 0; i < p->n; i++) {
        keys[i][0] = (int64_t)nb_dtype_size(p->data[i]->dtype);
        keys[i][1] = i;
    }
    qsort(keys, (size_t)p->n, sizeof *keys, by_size_desc);
    uint64_t pos = 0;
    nb_status rc = NB_OK;
    for (int j = 0; j < p->n && rc == NB_OK; j++) {
        int i = (int)keys[j][1];
        p->order[j] = i;
        p->begin[i] = pos;
        uint64_t bytes = (uint64_t)nb__numel(p->data[i]) * nb_dtype_size(p->data[i]->dtype);
        if (__builtin_add_overflow(pos, bytes, &pos) || pos > INT64_MAX)
            rc = nb__error(NB_ERR_OVERFLOW, "%s: the data of %d tensors overflow the file size", SAVE, p->n);
    }
    nb__free(keys);
    return rc;
}

static json_t *entry_json(const nb_tensor *t, uint64_t begin) {
    json_t *shape = json_array();
    for (int d = 0; shape && d < t->ndim; d++)
        if (json_array_append_new(shape, json_integer(t->shape[d])) != 0) {
            json_decref(shape);
            shape = NULL;
        }
    uint64_t end = begin + (uint64_t)nb__numel(t) * nb_dtype_size(t->dtype);
    return json_pack("{s:s, s:o, s:[I, I]}", "dtype", st_dtypes[st_kind_of(t->dtype)].name, "shape", shape,
                     "data_offsets", (json_int_t)begin, (json_int_t)end);
}

static nb_status plan_header(st_plan *p, const char *const *names) {
    /* jansson does not always report an allocation failure (json_dumps leaves out an object key it
     * could not write), so the failures of nb_set_allocator's function are counted as well */
    unsigned long failures = nb__alloc_failures();
    json_t *root = json_object();
    bool oom = !root;
    nb_status rc = NB_OK;
    for (int i = 0; !oom && i < p->n && rc == NB_OK; i++) {
        json_t *e = entry_json(p->data[i], p->begin[i]);
        if (!e) oom = true;
        else if (json_object_set_new(root, names[i], e) != 0) { /* frees e; a bad key or no memory */
            if (nb__alloc_failures() != failures) oom = true;
            else rc = nb__error(NB_ERR_ARG, "%s: name %d is not valid UTF-8", SAVE, i);
        }
    }
    char *s = !oom && rc == NB_OK ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (rc == NB_OK && (oom || !s || nb__alloc_failures() != failures))
        rc = nb__error(NB_ERR_OOM, "%s: out of memory building the header of %d tensors", SAVE, p->n);
    if (rc == NB_OK) {
        size_t len = strlen(s);
        p->header_len = ((8 + len + 7) & ~(size_t)7) - 8;
        p->header = nb__malloc(p->header_len);
        if (p->header) {
            memcpy(p->header, s, len);
            memset(p->header + len, ' ', p->header_len - len);
        } else {
            rc = nb__error(NB_ERR_OOM, "%s: out of memory for a %zu-byte header", SAVE, p->header_len);
        }
    }
    json_free_t json_free; /* s comes from jansson's allocator */
    json_get_alloc_funcs(NULL, &json_free);
    if (s) json_free(s);
    return rc;
}

static bool write_all(int fd, const void *buf, size_t n) {
    const char *c = buf;
    while (n > 0) {
        ssize_t w = write(fd, c, n < ST_IO_CHUNK ? n : ST_IO_CHUNK);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

static nb_status write_contents(int fd, const char *tmp, const st_plan *p) {
    uint64_t len = p->header_len; /* little-endian host (asserted above) */
    bool ok = write_all(fd, &len, 8) && write_all(fd, p->header, p->header_len);
    for (int j = 0; ok && j < p->n; j++) {
        const nb_tensor *t = p->data[p->order[j]];
        ok = write_all(fd, nb__ptr(t), (size_t)nb__numel(t) * nb_dtype_size(t->dtype));
    }
    if (!ok) return nb__error(NB_ERR_IO, "%s: writing '%s': %s", SAVE, tmp, errno ? strerror(errno) : "short write");
    if (fsync(fd) != 0) return nb__error(NB_ERR_IO, "%s: fsync of '%s': %s", SAVE, tmp, strerror(errno));
    return NB_OK;
}

/* Make the rename durable; best effort (some file systems refuse directory fsync). */
static void sync_parent_dir(const char *path) {
    char *dir = nb__strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    const char *d = ".";
    if (slash == dir) d = "/";
    else if (slash) {
        *slash = '\0';
        d = dir;
    }
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    nb__free(dir);
}

/* Unique temporary file next to path; returns its fd (and name in tmp) or -1 with an error set. */
static int open_temp(const char *path, char *tmp, size_t cap) {
    static atomic_uint counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, cap, "%s.tmp-%ld-%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) {
            if (fd < 0) nb__error(NB_ERR_IO, "%s: cannot create '%s': %s", SAVE, tmp, strerror(errno));
            return fd;
        }
    }
    nb__error(NB_ERR_IO, "%s: cannot create a temporary file next to '%s'", SAVE, path);
    return -1;
}

/*
 * The file a save replaces, into *target (nb__malloc'd): path itself, or the file a
 * symlink at path resolves to (realpath), so the link is written through, not
 * replaced.  An existing target must be a regular file — a device, FIFO,
 * socket or directory is refused — and *st gets its status (st_nlink 0 for a
 * new file).
 */
static nb_status save_target(const char *path, char **target, struct stat *st) {
    memset(st, 0, sizeof *st);
    if (stat(path, st) != 0) {
        struct stat lst;
        if (errno != ENOENT)
            return nb__error(NB_ERR_IO, "%s: cannot stat '%s': %s", SAVE, path, strerror(errno));
        if (lstat(path, &lst) == 0)
            return nb__error(NB_ERR_IO, "%s: '%s' is a symbolic link to a missing file", SAVE, path);
        memset(st, 0, sizeof *st);
        *target = nb__strdup(path);
    } else if (!S_ISREG(st->st_mode)) {
        return nb__error(NB_ERR_IO, "%s: '%s' exists and is not a regular file; refusing to replace it", SAVE, path);
    } else {
        char resolved[PATH_MAX];
        if (!realpath(path, resolved))
            return nb__error(NB_ERR_IO, "%s: cannot resolve '%s': %s", SAVE, path, strerror(errno));
        *target = nb__strdup(resolved);
    }
    return *target ? NB_OK : nb__error(NB_ERR_OOM, "%s: out of memory", SAVE);
}

static nb_status write_atomically(const char *path, const st_plan *p) {
    char *target = NULL;
    struct stat st;
    nb_status rc = save_target(path, &target, &st);
    if (rc != NB_OK) return rc;
    size_t cap = strlen(target) + 64;
    char *tmp = nb__malloc(cap);
    int fd = tmp ? open_temp(target, tmp, cap) : -1;
    if (fd < 0) {
        if (!tmp) nb__error(NB_ERR_OOM, "%s: out of memory", SAVE);
        nb__free(tmp);
        nb__free(target);
        return nb_last_status();
    }
    /* an existing file keeps its mode; a new one gets 0666 less the umask */
    if (st.st_nlink && fchmod(fd, st.st_mode & 07777) != 0)
        rc = nb__error(NB_ERR_IO, "%s: cannot set the mode of '%s': %s", SAVE, tmp, strerror(errno));
    if (rc == NB_OK) rc = write_contents(fd, tmp, p);
    if (close(fd) != 0 && rc == NB_OK)
        rc = nb__error(NB_ERR_IO, "%s: closing '%s': %s", SAVE, tmp, strerror(errno));
    if (rc == NB_OK && rename(tmp, target) != 0)
        rc = nb__error(NB_ERR_IO, "%s: renaming '%s' to '%s': %s", SAVE, tmp, target, strerror(errno));
    if (rc == NB_OK) sync_parent_dir(target);
    else unlink(tmp);
    nb__free(tmp);
    nb__free(target);
    return rc;
}

static nb_status save_impl(const char *path, const char *const *names, nb_tensor *const *tensors, int n) {
    if (!path || (n > 0 && (!names || !tensors)))
        return nb__error(NB_ERR_NULL, "%s: path, names or tensors is NULL", SAVE);
    if (n < 0) return nb__error(NB_ERR_ARG, "%s: tensor count %d is negative", SAVE, n);
    nb_status rc = check_inputs(names, tensors, n);
    if (rc != NB_OK) return rc;
    size_t m = alloc_count(n);
    st_plan p = {.n = n, .data = nb__calloc(m, sizeof *p.data), .order = nb__calloc(m, sizeof *p.order),
                 .begin = nb__calloc(m, sizeof *p.begin)};
    nb_scope_begin(); /* owns the host copies */
    if (!p.data || !p.order || !p.begin) rc = nb__error(NB_ERR_OOM, "%s: out of memory", SAVE);
    if (rc == NB_OK) rc = plan_data(&p, tensors);
    if (rc == NB_OK) rc = plan_layout(&p);
    if (rc == NB_OK) rc = plan_header(&p, names);
    if (rc == NB_OK) rc = write_atomically(path, &p);
    nb_scope_end();
    plan_free(&p);
    return rc;
}

nb_status nb_safetensors_save(const char *path, const char *const *names, nb_tensor *const *tensors, int n) {
    NB_OWN_STATUS(SAVE, save_impl(path, names, tensors, n));
}
