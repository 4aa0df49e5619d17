/*
 * idx.c — IDX files (the MNIST family's format), gzip-compressed or plain,
 * decoded with zlib's inflate; and the Fashion-MNIST loader built on them.
 */
#include "../core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* deflate expands data by at most this factor (zlib's "technical details"),
 * so a gzip file of S bytes decompresses to at most S * ratio bytes */
#define NB_DEFLATE_MAX_RATIO 1032
/* one inflate call writes at most this much (its avail_out is an unsigned int) */
#define NB_GZ_CHUNK (1u << 30)

static const char *OP = "idx_load";

/* IDX type code → dtype; false when the code is not an IDX type at all */
static bool idx_dtype(uint8_t code, nb_dtype *dt, bool *supported) {
    *supported = true;
    switch (code) {
    case 0x08: *dt = NB_U8; return true;
    case 0x09: *dt = NB_I8; return true;
    case 0x0C: *dt = NB_I32; return true;
    case 0x0D: *dt = NB_F32; return true;
    case 0x0E: *dt = NB_F64; return true;
    case 0x0B: *supported = false; return true; /* i16: nabla has no such dtype */
    default: return false;
    }
}

/*
 * A byte source over an open IDX file: its plain bytes, or its gzip members
 * (RFC 1952; several members concatenate) decoded with zlib's inflate.
 * gzread is not used because it silently ignores whatever follows the last
 * member; here any byte there is an error.
 */
typedef struct idx_src {
    int fd;
    bool gzip;        /* the file starts with the gzip magic 1f 8b */
    bool eof;         /* read() returned 0 */
    bool member_done; /* between members: the last one's trailer (CRC-32, length) checked */
    bool cut;         /* the gzip data ended inside a member */
    z_stream z;       /* next_in / avail_in: unread input, also in plain mode */
    unsigned char in[1 << 16];
} idx_src;

static bool src_fill(idx_src *s, const char *path) {
    ssize_t r;
    do r = read(s->fd, s->in, sizeof s->in);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        nb__error(NB_ERR_IO, "%s: reading '%s': %s", OP, path, strerror(errno));
        return false;
    }
    s->eof = r == 0;
    s->z.next_in = s->in;
    s->z.avail_in = (uInt)r;
    return true;
}

/* One inflate call into buf; adds the bytes produced to *got.  False after setting an error. */
static bool src_inflate(idx_src *s, const char *path, void *buf, int64_t n, int64_t *got) {
    if (s->member_done) { /* another member, or the end of the file */
        if (s->z.next_in[0] != 0x1f) {
            nb__error(NB_ERR_FORMAT, "%s: '%s': trailing bytes after the gzip stream", OP, path);
            return false;
        }
        inflateReset(&s->z);
        s->member_done = false;
    }
    uInt room = (uint64_t)n < NB_GZ_CHUNK ? (uInt)n : NB_GZ_CHUNK;
    s->z.next_out = buf;
    s->z.avail_out = room;
    int zr = inflate(&s->z, Z_NO_FLUSH);
    *got += room - s->z.avail_out;
    if (zr == Z_STREAM_END) s->member_done = true;
    else if (zr == Z_MEM_ERROR) nb__error(NB_ERR_OOM, "%s: '%s': out of memory in zlib", OP, path);
    else if (zr != Z_OK && zr != Z_BUF_ERROR)
        nb__error(NB_ERR_FORMAT, "%s: '%s': corrupted gzip stream (zlib: %s)", OP, path,
                  s->z.msg ? s->z.msg : "bad data");
    else if (s->eof && s->z.avail_in == 0 && s->z.avail_out == room) s->cut = true; /* no input left */
    return zr == Z_OK || zr == Z_BUF_ERROR || zr == Z_STREAM_END;
}

/* Read up to n bytes; returns the count read (short at the end of the data), or -1 after setting an error. */
static int64_t src_read(idx_src *s, const char *path, void *buf, int64_t n) {
    int64_t got = 0;
    while (got < n && !s->cut) {
        if (s->z.avail_in == 0 && !s->eof && !src_fill(s, path)) return -1;
        if (s->z.avail_in == 0 && (!s->gzip || s->member_done)) break; /* the end of the file */
        if (s->gzip) {
            if (!src_inflate(s, path, (char *)buf + got, n - got, &got)) return -1;
            continue;
        }
        size_t k = (uint64_t)(n - got) < s->z.avail_in ? (size_t)(n - got) : s->z.avail_in;
        memcpy((char *)buf + got, s->z.next_in, k);
        s->z.next_in += k;
        s->z.avail_in -= (uInt)k;
        got += (int64_t)k;
    }
    return got;
}

/* A source on fd (which it owns from here on), told plain or gzip by its first bytes; NULL after an error. */
/* zlib's allocations go through the library's allocator (nb_set_allocator) */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size) {
    (void)opaque;
    return nb__calloc(items, size);
}
static void z_free(voidpf opaque, voidpf p) {
    (void)opaque;
    nb__free(p);
}

static idx_src *src_open(int fd, const char *path) {
    idx_src *s = nb__calloc(1, sizeof *s);
    if (!s) {
        nb__error(NB_ERR_OOM, "%s: '%s': out of memory for the read buffer", OP, path);
        close(fd);
        return NULL;
    }
    s->fd = fd;
    if (!src_fill(s, path)) {
        close(fd);
        nb__free(s);
        return NULL;
    }
    s->gzip = s->z.avail_in >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
    unsigned char *next = s->z.next_in;
    uInt avail = s->z.avail_in;
    s->z.zalloc = z_alloc;
    s->z.zfree = z_free;
    if (s->gzip && inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip wrapper only */
        nb__error(NB_ERR_OOM, "%s: '%s': out of memory for the zlib stream", OP, path);
        close(fd);
        nb__free(s);
        return NULL;
    }
    s->z.next_in = next;
    s->z.avail_in = avail;
    return s;
}

static void src_close(idx_src *s) {
    if (s->gzip) inflateEnd(&s->z);
    close(s->fd);
    nb__free(s);
}

typedef struct idx_header {
    nb_dtype dtype;
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    int64_t nbytes; /* of the data that follow the header */
} idx_header;

static bool read_header(idx_src *f, const char *path, idx_header *h) {
    uint8_t magic[4];
    int64_t got = src_read(f, path, magic, 4);
    if (got < 0) return false;
    if (got < 4) {
        nb__error(NB_ERR_FORMAT, "%s: '%s': file ends after %lld bytes, inside the 4-byte magic", OP, path,
                  (long long)got);
        return false;
    }
    uint32_t m = (uint32_t)magic[0] << 24 | (uint32_t)magic[1] << 16 | (uint32_t)magic[2] << 8 | magic[3];
    bool supported;
    if (magic[0] || magic[1] || !idx_dtype(magic[2], &h->dtype, &supported)) {
        nb__error(NB_ERR_FORMAT,
                  "%s: '%s': bad magic 0x%08x (expected 0x0000TTRR with type TT in 08 09 0B 0C 0D 0E)", OP,
                  path, m);
        return false;
    }
    if (!supported) {
        nb__error(NB_ERR_UNSUPPORTED, "%s: '%s': IDX type 0x%02x (i16) has no nabla dtype", OP, path, magic[2]);
        return false;
    }
    h->ndim = magic[3];
    if (h->ndim < 1 || h->ndim > NB_MAX_DIMS) {
        nb__error(NB_ERR_FORMAT, "%s: '%s': rank %d outside [1, %d]", OP, path, h->ndim, NB_MAX_DIMS);
        return false;
    }
    uint8_t dims[4 * NB_MAX_DIMS];
    int64_t want = 4 * h->ndim;
    got = src_read(f, path, dims, want);
    if (got < 0) return false;
    if (got < want) {
        nb__error(NB_ERR_FORMAT, "%s: '%s': header truncated: %lld of %lld size bytes", OP, path,
                  (long long)got, (long long)want);
        return false;
    }
    int64_t bytes = (int64_t)nb_dtype_size(h->dtype);
    bool overflow = false;
    for (int i = 0; i < h->ndim; i++) {
        const uint8_t *d = dims + 4 * i;
        h->shape[i] = (int64_t)((uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3]);
        overflow |= __builtin_mul_overflow(bytes, h->shape[i], &bytes);
    }
    if (overflow || (uint64_t)bytes > SIZE_MAX) {
        bool empty = false;
        for (int i = 0; i < h->ndim; i++) empty |= h->shape[i] == 0;
        if (!empty) {
            nb__error(NB_ERR_OVERFLOW, "%s: '%s': sizes %s of %s overflow the byte count", OP, path,
                      NB_DIMS_STR(h->shape, h->ndim), nb_dtype_name(h->dtype));
            return false;
        }
        bytes = 0;
    }
    h->nbytes = bytes;
    return true;
}

/* Reject declared sizes the file cannot hold before allocating for them. */
static bool check_size(idx_src *f, const char *path, const idx_header *h, int64_t file_size) {
    int64_t header = 4 + 4 * (int64_t)h->ndim;
    if (!f->gzip) {
        if (file_size - header != h->nbytes) {
            nb__error(NB_ERR_FORMAT, "%s: '%s': sizes %s of %s need %lld data bytes, the file has %lld", OP, path,
                      NB_DIMS_STR(h->shape, h->ndim), nb_dtype_name(h->dtype), (long long)h->nbytes,
                      (long long)(file_size - header));
            return false;
        }
        return true;
    }
    if (h->nbytes / NB_DEFLATE_MAX_RATIO > file_size) {
        nb__error(NB_ERR_FORMAT,
                  "%s: '%s': sizes %s of %s need %lld data bytes, more than a %lld-byte gzip file can hold",
                  OP, path, NB_DIMS_STR(h->shape, h->ndim), nb_dtype_name(h->dtype), (long long)h->nbytes,
                  (long long)file_size);
        return false;
    }
    return true;
}

/* IDX stores elements big-endian; convert in place to the host order. */
static void from_big_endian(void *data, int64_t n, size_t es) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    char *p = data;
    for (int64_t i = 0; i < n; i++, p += es) {
        if (es == 4) {
            uint32_t v;
            memcpy(&v, p, 4);
            v = __builtin_bswap32(v);
            memcpy(p, &v, 4);
        } else if (es == 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            v = __builtin_bswap64(v);
            memcpy(p, &v, 8);
        }
    }
#else
    (void)data, (void)n, (void)es;
#endif
}

/* Data after the header: exactly h->nbytes, then the end of the file (after the gzip trailer). */
static bool read_data(idx_src *f, const char *path, const idx_header *h, nb_tensor *t) {
    int64_t got = src_read(f, path, nb__ptr(t), h->nbytes);
    if (got < 0) return false;
    if (got < h->nbytes) {
        nb__error(NB_ERR_FORMAT, "%s: '%s': truncated: sizes %s of %s need %lld data bytes, got %lld%s", OP,
                  path, NB_DIMS_STR(h->shape, h->ndim), nb_dtype_name(h->dtype), (long long)h->nbytes,
                  (long long)got, f->cut ? " (the gzip stream ends early)" : "");
        return false;
    }
    /* reading past the data checks the gzip trailer (CRC-32, length) and that no byte follows */
    char extra;
    got = src_read(f, path, &extra, 1);
    if (got < 0) return false;
    if (f->cut) {
        nb__error(NB_ERR_FORMAT, "%s: '%s': truncated: the gzip stream ends before its trailer", OP, path);
        return false;
    }
    if (got > 0) {
        nb__error(NB_ERR_FORMAT, "%s: '%s': trailing bytes after the %lld data bytes of sizes %s", OP, path,
                  (long long)h->nbytes, NB_DIMS_STR(h->shape, h->ndim));
        return false;
    }
    from_big_endian(nb__ptr(t), nb__numel(t), nb_dtype_size(t->dtype));
    return true;
}

/* Unscoped reader behind nb_idx_load. */
static nb_tensor *idx_read(const char *path) {
    if (!path) {
        nb__error(NB_ERR_NULL, "%s: path is NULL", OP);
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        nb__error(NB_ERR_IO, "%s: cannot open '%s': %s", OP, path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    idx_src *f = src_open(fd, path); /* owns fd from here on */
    if (!f) return NULL;
    idx_header h;
    nb_tensor *t = NULL;
    if (read_header(f, path, &h) && check_size(f, path, &h, (int64_t)st.st_size)) {
        t = nb__tensor_new(h.shape, h.ndim, h.dtype, NB_CPU);
        if (t && !read_data(f, path, &h, t)) {
            nb_release(t);
            t = NULL;
        }
    }
    src_close(f);
    return t;
}

nb_tensor *nb_idx_load(const char *path) { return nb__own(idx_read(path)); }

/* ---- Fashion-MNIST ---- */

static const char *const INSTALL_HINT =
    "install the Debian package dataset-fashion-mnist (it fills " NB_FASHION_MNIST_DIR ") or pass the directory";

/* dir/split-kind-ubyte.gz when present, else the plain file; unscoped */
static nb_tensor *load_split_file(const char *dir, const char *split, const char *kind) {
    char path[4096];
    struct stat st;
    int len = snprintf(path, sizeof path, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (len < 0 || (size_t)len >= sizeof path) {
        nb__error(NB_ERR_ARG, "fashion_mnist_load: directory name '%.64s…' is too long", dir);
        return NULL;
    }
    if (stat(path, &st) != 0) path[len - 3] = '\0'; /* drop ".gz" */
    if (stat(path, &st) != 0) {
        nb__error(NB_ERR_IO, "fashion_mnist_load: cannot open '%s[.gz]': %s; %s", path, strerror(errno),
                  INSTALL_HINT);
        return NULL;
    }
    return idx_read(path);
}

/* u8 [N, H, W] images and u8 [N] labels → f32 [N, H*W] in [0, 1] and i64 [N]. */
static nb_status convert(nb_tensor *img, nb_tensor *lab, nb_tensor **images, nb_tensor **labels) {
    if (img->dtype != NB_U8 || img->ndim != 3 || lab->dtype != NB_U8 || lab->ndim != 1 ||
        lab->shape[0] != img->shape[0])
        return nb__error(NB_ERR_FORMAT,
                         "fashion_mnist_load: images %s %s and labels %s %s are not u8 [N, H, W] and u8 [N]",
                         NB_SHAPE_STR(img), nb_dtype_name(img->dtype), NB_SHAPE_STR(lab),
                         nb_dtype_name(lab->dtype));
    int64_t n = img->shape[0], pixels = img->shape[1] * img->shape[2];
    nb_tensor *x = nb__tensor_new((int64_t[]){n, pixels}, 2, NB_F32, NB_CPU);
    nb_tensor *y = nb__tensor_new(&n, 1, NB_I64, NB_CPU);
    if (!x || !y) {
        nb_release(x);
        nb_release(y);
        return nb_last_status();
    }
    const uint8_t *p = (const uint8_t *)nb__ptr(img), *l = (const uint8_t *)nb__ptr(lab);
    float *xv = (float *)nb__ptr(x);
    int64_t *yv = (int64_t *)nb__ptr(y);
    for (int64_t i = 0; i < n * pixels; i++) xv[i] = (float)p[i] / 255.0f;
    for (int64_t i = 0; i < n; i++) yv[i] = l[i];
    if (!(*images = nb__own(x))) {
        nb_release(y);
        return nb_last_status();
    }
    if (!(*labels = nb__own(y))) {
        *images = NULL; /* the scope's: released with it */
        return nb_last_status();
    }
    return NB_OK;
}

static nb_status load_impl(const char *dir, bool train, nb_tensor **images, nb_tensor **labels) {
    if (!images || !labels) return nb__error(NB_ERR_NULL, "fashion_mnist_load: images or labels is NULL");
    *images = *labels = NULL;
    const char *root = dir ? dir : NB_FASHION_MNIST_DIR;
    const char *split = train ? "train" : "t10k";
    nb_tensor *img = load_split_file(root, split, "images-idx3");
    nb_tensor *lab = img ? load_split_file(root, split, "labels-idx1") : NULL;
    nb_status rc = lab ? convert(img, lab, images, labels) : nb_last_status();
    nb_release(img);
    nb_release(lab);
    return rc;
}

nb_status nb_fashion_mnist_load(const char *dir, bool train, nb_tensor **images, nb_tensor **labels) {
    NB_OWN_STATUS("fashion_mnist_load", load_impl(dir, train, images, labels));
}
