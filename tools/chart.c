/*
 * chart.c — the training chart: a PNG (libpng) with axes, ticks, one
 * polyline each for loss (divided by its maximum) and train / test
 * accuracy against the epoch, and a legend drawn with a built-in 3x5 font.
 */
#include "cli.h"

#include <png.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { W = 640, H = 400, LEFT = 48, RIGHT = 16, TOP = 16, BOTTOM = 40, SCALE = 2 };

typedef struct rgb { uint8_t r, g, b; } rgb;
typedef struct canvas { uint8_t px[H][W][3]; } canvas;

static const rgb BLACK = {0, 0, 0}, GREY = {200, 200, 200}, RED = {214, 39, 40}, BLUE = {31, 119, 180},
                 GREEN = {44, 160, 44};

static void dot(canvas *c, int x, int y, rgb col) {
    if (x < 0 || x >= W || y < 0 || y >= H) return;
    c->px[y][x][0] = col.r;
    c->px[y][x][1] = col.g;
    c->px[y][x][2] = col.b;
}

/* Bresenham line, two pixels thick. */
static void line(canvas *c, int x0, int y0, int x1, int y1, rgb col) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
        dot(c, x0, y0, col);
        dot(c, x0 + 1, y0, col);
        dot(c, x0, y0 + 1, col);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

/* 3x5 glyphs, rows top to bottom, 3 bits per row (MSB left). */
static unsigned glyph(char ch) {
    static const char keys[] = "0123456789.acehilnoprst";
    static const unsigned rows[][5] = {
        {7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1}, {7, 4, 7, 1, 7},
        {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7}, {0, 0, 0, 0, 2}, {0, 3, 5, 5, 3},
        {0, 3, 4, 4, 3}, {2, 5, 7, 4, 3}, {4, 4, 7, 5, 5}, {2, 0, 2, 2, 2}, {2, 2, 2, 2, 3}, {0, 6, 5, 5, 5},
        {0, 2, 5, 5, 2}, {0, 6, 5, 6, 4}, {0, 5, 6, 4, 4}, {0, 3, 6, 1, 6}, {2, 7, 2, 2, 3},
    };
    const char *k = ch ? strchr(keys, ch) : NULL;
    if (!k) return 0;
    const unsigned *r = rows[k - keys];
    return r[0] << 12 | r[1] << 9 | r[2] << 6 | r[3] << 3 | r[4];
}

static void text(canvas *c, int x, int y, const char *s, rgb col) {
    for (; *s; s++, x += 4 * SCALE) {
        unsigned g = glyph(*s);
        for (int r = 0; r < 5; r++)
            for (int b = 0; b < 3; b++)
                if (g >> ((4 - r) * 3 + (2 - b)) & 1)
                    for (int u = 0; u < SCALE; u++)
                        for (int v = 0; v < SCALE; v++) dot(c, x + b * SCALE + u, y + r * SCALE + v, col);
    }
}

static int px_x(int i, int n) { return n < 2 ? (LEFT + W - RIGHT) / 2 : LEFT + i * (W - LEFT - RIGHT) / (n - 1); }
static int px_y(double v) { return TOP + (int)((1 - v) * (H - TOP - BOTTOM) + 0.5); }

static void series(canvas *c, int n, const double *v, double scale, rgb col) {
    for (int i = 0; i < n; i++) {
        int x = px_x(i, n), y = px_y(v[i] / scale);
        line(c, x - 2, y, x + 2, y, col); /* marker */
        if (i) line(c, px_x(i - 1, n), px_y(v[i - 1] / scale), x, y, col);
    }
}

static void axes(canvas *c, int n) {
    line(c, LEFT, TOP, LEFT, H - BOTTOM, BLACK);
    line(c, LEFT, H - BOTTOM, W - RIGHT, H - BOTTOM, BLACK);
    const char *labels[] = {"0", ".25", ".5", ".75", "1"};
    for (int k = 0; k <= 4; k++) {
        int y = px_y(k / 4.0);
        for (int x = LEFT + 2; x < W - RIGHT; x += 4) dot(c, x, y, GREY);
        line(c, LEFT - 5, y, LEFT, y, BLACK);
        text(c, LEFT - 8 - 8 * (int)strlen(labels[k]), y - 5, labels[k], BLACK);
    }
    for (int i = 0; i < n; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i + 1);
        int x = px_x(i, n);
        line(c, x, H - BOTTOM, x, H - BOTTOM + 5, BLACK);
        if (n <= 20 || (i + 1) % 5 == 0) text(c, x - 4 * (int)strlen(num), H - BOTTOM + 9, num, BLACK);
    }
    text(c, (W - 40) / 2, H - 14, "epoch", BLACK);
}

static void legend(canvas *c) {
    const char *names[] = {"loss", "train acc", "test acc"};
    const rgb cols[] = {RED, BLUE, GREEN};
    for (int k = 0; k < 3; k++) {
        int y = TOP + 10 + 16 * k, x = W - RIGHT - 110;
        line(c, x, y + 4, x + 16, y + 4, cols[k]);
        text(c, x + 24, y, names[k], BLACK);
    }
}

static int write_png(const char *path, canvas *c, char *err, size_t errlen) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot create %s", path);
        return -1;
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    volatile int rc = -1; /* survives a longjmp from libpng */
    if (info && !setjmp(png_jmpbuf(png))) {
        png_init_io(png, f);
        png_set_IHDR(png, info, W, H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                     PNG_FILTER_TYPE_DEFAULT);
        png_write_info(png, info);
        for (int y = 0; y < H; y++) png_write_row(png, c->px[y][0]);
        png_write_end(png, NULL);
        rc = 0;
    }
    png_destroy_write_struct(&png, info ? &info : NULL);
    if (fclose(f) != 0) rc = -1;
    if (rc) snprintf(err, errlen, "cannot write the PNG %s", path);
    return rc;
}

int cli_chart_png(const char *path, int n, const double *loss, const double *train_acc, const double *test_acc,
                  char *err, size_t errlen) {
    canvas *c = malloc(sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory drawing %s", path);
        return -1;
    }
    memset(c, 255, sizeof *c);
    double lmax = 0;
    for (int i = 0; i < n; i++) lmax = loss[i] > lmax ? loss[i] : lmax;
    axes(c, n);
    series(c, n, loss, lmax > 0 ? lmax : 1, RED);
    series(c, n, train_acc, 1, BLUE);
    series(c, n, test_acc, 1, GREEN);
    legend(c);
    int rc = write_png(path, c, err, errlen);
    free(c);
    return rc;
}
