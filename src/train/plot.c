/* The seed's Animator, drawn once at the end into a PNG or SVG file with
 * PLplot, and the peak resident set size from /proc.
 *
 * PLplot keeps global state and calls exit() on fatal errors (an output file
 * it cannot open among them), so every plot gets a fresh stream of its own,
 * and the path is checked here before PLplot sees it. Not thread-safe:
 * PLplot is not. */
#include "dp/pipeline.h"
#include "dp/train_util.h"

#include "core/internal.h"

#include <errno.h>
#include <math.h>
#include <plplot.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

enum {
    PLOT_WIDTH = 700,
    PLOT_HEIGHT = 500,
    NUM_SERIES = 3,
};

/* cmap0 indices this file assigns: 0 background, 1 axes and text. */
enum {
    COL_BACKGROUND = 0,
    COL_FOREGROUND = 1,
    COL_GRID = 2,
    COL_LOSS = 3,
    COL_TRAIN_ACC = 4,
    COL_TEST_ACC = 5,
};

/* The series in d2l's order and with its formats: '-', 'm--', 'g-.'.
 * Styles are PLplot's predefined pllsty patterns. */
static const char *const series_names[NUM_SERIES] = {"train loss", "train acc", "test acc"};
static const PLINT series_colors[NUM_SERIES] = {COL_LOSS, COL_TRAIN_ACC, COL_TEST_ACC};
static const PLINT series_styles[NUM_SERIES] = {1, 3, 5};

static double series_value(const dp_epoch_stats *s, int series)
{
    switch (series) {
    case 0:
        return s->train_loss;
    case 1:
        return s->train_acc;
    default:
        return s->test_acc;
    }
}

/* The PLplot driver for `path`'s extension, or NULL. */
static const char *driver_for(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash))
        return NULL;
    if (strcasecmp(dot, ".png") == 0)
        return "pngcairo";
    if (strcasecmp(dot, ".svg") == 0)
        return "svg";
    return NULL;
}

/* Whether PLplot has `driver`: plinit would otherwise ask on stdin for
 * another device and exit the process when none is given. */
static bool have_driver(const char *driver)
{
    const char *menu_storage[128], *name_storage[128];
    const char **menus = menu_storage, **names = name_storage;
    int n = (int)DP_COUNTOF(name_storage);
    plgDevs(&menus, &names, &n);
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], driver) == 0)
            return true;
    return false;
}

/* plabort messages: PLplot carries on after them, but the plot is suspect. */
static int plplot_errors;

static void on_plplot_abort(PLCHAR_VECTOR msg)
{
    plplot_errors++;
    DP_WARN("PLplot: %s", msg);
}

/* Draws one series as polylines broken at non-finite values; a point with
 * no finite neighbour gets a marker so that it is still visible. */
static void draw_series(const dp_epoch_stats *stats, int count, int series, PLFLT *x, PLFLT *y)
{
    plcol0(series_colors[series]);
    pllsty(series_styles[series]);
    int n = 0;
    for (int i = 0; i <= count; i++) {
        double v = i < count ? series_value(&stats[i], series) : NAN;
        if (i < count && isfinite(v) && isfinite((double)stats[i].epoch)) {
            x[n] = stats[i].epoch;
            y[n] = v;
            n++;
            continue;
        }
        if (n == 1) {
            plssym(0.0, 2.5);
            plpoin(1, x, y, 17);
            plssym(0.0, 1.0);
        } else if (n > 1)
            plline(n, x, y);
        n = 0;
    }
    pllsty(1);
}

static void draw(int num_epochs, const dp_epoch_stats *stats, int count, PLFLT *x, PLFLT *y)
{
    double xmin = 1.0, xmax = num_epochs > 1 ? num_epochs : 1.0;
    double ymax = 1.0;
    for (int i = 0; i < count; i++) {
        if (stats[i].epoch > xmax)
            xmax = stats[i].epoch;
        for (int s = 0; s < NUM_SERIES; s++) {
            double v = series_value(&stats[i], s);
            if (isfinite(v) && v > ymax)
                ymax = v;
        }
    }
    if (xmax <= xmin) {
        xmin -= 0.5;
        xmax += 0.5;
    }
    ymax *= 1.05;

    pladv(0);
    plschr(0.0, 1.1);
    /* Leaves room above the box for the legend's row. */
    plvpor(0.09, 0.97, 0.11, 0.88);
    plwind(xmin, xmax, 0.0, ymax);

    plwidth(1.0);
    plcol0(COL_GRID);
    plbox("g", 0.0, 0, "g", 0.0, 0);
    plcol0(COL_FOREGROUND);
    plbox("bcnst", 0.0, 0, "bcnstv", 0.0, 0);
    pllab("epoch", "", "");

    plwidth(2.0);
    for (int s = 0; s < NUM_SERIES; s++)
        draw_series(stats, count, s, x, y);

    PLINT opts[NUM_SERIES];
    PLFLT widths[NUM_SERIES];
    for (int s = 0; s < NUM_SERIES; s++) {
        opts[s] = PL_LEGEND_LINE;
        widths[s] = 2.0;
    }
    PLINT text_colors[NUM_SERIES] = {COL_FOREGROUND, COL_FOREGROUND, COL_FOREGROUND};
    PLFLT legend_width, legend_height;
    pllegend(&legend_width, &legend_height, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
             PL_POSITION_TOP | PL_POSITION_OUTSIDE, 0.0, 0.02, 0.08, COL_BACKGROUND, COL_GRID, 1, 1,
             NUM_SERIES, NUM_SERIES, opts, 1.0, 1.0, 2.0, 0.0, text_colors,
             (const char *const *)series_names, NULL, NULL, NULL, NULL, series_colors,
             series_styles, widths, NULL, NULL, NULL, NULL);
    plwidth(1.0);
}

/* Checks path and opens a PLplot stream of its own on it, initialised; on
 * success plot_end must follow. */
static int plot_begin(const char *path, PLINT *previous_stream)
{
    const char *driver = driver_for(path);
    if (!driver) {
        DP_ERROR("cannot plot to %s: unknown extension (supported: .png, .svg)", path);
        return DP_EINVAL;
    }
    if (!have_driver(driver)) {
        DP_ERROR("cannot plot to %s: PLplot has no %s driver (Debian: plplot-driver-cairo)", path,
                 driver);
        return DP_ENOTSUP;
    }
    /* PLplot exits the process when it cannot open its output file. */
    FILE *probe = fopen(path, "wb");
    if (!probe) {
        DP_ERROR("cannot write plot %s: %s", path, strerror(errno));
        return DP_EIO;
    }
    fclose(probe);
    PLINT stream;
    plgstrm(previous_stream);
    plmkstrm(&stream);
    if (stream < 0) {
        DP_ERROR("cannot plot to %s: PLplot has no free stream", path);
        return DP_EIO;
    }
    plplot_errors = 0;
    plsabort(on_plplot_abort);
    plsdev(driver);
    plsfnam(path);
    plspage(0.0, 0.0, PLOT_WIDTH, PLOT_HEIGHT, 0, 0);
    plscol0(COL_BACKGROUND, 255, 255, 255);
    plscol0(COL_FOREGROUND, 0, 0, 0);
    plscol0(COL_GRID, 200, 200, 200);
    plscol0(COL_LOSS, 31, 119, 180);     /* matplotlib's default blue */
    plscol0(COL_TRAIN_ACC, 191, 0, 191); /* 'm' */
    plscol0(COL_TEST_ACC, 0, 128, 0);    /* 'g' */
    plinit();
    return 0;
}

static int plot_end(const char *path, PLINT previous_stream)
{
    plend1();
    plsabort(NULL);
    plsstrm(previous_stream);
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size == 0) {
        DP_ERROR("PLplot did not write plot %s", path);
        return DP_EIO;
    }
    if (plplot_errors) {
        DP_ERROR("PLplot reported errors while writing %s", path);
        return DP_EIO;
    }
    return DP_OK;
}

int dp_plot_write(const char *path, int num_epochs, const dp_epoch_stats *stats, int count)
{
    if (!path || count < 0 || (count > 0 && !stats)) {
        DP_ERROR("dp_plot_write: invalid argument");
        return DP_EINVAL;
    }
    size_t n = count > 0 ? (size_t)count : 1;
    PLFLT *x = dp__calloc(n, sizeof *x);
    PLFLT *y = dp__calloc(n, sizeof *y);
    PLINT previous;
    int rc = x && y ? plot_begin(path, &previous) : DP_ENOMEM;
    if (rc == 0) {
        draw(num_epochs, stats, count, x, y);
        rc = plot_end(path, previous);
    }
    dp__free(x);
    dp__free(y);
    return rc;
}

/* A box from x0 to x1 on row `row` (0 at the top of `rows`), filled with
 * colour `fill`, outlined, labelled. */
static void gantt_box(double x0, double x1, int row, int fill, const char *label)
{
    PLFLT xs[4] = {x0, x1, x1, x0}, ys[4] = {row + 0.1, row + 0.1, row + 0.9, row + 0.9};
    plcol0(fill);
    plfill(4, xs, ys);
    plcol0(COL_FOREGROUND);
    xs[0] = x0, xs[1] = x1, xs[2] = x1, xs[3] = x0;
    plline(4, xs, ys);
    pljoin(x0, row + 0.9, x0, row + 0.1);
    plptex((x0 + x1) / 2, row + 0.5, 1.0, 0.0, 0.5, label);
}

int dp_plot_pipeline(const char *path, int stages, int micro_batches, int schedule,
                     const double *start, const double *end)
{
    if (!path || stages < 1 || stages > DP_PIPELINE_MAX_STAGES || micro_batches < 1 || !start ||
        !end) {
        DP_ERROR("dp_plot_pipeline: invalid argument");
        return DP_EINVAL;
    }
    int n = 2 * micro_batches;
    dp_pipeline_task *order = dp__calloc((size_t)n, sizeof *order);
    if (!order)
        return DP_ENOMEM;
    double span = 0;
    for (int i = 0; i < stages * n; i++)
        span = end[i] > span ? end[i] : span;
    PLINT previous;
    int rc = plot_begin(path, &previous);
    if (rc < 0) {
        dp__free(order);
        return rc;
    }
    plscol0(COL_TRAIN_ACC, 158, 202, 225); /* forwards: light blue */
    plscol0(COL_TEST_ACC, 33, 113, 181);   /* backwards: dark blue */
    pladv(0);
    plschr(0.0, 0.9);
    plvpor(0.1, 0.97, 0.14, 0.9);
    plwind(0.0, 1e3 * span, (double)stages, 0.0);
    plcol0(COL_FOREGROUND);
    plbox("bcnst", 0.0, 0, "bc", 1.0, 0);
    pllab("time (ms)", "", "one step as the devices ran it; blank: idle");
    for (int k = 0; k < stages && rc == 0; k++) {
        char label[32];
        snprintf(label, sizeof label, "stage %d", k);
        plmtex("lv", 0.5, 1.0 - (k + 0.5) / stages, 1.0, label);
        rc = dp_pipeline_order((dp_pipeline_schedule)schedule, stages, k, micro_batches, order);
        for (int i = 0; rc == 0 && i < n; i++) {
            snprintf(label, sizeof label, "%c%d", order[i].backward ? 'B' : 'F',
                     order[i].micro_batch);
            gantt_box(1e3 * start[k * n + i], 1e3 * end[k * n + i], k,
                      order[i].backward ? COL_TEST_ACC : COL_TRAIN_ACC, label);
        }
    }
    int end_rc = plot_end(path, previous);
    dp__free(order);
    return rc < 0 ? rc : end_rc;
}
