/* schedule.c — learning-rate schedules (N2) as closed forms of the step counter: step decay, cosine annealing, linear warm-up. */
#include "nn_internal.h"

#include <math.h>

static double bad(const char *op, const char *what, double v) {
    nb__error_set(NB_ERR_ARG, "%s: invalid %s %g", op, what, v);
    return NAN;
}

double nb_lr_step(double base_lr, int64_t t, int64_t step_size, double gamma) {
    if (step_size < 1) return bad("lr_step", "step_size", (double)step_size);
    if (t < 0) return bad("lr_step", "step", (double)t);
    return base_lr * pow(gamma, (double)(t / step_size));
}

double nb_lr_cosine(double base_lr, int64_t t, int64_t t_max, double eta_min) {
    if (t_max < 1) return bad("lr_cosine", "t_max", (double)t_max);
    if (t < 0) return bad("lr_cosine", "step", (double)t);
    return eta_min + (base_lr - eta_min) * (1 + cos(M_PI * (double)t / (double)t_max)) / 2;
}

double nb_lr_warmup(double base_lr, int64_t t, int64_t warmup, double start_factor) {
    if (warmup < 1) return bad("lr_warmup", "warmup", (double)warmup);
    if (!(start_factor > 0 && start_factor <= 1)) return bad("lr_warmup", "start_factor", start_factor);
    if (t < 0) return bad("lr_warmup", "step", (double)t);
    double frac = (double)(t < warmup ? t : warmup) / (double)warmup;
    return base_lr * (start_factor + (1 - start_factor) * frac);
}
