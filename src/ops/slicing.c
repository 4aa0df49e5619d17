/*
 * slicing.c — slicing specs (G4, NumPy basic indexing): nb_index lowers one
 * spec per axis (whole axis, index keeping the axis, range, tail, select)
 * to the slice / select views of view.c, so an indexed tensor is a view
 * eagerly and a chain of view nodes when traced.
 */
#include "ops.h"

/* t[i:i+1] along ax with i counted from the end when negative (an index: out of range is an error). */
static nb_tensor *index_keep(nb_tensor *t, int ax, int64_t i) {
    int64_t n = t->shape[ax];
    if (nb__dim_sym(n)) {
        if (i < 0 && (i = nb__dim_add("index", n, i)) == -1) return NULL;
    } else if (i < -n || i >= n) {
        nb__error(NB_ERR_INDEX, "index: index %lld out of range for axis %d of size %lld", (long long)i, ax,
                  (long long)n);
        return NULL;
    } else if (i < 0)
        i += n;
    return nb_narrow(t, ax, i, 1);
}

nb_tensor *nb_index(nb_tensor *t, const nb_slice_spec *specs, int n) {
    NB_CHECK_ARG("index", t);
    if (n < 0 || (n && !specs)) {
        nb__error(n < 0 ? NB_ERR_ARG : NB_ERR_NULL, "index: %d specs%s", n, n < 0 ? " (must be >= 0)" : ", specs NULL");
        return NULL;
    }
    if (n > t->ndim) {
        nb__error(NB_ERR_INDEX, "index: %d specs for a tensor of rank %d", n, t->ndim);
        return NULL;
    }
    for (int k = 0; k < n; k++)
        if ((unsigned)specs[k].kind >= NB_SLICE_KIND_COUNT) {
            nb__error(NB_ERR_ARG, "index: spec %d has unknown kind %d", k, (int)specs[k].kind);
            return NULL;
        }
    NB_COMPOSITE_BEGIN();
    nb_tensor *r = t;
    for (int k = 0, ax = 0; k < n && r; k++) {
        const nb_slice_spec *s = &specs[k];
        switch (s->kind) {
        case NB_SLICE_ALL: ax++; break;
        case NB_SLICE_INDEX: r = index_keep(r, ax++, s->start); break;
        case NB_SLICE_RANGE: r = nb_slice(r, ax++, s->start, s->stop, s->step); break;
        case NB_SLICE_TAIL: r = nb_slice(r, ax++, s->start, NB_END, 1); break;
        default: r = nb_select(r, ax, s->start); break; /* SELECT: the axis goes */
        }
    }
    NB_COMPOSITE_RETURN(r);
}
