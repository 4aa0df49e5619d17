/*
 * chart.c — the training chart, drawn with cairo (fonts found by fontconfig):
 * loss (divided by its maximum) and train / test accuracy against the epoch,
 * with a grid, axis titles and a legend above the plot area, clear of the
 * curves; the PNG is encoded in memory and written with cli_output_write.
 */
#include "cli.h"

#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <stdlib.h>
#include <string.h>

/* the plot area's frame, and the margins inside it that keep the curves and their markers off it */
enum { W = 800, H = 480, LEFT = 78, RIGHT = 24, TOP = 56, BOTTOM = 64, XPAD = 20, YPAD = 10 };

#define FONT "DejaVu Sans"

typedef struct rgb { double r, g, b; } rgb;
static const rgb INK = {0.15, 0.15, 0.15}, GRID = {0.88, 0.88, 0.88}, RED = {0.839, 0.153, 0.157},
                 BLUE = {0.122, 0.467, 0.706}, GREEN = {0.173, 0.627, 0.173};

typedef struct plot {
    cairo_t *cr;
    int n;
} plot;

static double px_x(const plot *p, int i) {
    return p->n < 2 ? (LEFT + W - RIGHT) / 2.0 : LEFT + XPAD + (double)i * (W - LEFT - RIGHT - 2 * XPAD) / (p->n - 1);
}
static double px_y(double v) { return TOP + YPAD + (1 - v) * (H - TOP - BOTTOM - 2 * YPAD); }

static void color(cairo_t *cr, rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

/* Text anchored at (x, y): ax, ay in {0, 0.5, 1} pick the left/centre/right and top/middle/baseline. */
static void label(cairo_t *cr, double x, double y, double ax, double ay, const char *s) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - ax * e.x_advance, y + (ay == 1 ? 0 : ay == 0.5 ? -e.y_bearing / 2 : -e.y_bearing));
    cairo_show_text(cr, s);
}

static void axes(const plot *p) {
    cairo_t *cr = p->cr;
    cairo_set_font_size(cr, 13);
    cairo_set_line_width(cr, 1);
    for (int k = 0; k <= 5; k++) { /* y: 0.0 … 1.0 */
        double y = px_y(k / 5.0), yy = (int)y + 0.5;
        char num[8];
        snprintf(num, sizeof num, "%.1f", k / 5.0);
        color(cr, GRID);
        cairo_move_to(cr, LEFT, yy);
        cairo_line_to(cr, W - RIGHT, yy);
        cairo_stroke(cr);
        color(cr, INK);
        label(cr, LEFT - 8, y, 1, 0.5, num);
    }
    int step = 1;
    while (p->n / step > 10) step = step == 1 ? 2 : step == 2 ? 5 : step * 2;
    for (int i = 0; i < p->n; i++) { /* x: epochs */
        if ((i + 1) % step && !(step == 1 || i == 0)) continue;
        double x = (int)px_x(p, i) + 0.5;
        char num[16];
        snprintf(num, sizeof num, "%d", i + 1);
        color(cr, GRID);
        cairo_move_to(cr, x, TOP);
        cairo_line_to(cr, x, H - BOTTOM);
        cairo_stroke(cr);
        color(cr, INK);
        label(cr, x, H - BOTTOM + 8, 0.5, 0, num);
    }
    color(cr, INK);
    cairo_rectangle(cr, LEFT + 0.5, TOP + 0.5, W - LEFT - RIGHT - 1, H - TOP - BOTTOM - 1);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 14);
    label(cr, (LEFT + W - RIGHT) / 2.0, H - 14, 0.5, 1, "epoch");
    cairo_save(cr);
    cairo_translate(cr, 22, (TOP + H - BOTTOM) / 2.0);
    cairo_rotate(cr, -1.5707963267948966);
    label(cr, 0, 0, 0.5, 0.5, "accuracy, loss / max loss");
    cairo_restore(cr);
}

static void series(const plot *p, const double *v, double scale, rgb col) {
    cairo_t *cr = p->cr;
    color(cr, col);
    cairo_set_line_width(cr, 2.5);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int i = 0; i < p->n; i++) {
        double y = px_y(v[i] / scale);
        if (i) cairo_line_to(cr, px_x(p, i), y);
        else cairo_move_to(cr, px_x(p, i), y);
    }
    cairo_stroke(cr);
    for (int i = 0; i < p->n && p->n <= 50; i++) { /* markers while they stay apart */
        cairo_arc(cr, px_x(p, i), px_y(v[i] / scale), 4, 0, 6.283185307179586);
        cairo_fill(cr);
    }
}

/* One row above the plot area: a line sample and a name per series. */
static void legend(cairo_t *cr) {
    static const char *const names[] = {"loss / max loss", "train accuracy", "test accuracy"};
    const rgb cols[] = {RED, BLUE, GREEN};
    cairo_set_font_size(cr, 14);
    double widths[3], total = 0;
    for (int k = 0; k < 3; k++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, names[k], &e);
        widths[k] = 28 + 6 + e.x_advance;
        total += widths[k] + (k ? 28 : 0);
    }
    double x = (LEFT + W - RIGHT - total) / 2, y = TOP / 2.0;
    for (int k = 0; k < 3; k++) {
        color(cr, cols[k]);
        cairo_set_line_width(cr, 2.5);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + 28, y);
        cairo_stroke(cr);
        color(cr, INK);
        label(cr, x + 34, y, 0, 0.5, names[k]);
        x += widths[k] + 28;
    }
}

typedef struct buffer {
    unsigned char *data;
    size_t n, cap;
} buffer;

static cairo_status_t append(void *closure, const unsigned char *data, unsigned int len) {
    buffer *b = closure;
    if (b->n + len > b->cap) {
        size_t cap = (b->n + len) * 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d) return CAIRO_STATUS_NO_MEMORY;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->n, data, len);
    b->n += len;
    return CAIRO_STATUS_SUCCESS;
}

int cli_chart_png(const char *cmd, const char *path, int n, const double *loss, const double *train_acc,
                  const double *test_acc) {
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    cairo_t *cr = cairo_create(s);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    double lmax = 0;
    for (int i = 0; i < n; i++) lmax = loss[i] > lmax ? loss[i] : lmax;
    plot p = {cr, n};
    axes(&p);
    series(&p, loss, lmax > 0 ? lmax : 1, RED);
    series(&p, train_acc, 1, BLUE);
    series(&p, test_acc, 1, GREEN);
    legend(cr);
    buffer b = {0};
    cairo_status_t st = cairo_status(cr);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png_stream(s, append, &b);
    cairo_destroy(cr);
    cairo_surface_destroy(s);
    /* the chart is drawn once per run: give back cairo's and fontconfig's font caches (else leak checkers
     * report them at exit) */
    cairo_debug_reset_static_data();
    FcFini();
    int rc = st == CAIRO_STATUS_SUCCESS ? cli_output_write(cmd, "chart", path, b.data, b.n)
                                        : cli_error(cmd, CLI_FAIL, "drawing the chart %s: %s", path,
                                                    cairo_status_to_string(st));
    free(b.data);
    return rc;
}
