/*
 * dist.c — MPI underneath the collectives (D1): initialization or attaching,
 * rank and world size, the agreement check that every rank passed the same
 * dtype and shape, all-reduce (f16 / bf16 through f32), broadcast,
 * all-gather and the sharding of a global batch.  Built without MPI, a
 * process is a world of one and the collectives are the identity.
 */
#include "dist.h"

#include <stdio.h>
#include <string.h>

#ifdef NB_HAVE_MPI
static bool started, attached; /* we called MPI_Init_thread / found MPI initialized */
#endif

bool nb_dist_available(void) {
#ifdef NB_HAVE_MPI
    return true;
#else
    return false;
#endif
}

const char *nb_dist_library_version(void) {
#ifdef NB_HAVE_MPI
    static char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (!v[0] && MPI_Get_library_version(v, &len) == MPI_SUCCESS) v[strcspn(v, "\n,")] = 0;
    return v[0] ? v : "MPI (version unknown)";
#else
    return "none";
#endif
}

bool nb__dist_active(void) {
#ifdef NB_HAVE_MPI
    int fin = 0;
    if ((started || attached) && MPI_Finalized(&fin) == MPI_SUCCESS && !fin) return true;
#endif
    return false;
}

#ifdef NB_HAVE_MPI
nb_status nb__dist_check(const char *op, int rc) {
    if (rc == MPI_SUCCESS) return NB_OK;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return nb__error(NB_ERR_DEVICE, "%s: MPI failed: %s", op, msg);
}

MPI_Datatype nb__dist_mpi_type(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return MPI_FLOAT;
    case NB_F64: return MPI_DOUBLE;
    case NB_I8: return MPI_INT8_T;
    case NB_I32: return MPI_INT32_T;
    case NB_I64: return MPI_INT64_T;
    default: return MPI_UINT8_T; /* u8, bool; f16 / bf16 are moved as bytes */
    }
}
#endif

nb_status nb_dist_init(int *argc, char ***argv) {
#ifdef NB_HAVE_MPI
    if (nb__dist_active()) return NB_OK;
    int init = 0, provided = 0, fin = 0;
    MPI_Finalized(&fin);
    if (fin) return nb__error(NB_ERR_STATE, "dist_init: MPI was finalized in this process and cannot start again");
    MPI_Initialized(&init);
    if (init) {
        attached = true;
        return NB_OK;
    }
    nb_status st = nb__dist_check("dist_init", MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    if (st == NB_OK) {
        started = true;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* errors come back as codes */
    }
    return st;
#else
    (void)argc;
    (void)argv;
    return nb__error(NB_ERR_UNSUPPORTED, "dist_init: this build of nabla has no MPI (install libopenmpi-dev and "
                     "rebuild; `nabla doctor` says)");
#endif
}

nb_status nb_dist_finalize(void) {
#ifdef NB_HAVE_MPI
    bool ours = started && nb__dist_active();
    started = attached = false;
    if (ours) return nb__dist_check("dist_finalize", MPI_Finalize());
#endif
    return NB_OK;
}

int nb_dist_rank(void) {
    int r = 0;
#ifdef NB_HAVE_MPI
    if (nb__dist_active()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
#endif
    return r;
}

int nb_dist_world_size(void) {
    int n = 1;
#ifdef NB_HAVE_MPI
    if (nb__dist_active()) MPI_Comm_size(MPI_COMM_WORLD, &n);
#endif
    return n;
}

nb_status nb__dist_agree(const char *op, nb_status local, const int64_t *sig, int n, const char *mine) {
    NB_ASSERT(n <= 32);
#ifdef NB_HAVE_MPI
    if (!nb__dist_active()) return local;
    /* [refused, sig...] and its negation, maximized: some rank refused its arguments when the first
     * is 1; the signatures are equal on every rank exactly when max == -max(-x) */
    int64_t v[2 * 33] = {0};
    v[0] = local != NB_OK;
    for (int i = 0; i < n; i++) v[1 + i] = sig[i];
    for (int i = 0; i <= n; i++) v[n + 1 + i] = -v[i];
    nb_status st = nb__dist_check(op, MPI_Allreduce(MPI_IN_PLACE, v, 2 * (n + 1), MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
    if (st != NB_OK || local != NB_OK) return local != NB_OK ? local : st;
    if (v[0]) return nb__error(NB_ERR_ARG, "%s: another rank's arguments were refused (see its error)", op);
    for (int i = 1; i <= n; i++)
        if (v[i] != -v[n + 1 + i])
            return nb__error(NB_ERR_SHAPE, "%s: the ranks passed other %s (rank %d has %s)", op,
                             mine ? "arguments" : "tensors", nb_dist_rank(), mine ? mine : "?");
#else
    (void)op;
    (void)sig;
    (void)n;
    (void)mine;
#endif
    return local;
}

/* Agreement on tensor t (dtype and shape) after this rank's own checks gave `local`. */
static nb_status agree_tensor(const char *op, nb_status local, const nb_tensor *t) {
    int64_t sig[2 + NB_MAX_DIMS] = {0};
    char mine[224] = "no tensor";
    if (t && local == NB_OK) {
        sig[0] = t->dtype;
        sig[1] = t->ndim;
        for (int d = 0; d < t->ndim; d++) sig[2 + d] = t->shape[d];
        snprintf(mine, sizeof mine, "%s %s", nb_dtype_name(t->dtype), NB_SHAPE_STR(t));
    }
    nb_status st = nb__dist_agree(op, local, sig, 2 + NB_MAX_DIMS, mine);
    if (st == NB_ERR_SHAPE && local == NB_OK) /* name what differs */
        return nb__error_set(NB_ERR_SHAPE, "%s: the ranks passed tensors of other dtypes or shapes (rank %d has %s)",
                             op, nb_dist_rank(), mine);
    return st;
}

/* This rank's checks of a collective's tensor (errors recorded, not returned early: every rank must
 * still take part in the agreement, or the collectives would fall out of step). */
static nb_status usable(const char *op, const nb_tensor *t, bool want_float) {
    if (!t) return nb__error(NB_ERR_NULL, "%s: the tensor is NULL", op);
    if (nb__is_symbolic(t) || !nb_is_contiguous(t) || t->requires_grad || t->storage->device.type != NB_DEVICE_CPU)
        return nb__error(NB_ERR_STATE, "%s: the tensor must be a contiguous CPU tensor that does not require grad "
                         "(got %s %s%s%s)", op, nb_dtype_name(t->dtype), NB_SHAPE_STR(t),
                         nb_is_contiguous(t) ? "" : ", not contiguous", t->requires_grad ? ", requiring grad" : "");
    if (want_float && !nb_dtype_is_float(t->dtype))
        return nb__error(NB_ERR_DTYPE, "%s: float tensors only, got %s", op, nb_dtype_name(t->dtype));
    return NB_OK;
}

void nb__dist_divide(void *dst, const void *src, int64_t n, nb_dtype dt, int by) {
    if (dt == NB_F32)
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = ((const float *)src)[i] / (float)by;
    else
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = ((const double *)src)[i] / by;
}

nb_status nb_dist_all_reduce(nb_tensor *t, nb_dist_op op) {
    const char *name = "dist_all_reduce";
    nb__error_frame fr;
    nb__own_begin(&fr);
    nb_status st = (unsigned)op < NB_DIST_OP_COUNT ? usable(name, t, true) : nb__error(NB_ERR_ARG, "%s: op %d", name, op);
    st = agree_tensor(name, st, t);
#ifdef NB_HAVE_MPI
    int world = nb_dist_world_size();
    if (st == NB_OK && world > 1) {
        int64_t n = nb_numel(t);
        bool half = t->dtype == NB_F16 || t->dtype == NB_BF16;
        nb_tensor *w = half ? nb__to_dtype(t, NB_F32) : nb_retain(t); /* f16/bf16: summed in f32 */
        nb_tensor *wc = w && half ? nb__dense(w) : w ? nb_retain(w) : NULL;
        nb_release(w);
        if (!wc) st = nb_last_status();
        for (int64_t i0 = 0; st == NB_OK && i0 < n; i0 += INT32_MAX / 8) { /* MPI counts are ints */
            int cnt = (int)(n - i0 < INT32_MAX / 8 ? n - i0 : INT32_MAX / 8);
            size_t es = nb_dtype_size(wc->dtype);
            st = nb__dist_check(name, MPI_Allreduce(MPI_IN_PLACE, nb__ptr(wc) + (size_t)i0 * es, cnt,
                                                    nb__dist_mpi_type(wc->dtype), MPI_SUM, MPI_COMM_WORLD));
        }
        if (st == NB_OK && op == NB_DIST_MEAN) nb__dist_divide(nb__ptr(wc), nb__ptr(wc), n, wc->dtype, world);
        if (st == NB_OK && half) st = nb__backend_of(t)->copy(t, wc);
        nb_release(wc);
    }
#endif
    return nb__own_end(&fr, name, st);
}

nb_status nb_dist_broadcast(nb_tensor *t, int root) {
    const char *name = "dist_broadcast";
    nb__error_frame fr;
    nb__own_begin(&fr);
    int world = nb_dist_world_size();
    nb_status st = root >= 0 && root < world ? usable(name, t, false)
                                             : nb__error(NB_ERR_ARG, "%s: root %d outside [0, %d)", name, root, world);
    st = agree_tensor(name, st, t);
#ifdef NB_HAVE_MPI
    size_t bytes = (size_t)nb_numel(t) * nb_dtype_size(t ? t->dtype : NB_U8);
    for (size_t i0 = 0; st == NB_OK && world > 1 && i0 < bytes; i0 += INT32_MAX / 2) {
        int cnt = (int)(bytes - i0 < INT32_MAX / 2 ? bytes - i0 : INT32_MAX / 2);
        st = nb__dist_check(name, MPI_Bcast(nb__ptr(t) + i0, cnt, MPI_BYTE, root, MPI_COMM_WORLD));
    }
#endif
    return nb__own_end(&fr, name, st);
}

nb_status nb_dist_all_gather(const nb_tensor *t, nb_tensor *out) {
    const char *name = "dist_all_gather";
    nb__error_frame fr;
    nb__own_begin(&fr);
    int world = nb_dist_world_size();
    nb_status st = usable(name, t, false);
    if (st == NB_OK && !out) st = nb__error(NB_ERR_NULL, "%s: out is NULL", name);
    if (st == NB_OK) {
        bool fits = out->dtype == t->dtype && out->ndim == t->ndim + 1 && out->shape[0] == world &&
                    !memcmp(out->shape + 1, t->shape, sizeof(int64_t) * (size_t)t->ndim);
        if (!fits)
            st = nb__error(NB_ERR_SHAPE, "%s: out %s %s must be %s [%d, ...%s]", name, nb_dtype_name(out->dtype),
                           NB_SHAPE_STR(out), nb_dtype_name(t->dtype), world, NB_SHAPE_STR(t));
        else if (!nb_is_contiguous(out) || out->requires_grad || nb__is_symbolic(out))
            st = nb__error(NB_ERR_STATE, "%s: out must be a contiguous CPU tensor that does not require grad", name);
    }
    st = agree_tensor(name, st, t);
    size_t bytes = t ? (size_t)nb_numel(t) * nb_dtype_size(t->dtype) : 0;
    if (st == NB_OK && world == 1) memcpy(nb__ptr(out), nb__ptr(t), bytes);
#ifdef NB_HAVE_MPI
    if (st == NB_OK && world > 1) {
        if (bytes > INT32_MAX)
            st = nb__error(NB_ERR_OVERFLOW, "%s: %zu bytes a rank exceed MPI's int count", name, bytes);
        else
            st = nb__dist_check(name, MPI_Allgather(nb__ptr(t), (int)bytes, MPI_BYTE, nb__ptr(out), (int)bytes,
                                                    MPI_BYTE, MPI_COMM_WORLD));
    }
#endif
    return nb__own_end(&fr, name, st);
}

nb_status nb_dist_shard(int64_t n, int64_t *offset, int64_t *count) {
    if (!offset || !count) return nb__error(NB_ERR_NULL, "dist_shard: offset or count is NULL");
    if (n < 0) return nb__error(NB_ERR_ARG, "dist_shard: negative batch %lld", (long long)n);
    int64_t world = nb_dist_world_size(), r = nb_dist_rank(), base = n / world, extra = n % world;
    *count = base + (r < extra);
    *offset = r * base + (r < extra ? r : extra);
    return NB_OK;
}
