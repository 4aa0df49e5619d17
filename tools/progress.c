/*
 * progress.c — the training progress display: on a terminal one bar per
 * epoch redrawn in place with \r (at most ten times a second); elsewhere a
 * plain line at each quarter of the epoch.
 */
#include "cli.h"

#include <time.h>
#include <unistd.h>

#define BAR 24

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_begin(cli_progress *p, FILE *out, int epoch, int epochs, int64_t steps) {
    (void)epoch;
    *p = (cli_progress){.out = out, .tty = isatty(fileno(out)), .epochs = epochs, .steps = steps,
                        .t_start = cli_now(), .next_line = steps / 4 > 0 ? steps / 4 : 1};
}

void cli_progress_step(cli_progress *p, int epoch, int64_t step, double loss, int64_t samples) {
    double now = cli_now(), elapsed = now - p->t_start;
    bool last = step == p->steps;
    if (p->tty ? (!last && now - p->t_drawn < 0.1) : (last || step < p->next_line)) return;
    double rate = elapsed > 0 ? (double)samples / elapsed : 0;
    int eta = (int)(elapsed / (double)step * (double)(p->steps - step) + 0.5);
    if (p->tty) {
        char bar[BAR + 1];
        int fill = (int)(BAR * step / p->steps);
        for (int i = 0; i < BAR; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
        bar[BAR] = 0;
        fprintf(p->out, "\repoch %d/%d [%s] %lld/%lld loss %.4f %.0f samples/s ETA %d:%02d\033[K", epoch, p->epochs,
                bar, (long long)step, (long long)p->steps, loss, rate, eta / 60, eta % 60);
        p->t_drawn = now;
    } else {
        fprintf(p->out, "epoch %d/%d step %lld/%lld loss %.4f %.0f samples/s ETA %d:%02d\n", epoch, p->epochs,
                (long long)step, (long long)p->steps, loss, rate, eta / 60, eta % 60);
        p->next_line += p->steps / 4 > 0 ? p->steps / 4 : 1;
    }
    fflush(p->out);
}

void cli_progress_end(cli_progress *p) {
    if (p->tty) fputs("\r\033[K", p->out);
}
