/*
 * progress.c — the training progress display: on a terminal one bar per
 * epoch redrawn in place with \r (at most ten times a second), fitted to the
 * terminal's width so that it never wraps; elsewhere a plain line at each
 * quarter of the epoch.
 */
#include "cli.h"

#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define BAR 24     /* bar width when the terminal has room */
#define MIN_BAR 5  /* narrower than this, the bar is left out */

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
        char head[64], tail[3][160], bar[BAR + 1];
        snprintf(head, sizeof head, "epoch %d/%d ", epoch, p->epochs);
        /* the fields after the bar, shorter and shorter: the ETA, then the rate go first */
        int k = snprintf(tail[2], sizeof tail[2], "%lld/%lld loss %.4f", (long long)step, (long long)p->steps, loss);
        snprintf(tail[1], 128, "%.*s %.0f samples/s", k, tail[2], rate);
        snprintf(tail[0], sizeof tail[0], "%.128s ETA %d:%02d", tail[1], eta / 60, eta % 60);
        struct winsize ws;
        int cols = ioctl(fileno(p->out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
        /* the line stays below the width: a character in the last column makes some terminals wrap */
        int fit = 0, room = 0;
        for (; fit < 3; fit++)
            if ((room = cols - 1 - (int)strlen(head) - (int)strlen(tail[fit])) >= 0) break;
        int width = room - 3 < BAR ? room - 3 : BAR; /* "[", "]" and a space */
        if (fit == 0 && width >= MIN_BAR) {
            int fill = (int)(width * step / p->steps);
            for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
            bar[width] = 0;
            fprintf(p->out, "\r%s[%s] %s\033[K", head, bar, tail[0]);
        } else {
            char line[sizeof head + sizeof tail[0]];
            snprintf(line, sizeof line, "%s%s", head, tail[fit < 3 ? fit : 2]);
            fprintf(p->out, "\r%.*s\033[K", cols > 1 ? cols - 1 : 1, line);
        }
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
