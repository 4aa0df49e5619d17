/*
 * ddp.c — the gradient synchronizer of data-parallel training (D1), after
 * PyTorch's DDP reducer (Li et al., "PyTorch Distributed", VLDB 2020): the
 * parameters' gradients laid out in reverse order in one flat buffer cut into
 * buckets, each bucket all-reduced (MPI_Iallreduce) once every gradient it
 * holds is final — the post-accumulate hooks tell — and the buckets started
 * in index order on every rank, as MPI needs: every bucket but the last with
 * MPI_Iallreduce, whether during backward or in finish, the last (the first
 * parameters, which backward finishes last) with MPI_Allreduce in finish —
 * the same kind of call for a bucket on every rank, as MPI's matching of
 * collectives requires, whatever order each rank's backward takes.  Each gradient is divided by
 * the world size as it is copied in (DDP's pre-division), so the sums are the
 * means, and the grads finish sets are views of the buffer (DDP's
 * gradient_as_bucket_view): one copy a step, none back.
 */
#include "dist.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

typedef struct ddp_slot {
    struct nb_ddp *d;
    int i;
} ddp_slot;

struct nb_ddp {
    int n, world;
    nb_tensor **params;
    nb_dtype dt;
    size_t es;
    int64_t *off, *len, total; /* each parameter's place in flat (elements; reverse order) */
    nb_storage *buf;           /* flat's storage, which the grads view */
    char *flat;
    int nb;                    /* buckets: [b0[k], b0[k+1]) */
    int64_t *b0;
    int *first, *last;         /* per parameter: the buckets it overlaps */
    int *pending;              /* per bucket: parameters not yet in */
    bool *ready;
    nb_status err;             /* the first failure of this step's MPI calls during backward */
    int next;                  /* buckets started */
    ddp_slot *slots;
    int64_t *hook_ids;
    nb_ddp_stats stats;
#ifdef NB_HAVE_MPI
    MPI_Request *req;
#endif
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Start the buckets from d->next on that have every gradient in, in index order: during backward
 * (early) all but the last; in finish the rest, the last with the blocking MPI_Allreduce (the
 * library's fastest path; the one bucket of a small model). */
static void launch_ready(nb_ddp *d, bool early) {
    while (d->next < d->nb && d->pending[d->next] == 0 && !(early && d->next == d->nb - 1)) {
        int k = d->next++;
        (void)k; /* the bucket: MPI's only */
#ifdef NB_HAVE_MPI
        if (d->world > 1) {
            int cnt = (int)(d->b0[k + 1] - d->b0[k]);
            char *at = d->flat + (size_t)d->b0[k] * d->es;
            MPI_Datatype t = nb__dist_mpi_type(d->dt);
            bool last = k == d->nb - 1;
            int rc = last ? MPI_Allreduce(MPI_IN_PLACE, at, cnt, t, MPI_SUM, MPI_COMM_WORLD)
                          : MPI_Iallreduce(MPI_IN_PLACE, at, cnt, t, MPI_SUM, MPI_COMM_WORLD, &d->req[k]);
            nb_status st = rc == MPI_SUCCESS ? NB_OK : nb__dist_check("ddp", rc);
            if (st != NB_OK || last) d->req[k] = MPI_REQUEST_NULL;
            if (st != NB_OK && d->err == NB_OK) d->err = st;
        }
#endif
        if (early) d->stats.launched_early++;
    }
#ifdef NB_HAVE_MPI
    int flag;
    if (early && d->world > 1 && d->next > 0) MPI_Testall(d->next, d->req, &flag, MPI_STATUSES_IGNORE); /* progress */
#endif
}

/* Parameter i's gradient is final (none: zeros): into flat, its buckets counted down. */
static void param_in(nb_ddp *d, int i) {
    d->ready[i] = true;
    char *dst = d->flat + (size_t)d->off[i] * d->es;
    nb_tensor *g = d->params[i]->grad ? nb__dense(d->params[i]->grad) : NULL;
    int64_t n = d->len[i];
    if (!g || g->dtype != d->dt || nb_numel(g) != n)
        memset(dst, 0, (size_t)n * d->es);
    else if (d->world == 1)
        memcpy(dst, nb__ptr(g), (size_t)n * d->es);
    else /* divided by the world size on the way in: the sums are the means */
        nb__dist_divide(dst, nb__ptr(g), n, d->dt, d->world);
    nb_release(g);
    for (int k = d->first[i]; k <= d->last[i]; k++) d->pending[k]--;
}

static void on_grad(void *ctx, nb_tensor *leaf) {
    (void)leaf;
    ddp_slot *s = ctx;
    if (s->d->ready[s->i]) { /* its bucket may be on the wire already */
        nb__error(NB_ERR_STATE, "ddp: a second backward pass reached parameter %d before nb_ddp_finish (one pass a "
                  "step: sum the micro-batches' losses before one nb_backward)", s->i);
        return;
    }
    param_in(s->d, s->i);
    launch_ready(s->d, true);
}

void nb_ddp_free(nb_ddp *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        if (d->hook_ids && d->hook_ids[i]) nb_remove_grad_hook(d->hook_ids[i]);
        if (d->params) nb_release(d->params[i]);
    }
    nb__free(d->params);
    nb__free(d->off);
    nb__free(d->len);
    if (d->buf) nb__storage_release(d->buf);
    nb__free(d->b0);
    nb__free(d->first);
    nb__free(d->last);
    nb__free(d->pending);
    nb__free(d->ready);
    nb__free(d->slots);
    nb__free(d->hook_ids);
#ifdef NB_HAVE_MPI
    nb__free(d->req);
#endif
    nb__free(d);
}

/* The parameters' checks: float, one dtype, contiguous CPU leaves requiring grad, no repeats. */
static nb_status params_ok(const char *op, nb_tensor *const *params, int n) {
    if (!params) return nb__error(NB_ERR_NULL, "%s: params is NULL", op);
    if (n < 1) return nb__error(NB_ERR_ARG, "%s: %d parameters", op, n);
    for (int i = 0; i < n; i++) {
        nb_tensor *p = params[i];
        if (!p) return nb__error(NB_ERR_NULL, "%s: parameter %d is NULL", op, i);
        if (p->dtype != NB_F32 && p->dtype != NB_F64)
            return nb__error(NB_ERR_DTYPE, "%s: parameter %d is %s; float32 or float64 only", op, i, nb_dtype_name(p->dtype));
        if (p->dtype != params[0]->dtype)
            return nb__error(NB_ERR_DTYPE, "%s: parameters of two dtypes (%s and %s)", op, nb_dtype_name(params[0]->dtype),
                             nb_dtype_name(p->dtype));
        if (!p->requires_grad || p->node || !nb_is_contiguous(p) || nb__is_symbolic(p) ||
            p->storage->device.type != NB_DEVICE_CPU)
            return nb__error(NB_ERR_STATE, "%s: parameter %d %s must be a contiguous CPU leaf that requires grad", op, i,
                             NB_SHAPE_STR(p));
        for (int j = 0; j < i; j++)
            if (params[j] == p) return nb__error(NB_ERR_ARG, "%s: parameter %d is parameter %d again", op, i, j);
    }
    return NB_OK;
}

/* The layout: parameters in reverse order, buckets of at most cap elements over them. */
static nb_status layout(nb_ddp *d, size_t bucket_bytes) {
    for (int i = d->n - 1; i >= 0; i--) {
        d->off[i] = d->total;
        d->len[i] = nb_numel(d->params[i]);
        d->total += d->len[i];
    }
    int64_t cap = (int64_t)((bucket_bytes ? bucket_bytes : 1u << 20) / d->es);
    if (cap < 1) cap = 1;
    if (cap > INT32_MAX) cap = INT32_MAX; /* MPI counts are ints */
    d->nb = (int)((d->total + cap - 1) / cap);
    if (!(d->buf = nb__storage_new((size_t)d->total * d->es, NB_CPU)) ||
        !(d->b0 = nb__malloc(sizeof(int64_t) * (size_t)(d->nb + 1))) ||
        !(d->pending = nb__calloc((size_t)d->nb + 1, sizeof(int))))
        return nb__error(NB_ERR_OOM, "ddp_new: out of memory");
    d->flat = d->buf->data;
    for (int k = 0; k <= d->nb; k++) d->b0[k] = k * cap < d->total ? k * cap : d->total;
    for (int i = 0; i < d->n; i++) {
        if (d->len[i] == 0) { /* no elements: in no bucket */
            d->first[i] = 0;
            d->last[i] = -1;
            continue;
        }
        d->first[i] = (int)(d->off[i] / cap);
        d->last[i] = (int)((d->off[i] + d->len[i] - 1) / cap);
    }
    return NB_OK;
}

/* Ready for a step: every bucket waits for the parameters it overlaps. */
static void reset(nb_ddp *d) {
    memset(d->pending, 0, sizeof(int) * (size_t)d->nb);
    for (int i = 0; i < d->n; i++) {
        d->ready[i] = false;
        for (int k = d->first[i]; k <= d->last[i]; k++) d->pending[k]++;
    }
    d->next = 0;
    d->err = NB_OK;
#ifdef NB_HAVE_MPI
    for (int k = 0; k < d->nb; k++) d->req[k] = MPI_REQUEST_NULL;
#endif
}

nb_ddp *nb_ddp_new(nb_tensor *const *params, int n, size_t bucket_bytes) {
    const char *op = "ddp_new";
    nb_status st = params_ok(op, params, n); /* not returned before the ranks agree: they all take part */
    nb_ddp *d = st == NB_OK ? nb__calloc(1, sizeof *d) : NULL;
    if (st == NB_OK && !d) st = nb__error(NB_ERR_OOM, "%s: out of memory", op);
    if (st == NB_OK) {
        d->n = n;
        d->world = nb_dist_world_size();
        d->dt = params[0]->dtype;
        d->es = nb_dtype_size(d->dt);
        d->params = nb__calloc((size_t)n, sizeof *d->params);
        d->off = nb__calloc((size_t)n, sizeof *d->off);
        d->len = nb__calloc((size_t)n, sizeof *d->len);
        d->first = nb__calloc((size_t)n, sizeof *d->first);
        d->last = nb__calloc((size_t)n, sizeof *d->last);
        d->ready = nb__calloc((size_t)n, sizeof *d->ready);
        d->slots = nb__calloc((size_t)n, sizeof *d->slots);
        d->hook_ids = nb__calloc((size_t)n, sizeof *d->hook_ids);
        if (!d->params || !d->off || !d->len || !d->first || !d->last || !d->ready || !d->slots || !d->hook_ids)
            st = nb__error(NB_ERR_OOM, "%s: out of memory", op);
    }
    for (int i = 0; st == NB_OK && i < n; i++) d->params[i] = nb_retain(params[i]);
    if (st == NB_OK) st = layout(d, bucket_bytes);
#ifdef NB_HAVE_MPI
    if (st == NB_OK && !(d->req = nb__malloc(sizeof(MPI_Request) * (size_t)(d->nb + 1))))
        st = nb__error(NB_ERR_OOM, "%s: out of memory", op);
#endif
    /* every rank the same parameters and buckets (or every rank an error), then rank 0's values */
    int64_t sig[2 + NB_MAX_DIMS] = {0};
    char mine[256] = "refused parameters";
    if (st == NB_OK) {
        sig[0] = n;
        sig[1] = d->total;
        sig[2] = (int64_t)bucket_bytes;
        sig[3] = d->dt;
        snprintf(mine, sizeof mine, "%d %s parameters of %lld elements, buckets of %zu bytes", n, nb_dtype_name(d->dt),
                 (long long)d->total, bucket_bytes);
    }
    st = nb__dist_agree(op, st, sig, 4, mine);
    for (int i = 0; st == NB_OK && i < n; i++) {
        memset(sig, 0, sizeof sig);
        sig[0] = params[i]->ndim;
        memcpy(sig + 1, params[i]->shape, sizeof(int64_t) * (size_t)params[i]->ndim);
        snprintf(mine, sizeof mine, "parameter %d of shape %s", i, NB_SHAPE_STR(params[i]));
        st = nb__dist_agree(op, st, sig, 1 + NB_MAX_DIMS, mine);
    }
#ifdef NB_HAVE_MPI
    for (int i = 0; st == NB_OK && d->world > 1 && i < n; i++) {
        size_t bytes = (size_t)d->len[i] * d->es;
        for (size_t b = 0; st == NB_OK && b < bytes; b += INT32_MAX / 2)
            st = nb__dist_check(op, MPI_Bcast(nb__ptr(params[i]) + b, (int)(bytes - b < INT32_MAX / 2 ? bytes - b : INT32_MAX / 2),
                                              MPI_BYTE, 0, MPI_COMM_WORLD));
    }
#endif
    for (int i = 0; st == NB_OK && i < n; i++) {
        d->slots[i] = (ddp_slot){d, i};
        if (!(d->hook_ids[i] = nb_register_post_accumulate_grad_hook(params[i], on_grad, &d->slots[i])))
            st = nb_last_status();
    }
    if (st != NB_OK) {
        nb_ddp_free(d);
        return NULL;
    }
    reset(d);
    d->stats.buckets = d->nb;
    return d;
}

nb_status nb_ddp_finish(nb_ddp *d) {
    if (!d) return nb__error(NB_ERR_NULL, "ddp_finish: d is NULL");
    nb__error_frame fr;
    nb__own_begin(&fr);
    for (int i = 0; i < d->n; i++)
        if (!d->ready[i]) param_in(d, i); /* parameters without a gradient: zeros */
    double t0 = now();
    launch_ready(d, false);
    nb_status st = d->err; /* a failure while starting a bucket inside backward, or now */
#ifdef NB_HAVE_MPI
    if (d->world > 1) {
        nb_status w = nb__dist_check("ddp_finish", MPI_Waitall(d->nb, d->req, MPI_STATUSES_IGNORE));
        if (st == NB_OK) st = w;
    }
#endif
    d->stats.wait_seconds += now() - t0;
    for (int i = 0; st == NB_OK && i < d->n; i++) { /* the grads: views of the reduced buffer */
        nb_tensor *p = d->params[i];
        int64_t stride[NB_MAX_DIMS];
        nb__contiguous_strides(p->shape, p->ndim, stride);
        nb_tensor *g = nb__tensor_view_of(d->buf, p->shape, stride, p->ndim, d->off[i], d->dt);
        if (!g) {
            st = nb__error(NB_ERR_OOM, "ddp_finish: out of memory");
            break;
        }
        nb_release(p->grad);
        p->grad = g;
    }
    reset(d);
    d->stats.steps++;
    return nb__own_end(&fr, "ddp_finish", st);
}

nb_ddp_stats nb_ddp_stats_get(const nb_ddp *d) { return d ? d->stats : (nb_ddp_stats){0}; }
