/* --dataset folder and dptrain predict: a folder of PNGs and JPEGs written
 * here (tests/data/imageutil.c) read in ImageFolder's order with its classes,
 * one epoch trained on it and a held-out image of each class predicted as
 * that class by name, with more than half the probability; each bad input
 * one line naming the file. */
#include "imageutil.h"
#include "testutil.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* `cmd` through the shell, its stdout and stderr into out; the exit status. */
static int run(char *out, size_t size, const char *cmd)
{
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The folder's order: classes sorted, each one's files by sorted(os.walk):
 * "a-b/" before "a/" ('-' is below '/'), a directory's files before a
 * deeper one's; other extensions passed over; every label and pixel. */
static void order_and_classes(void **state)
{
    (void)state;
    char p[1024];
    const char *dir = tu_tmp_path("order");
    static const char *const dirs[] = {"",
                                       "/train",
                                       "/train/zebra",
                                       "/train/ant",
                                       "/train/ant/a",
                                       "/train/ant/a-b",
                                       "/train/ant/a/x",
                                       "/test",
                                       "/test/ant",
                                       "/test/zebra"};
    for (size_t i = 0; i < COUNTOF(dirs); i++) {
        snprintf(p, sizeof p, "%s%s", dir, dirs[i]);
        mkdir(p, 0755);
    }
    /* written in an order unlike the one expected */
    static const char *const files[] = {"/train/ant/a/x/5.png", "/train/ant/a-b/4.PNG",
                                        "/train/ant/a/3.png",   "/train/ant/2.png",
                                        "/train/ant/10.png",    "/train/zebra/1.png"};
    uint8_t px[14 * 16];
    for (size_t i = 0; i < COUNTOF(files); i++) {
        memset(px, (int)(10 * i), sizeof px);
        snprintf(p, sizeof p, "%s%s", dir, files[i]);
        iu_write_png(p, 1, 16, 14, px);
    }
    snprintf(p, sizeof p, "%s/train/ant/notes.txt", dir);
    assert_int_equal(tu_write_file(p, "x", 1), 0);
    dp_dataset ds;
    assert_int_equal(dp_image_folder_load(dir, true, 0, &ds), 0);
    /* ImageFolder: ant/10, ant/2, ant/a/3, ant/a-b/4, ant/a/x/5, zebra/1 */
    static const int want_file[] = {4, 3, 2, 1, 0, 5};
    assert_int_equal(ds.n, 6);
    assert_int_equal(ds.classes, 2);
    assert_string_equal(ds.class_names[0], "ant");
    assert_string_equal(ds.class_names[1], "zebra");
    assert_true(ds.pixels && !ds.images); /* held as bytes */
    assert_int_equal(ds.channels, 1);
    assert_int_equal(ds.rows, 14);
    assert_int_equal(ds.cols, 16);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(ds.labels[i], i < 5 ? 0 : 1);
        for (int k = 0; k < 14 * 16; k++)
            assert_int_equal(ds.pixels[i * 14 * 16 + k], 10 * want_file[i]);
    }
    /* --channels 3: gray copied to R, G and B, then scaled per batch */
    dp_dataset_close(&ds);
    assert_int_equal(dp_image_folder_load(dir, true, 3, &ds), 0);
    assert_int_equal(ds.channels, 3);
    float x[3 * 14 * 16];
    dp_dataset_get(&ds, 5, 1, x);
    for (int k = 0; k < 3 * 14 * 16; k++)
        assert_true(x[k] == 50.0f / 255.0f);
    dp_dataset_close(&ds);
}

/* The library's one error line for `dir`, which must name `file` and say
 * `what`; the command line's too (one line on stderr, exit 1). */
static void expect_bad(const char *dir, const char *file, const char *what)
{
    dp_dataset ds;
    assert_true(dp_image_folder_load(dir, true, 0, &ds) < 0);
    const char *e = dp_last_error();
    if (!strstr(e, file) || !strstr(e, what) || strchr(e, '\n'))
        fail_msg("expected one line naming %s and saying '%s', got: %s", file, what, e);
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "%s train --dataset folder --data %s --epochs 1 --progress never",
             tu_dptrain, dir);
    int st = run(out, sizeof out, cmd);
    /* The file is met when the loader reaches it, after the run has set
     * up (and maybe warned): its line is the one error, the last line. */
    char want[1024];
    snprintf(want, sizeof want, "dptrain: error: %s", file);
    const char *line = strstr(out, want);
    if (st != 1 || !line || (line != out && line[-1] != '\n') || !strstr(line, what) ||
        strchr(line, '\n') != out + strlen(out) - 1 || strstr(line + strlen(want), "error:"))
        fail_msg("dptrain train: expected exit 1 and one line '%s...%s', got %d: %s", want, what,
                 st, out);
    printf("%s", out);
}

static void bad_inputs(void **state)
{
    (void)state;
    tu_quiet_log();
    char dir[512], p[1024], q[1024];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("bad"));
    iu_make_folder(dir, 3, 1);

    /* a truncated PNG */
    snprintf(p, sizeof p, "%s/train/dark/1.png", dir);
    size_t n;
    uint8_t *png = iu_read_file(p, &n);
    assert_int_equal(tu_write_file(p, png, n / 2), 0);
    expect_bad(dir, p, "not a readable PNG");
    assert_int_equal(tu_write_file(p, png, n), 0);
    free(png);

    /* a text file named .jpg */
    snprintf(p, sizeof p, "%s/train/bright/0.jpg", dir);
    assert_int_equal(tu_write_file(p, "hello, world\n", 13), 0);
    expect_bad(dir, p, "not a PNG or JPEG image");
    unlink(p);

    /* a truncated JPEG: libjpeg would fill the rest with gray */
    snprintf(p, sizeof p, "%s/train/bright/2.jpg", dir);
    uint8_t *jpg = iu_read_file(p, &n);
    assert_int_equal(tu_write_file(p, jpg, n - 40), 0);
    expect_bad(dir, p, "not a readable JPEG");
    assert_int_equal(tu_write_file(p, jpg, n), 0);
    free(jpg);

    /* an image of another size */
    snprintf(p, sizeof p, "%s/train/dark/odd.png", dir);
    uint8_t px[10 * 14] = {0};
    iu_write_png(p, 1, 10, 14, px);
    expect_bad(dir, p, "10x14 pixels (width x height)");
    unlink(p);

    /* an empty class directory */
    snprintf(p, sizeof p, "%s/train/empty", dir);
    mkdir(p, 0755);
    expect_bad(dir, p, "no .png, .jpg or .jpeg file in the class directory");
    rmdir(p);

    /* test classes that are not the training classes */
    snprintf(p, sizeof p, "%s/test/dark", dir);
    snprintf(q, sizeof q, "%s/test/dim", dir);
    assert_int_equal(rename(p, q), 0);
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "%s train --dataset folder --data %s --epochs 1 --progress never",
             tu_dptrain, dir);
    assert_int_equal(run(out, sizeof out, cmd), 1);
    if (!strstr(out, "class 1 is 'dim', in") || !strstr(out, "it is 'dark'"))
        fail_msg("expected the classes that differ, got: %s", out);
    assert_int_equal(rename(q, p), 0);
}

/* One epoch on a folder of bright and dark images, then predict on a
 * held-out image of each class (one PNG, one JPEG), on 2 devices: each
 * its own class, named, with more than half the probability. */
static void train_and_predict(void **state)
{
    (void)state;
    char dir[512], ck[600], cmd[4096], out[8192];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("folder"));
    iu_make_folder(dir, 128, 4);
    snprintf(ck, sizeof ck, "%s/ck.safetensors", dir);
    snprintf(cmd, sizeof cmd,
             "%s train --dataset folder --data %s --epochs 1 --batch-size 4 --optimizer adam "
             "--lr 0.01 --checkpoint %s --progress never",
             tu_dptrain, dir, ck);
    int st = run(out, sizeof out, cmd);
    printf("%s", out);
    assert_int_equal(st, 0);
    double acc;
    assert_int_equal(sscanf(out, "test acc: %lf", &acc), 1);
    assert_true(acc == 1.0);

    char *classes, *input;
    assert_int_equal(dp_checkpoint_meta(ck, "dptrain.classes", &classes), 0);
    assert_string_equal(classes, "[\"bright\",\"dark\"]");
    assert_int_equal(dp_checkpoint_meta(ck, "dptrain.input", &input), 0);
    assert_string_equal(input, "3,14,16");
    free(classes);
    free(input);

    char bright[600], dark[600];
    snprintf(bright, sizeof bright, "%s/held-bright.png", dir);
    snprintf(dark, sizeof dark, "%s/held-dark.jpg", dir);
    iu_write_sample(bright, true, 999, false);
    iu_write_sample(dark, false, 998, true);
    snprintf(cmd, sizeof cmd, "%s predict --checkpoint %s --devices 2 %s %s", tu_dptrain, ck, dark,
             bright);
    st = run(out, sizeof out, cmd);
    printf("%s", out);
    assert_int_equal(st, 0);
    char line1[1024], line2[1024];
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    snprintf(line1, sizeof line1, "%.*s", (int)(nl - out), out);
    snprintf(line2, sizeof line2, "%s", nl + 1);
    char want[700];
    double p1, p2;
    snprintf(want, sizeof want, "%s: dark %%lf, bright", dark);
    assert_int_equal(sscanf(line1, want, &p1), 1);
    snprintf(want, sizeof want, "%s: bright %%lf, dark", bright);
    assert_int_equal(sscanf(line2, want, &p2), 1);
    assert_true(p1 > 0.5 && p2 > 0.5); /* its class holds most of the probability */

    /* an image of another size than the checkpoint's samples */
    char odd[600];
    snprintf(odd, sizeof odd, "%s/odd.png", dir);
    uint8_t px[20 * 14 * 3] = {0};
    iu_write_png(odd, 3, 20, 14, px);
    snprintf(cmd, sizeof cmd, "%s predict --checkpoint %s %s", tu_dptrain, ck, odd);
    assert_int_equal(run(out, sizeof out, cmd), 1);
    char msg[800];
    snprintf(msg, sizeof msg,
             "dptrain: error: %s: 20x14 pixels (width x height), the model takes 16x14", odd);
    if (strncmp(out, msg, strlen(msg)) != 0)
        fail_msg("expected '%s', got: %s", msg, out);
}

static int setup(void **state)
{
    if (tu_find_dptrain() < 0)
        return -1;
    return tu_setup_tmp(state);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(order_and_classes),
                                       cmocka_unit_test(bad_inputs),
                                       cmocka_unit_test(train_and_predict)};
    return tu_run(argc, argv, tests, setup, tu_teardown_tmp);
}
