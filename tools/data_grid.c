/* dptrain data --grid: samples drawn as pictures in rows of 8, each under
 * its class name, with PLplot's pngcairo driver: cairo renders the names
 * with the system's anti-aliased fonts (legible at any picture size),
 * which a hand-written PNG would have to rasterise itself; PLplot is
 * already the library's plotter (--plot).
 *
 * A sample [C, H, W] is drawn as W x H filled cells (at most 96 a side:
 * larger samples are sampled, nearest, as a thumbnail), its values mapped
 * back to [0, 1] by the sample's own min and max (a normalised sample has
 * values outside [0, 1]), gray for one channel, RGB for three. */
#include "dp/dp.h"

#include <plplot.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define GRID_COLUMNS 8
#define GRID_MAX_CELLS 96
#define GRID_TILE_PX 128 /* each picture's square, in pixels */
#define GRID_LABEL_PX 22 /* the name's band under it */
#define COL_CELL 15

static PLINT grid_errors;
static void on_abort(PLCHAR_VECTOR msg)
{
    (void)msg;
    grid_errors++;
}

/* Sample i's pixel (r, c) as 8-bit RGB, stretched by [lo, hi]. */
static void pixel(const dp_data_samples *s, int64_t i, int64_t r, int64_t c, float lo, float hi,
                  int rgb[3])
{
    int64_t ch = s->chw[0], h = s->chw[1], w = s->chw[2];
    const float *x = s->x + i * ch * h * w;
    for (int k = 0; k < 3; k++) {
        float v = x[(ch >= 3 ? k : 0) * h * w + r * w + c];
        float u = hi > lo ? (v - lo) / (hi - lo) : 0.5f;
        rgb[k] = (int)(u * 255.0f + 0.5f);
        rgb[k] = rgb[k] < 0 ? 0 : rgb[k] > 255 ? 255 : rgb[k];
    }
}

static void draw_sample(const dp_data_samples *s, int64_t i, PLFLT x0, PLFLT y0, PLFLT size)
{
    int64_t ch = s->chw[0], h = s->chw[1], w = s->chw[2], n = ch * h * w;
    const float *x = s->x + i * n;
    float lo = x[0], hi = x[0];
    for (int64_t k = 1; k < n; k++) {
        lo = x[k] < lo ? x[k] : lo;
        hi = x[k] > hi ? x[k] : hi;
    }
    int64_t rows = h < GRID_MAX_CELLS ? h : GRID_MAX_CELLS;
    int64_t cols = w < GRID_MAX_CELLS ? w : GRID_MAX_CELLS;
    int64_t side = rows > cols ? rows : cols;
    PLFLT cell = size / (PLFLT)side;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++) {
            int rgb[3];
            pixel(s, i, r * h / rows, c * w / cols, lo, hi, rgb);
            plscol0(COL_CELL, rgb[0], rgb[1], rgb[2]);
            plcol0(COL_CELL);
            PLFLT px[4] = {x0 + c * cell, x0 + (c + 1) * cell, x0 + (c + 1) * cell, x0 + c * cell};
            PLFLT py[4] = {y0 - r * cell, y0 - r * cell, y0 - (r + 1) * cell, y0 - (r + 1) * cell};
            plfill(4, px, py);
        }
    }
}

int cli_data_grid(const dp_data_samples *s, const char *path)
{
    int64_t cols = s->n < GRID_COLUMNS ? s->n : GRID_COLUMNS;
    int64_t rows = (s->n + GRID_COLUMNS - 1) / GRID_COLUMNS;
    if (cols < 1)
        cols = rows = 1;
    PLFLT tile = GRID_TILE_PX, band = GRID_LABEL_PX;
    PLFLT width = (PLFLT)cols * tile, height = (PLFLT)rows * (tile + band);
    /* Written beside, renamed into place whole. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.png", path);
    PLINT previous, stream;
    plgstrm(&previous);
    plmkstrm(&stream);
    if (stream < 0) {
        fprintf(stderr, "dptrain: error: %s: PLplot has no free stream\n", path);
        return DP_EIO;
    }
    grid_errors = 0;
    plsabort(on_abort);
    plsdev("pngcairo");
    plsfnam(tmp);
    plspage(0.0, 0.0, (PLINT)width, (PLINT)height, 0, 0);
    plscol0(0, 255, 255, 255);
    plscol0(1, 0, 0, 0);
    plinit();
    pladv(0);
    plvpor(0.0, 1.0, 0.0, 1.0);
    plwind(0.0, width, 0.0, height);
    plschr(0.0, 0.8);
    for (int64_t i = 0; i < s->n; i++) {
        PLFLT x0 = (PLFLT)(i % GRID_COLUMNS) * tile;
        PLFLT y0 = height - (PLFLT)(i / GRID_COLUMNS) * (tile + band);
        draw_sample(s, i, x0 + 4, y0 - 4, tile - 8);
        int label = s->labels[i];
        char name[64];
        snprintf(name, sizeof name, "%s",
                 label >= 0 && label < s->classes ? s->class_names[label] : "?");
        plcol0(1);
        plptex(x0 + tile / 2, y0 - tile - band * 0.6, 1.0, 0.0, 0.5, name);
    }
    plend1();
    plsabort(NULL);
    plsstrm(previous);
    struct stat st;
    if (grid_errors || stat(tmp, &st) != 0 || st.st_size == 0 || rename(tmp, path) != 0) {
        remove(tmp);
        fprintf(stderr, "dptrain: error: %s: PLplot could not write the grid\n", path);
        return DP_EIO;
    }
    return 0;
}
