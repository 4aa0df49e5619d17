/*
 * golden_reader.h — loads the golden files written by tests/golden/gen_golden.py
 * (format "NBG1", described there): a list of named cases, each a list of
 * named tensors with a dtype code, a shape and raw little-endian data.
 */
#ifndef NB_GOLDEN_READER_H
#define NB_GOLDEN_READER_H

#include <stddef.h>
#include <stdint.h>

#include "nabla.h"

typedef struct nbg_tensor {
    char *name;                 /* e.g. "in.x", "out.0", "grad.x", "p.axes" */
    nb_dtype dtype;
    int ndim;
    int64_t shape[NB_MAX_DIMS];
    int64_t numel;
    void *data;                 /* numel * nb_dtype_size(dtype) bytes, malloc'd (aligned for the dtype) */
} nbg_tensor;

typedef struct nbg_case {
    char *name;                 /* "KEY/variant" */
    int ntensors;
    nbg_tensor *tensors;
} nbg_case;

typedef struct nbg_file {
    int ncases;
    nbg_case *cases;
} nbg_file;

/**
 * Parse a golden file image of `size` bytes into *out.  Every length, count,
 * dtype and shape is checked against the remaining bytes.  Returns 0, or -1
 * with a message in err (errlen bytes) and *out left empty.
 */
int nbg_parse(const void *buf, size_t size, nbg_file *out, char *err, size_t errlen);
/** Read and parse the file at `path`; same contract as nbg_parse. */
int nbg_load(const char *path, nbg_file *out, char *err, size_t errlen);
/** Free everything nbg_parse allocated; *f becomes empty.  Safe on an empty file. */
void nbg_free(nbg_file *f);
/** The tensor called `name` in c, or NULL. */
const nbg_tensor *nbg_find(const nbg_case *c, const char *name);
/** Element i of t converted to double. */
double nbg_at(const nbg_tensor *t, int64_t i);
/** A new nabla tensor holding t's values (caller/scope owns it); NULL with nabla's error on failure. */
nb_tensor *nbg_to_tensor(const nbg_tensor *t);

#endif
