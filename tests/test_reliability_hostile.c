/* Hostile input, third round: each input below ends the command with one
 * line on stderr naming the file and the cause, a non-zero exit, within
 * 1 s and within 64 MB of resident memory over the program's rest (the
 * peak of `dptrain --version`, measured first). Every input is made here.
 *
 * Under a sanitizer the program runs several times slower: the time
 * allowed is 10 s there, the memory the same 64 MB over its own rest. */
#include "reliabilityutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#define HEADROOM_KB (64L * 1024)
#define SECONDS_ALLOWED (SANITIZED ? 10.0 : 1.0)

static long resting_kb;
/* The group's files: a tiny MNIST-style data set and a LeNet checkpoint
 * trained on it. */
static char data_dir[512], checkpoint[512];

/* ---- the tiny data set and its checkpoint ---------------------------------- */

static void write_idx_set(const char *dir)
{
    static const char *const split[2] = {"train", "t10k"};
    static const uint32_t count[2] = {8, 4};
    char path[600];
    assert_int_equal(mkdir(dir, 0755) == 0 || errno == EEXIST, 1);
    for (int s = 0; s < 2; s++) {
        uint32_t dims[3] = {count[s], 28, 28};
        size_t len;
        uint8_t *px = calloc((size_t)count[s] * 784, 1), labels[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        uint8_t *f = tu_make_idx(3, dims, px, &len);
        snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split[s]);
        assert_int_equal(tu_write_file(path, f, len), 0);
        free(f);
        free(px);
        f = tu_make_idx(1, dims, labels, &len);
        snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split[s]);
        assert_int_equal(tu_write_file(path, f, len), 0);
        free(f);
    }
}

static int group_setup(void **state)
{
    if (setup(state) < 0 || tu_setup_tmp(state) < 0)
        return -1;
    /* ASan reserves terabytes of address space: no cap there. */
    cli_as_limit_gb = SANITIZED ? 0 : 8;
    cli_run r;
    const char *version[] = {"--version", NULL};
    run_cli(version, 30, &r);
    if (r.status != 0)
        return -1;
    resting_kb = r.maxrss_kb;
    snprintf(data_dir, sizeof data_dir, "%s", tu_tmp_path("tiny"));
    write_idx_set(data_dir);
    snprintf(checkpoint, sizeof checkpoint, "%s", tu_tmp_path("lenet.st"));
    const char *train[] = {
        "train",        "--dataset", "mnist",      "--data", data_dir,       "--epochs", "1",
        "--batch-size", "4",         "--progress", "never",  "--checkpoint", checkpoint, NULL};
    run_cli(train, 120, &r);
    printf("dptrain --version rests at %ld MB; the tiny set's checkpoint: exit %d\n",
           resting_kb / 1024, r.status);
    return r.status == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    return tu_tmp ? tu_teardown_tmp(state) : 0;
}

/* `args` must end with one line on stderr holding every string of `want`
 * (NULL-terminated), a non-zero exit, nothing on stdout, within the time
 * allowed and 64 MB over `base_kb` of resident memory. */
static void expect_refused_over(const char *name, const char *const *args, const char *const *want,
                                long base_kb)
{
    cli_run r;
    run_cli(args, 30, &r);
    printf("%-40s exit %d, %.2f s, %ld MB (rest %ld MB): %s", name, r.status, r.seconds,
           r.maxrss_kb / 1024, resting_kb / 1024, r.err);
    if (r.status == 0 || r.status >= 128 || count_lines(r.err) != 1 || r.out[0])
        fail_msg("%s: expected one line on stderr and a non-zero exit, got exit %d:\n%s%s", name,
                 r.status, r.err, r.out);
    for (int i = 0; want[i]; i++)
        if (!strstr(r.err, want[i]))
            fail_msg("%s: expected '%s' in: %s", name, want[i], r.err);
    if (r.seconds > SECONDS_ALLOWED)
        fail_msg("%s: took %.2f s, more than %.0f", name, r.seconds, SECONDS_ALLOWED);
    if (r.maxrss_kb > base_kb + HEADROOM_KB)
        fail_msg("%s: %ld MB resident, more than %ld MB + 64", name, r.maxrss_kb / 1024,
                 base_kb / 1024);
}

/* ... over the program's rest. */
static void expect_refused(const char *name, const char *const *args, const char *const *want)
{
    expect_refused_over(name, args, want, resting_kb);
}

#define WANT(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- 9. memory at rest ----------------------------------------------------- */

/* Without a GPU opened, the CUDA libraries stay unloaded (the backend is
 * a module): dptrain --version and dptrain model lenet rest under 64 MB
 * (227 MB each with the CUDA libraries linked). */
static void rest_under_64_mb(void **state)
{
    (void)state;
    cli_run r;
    run_cli(ARGS("model", "lenet"), 30, &r);
    assert_int_equal(r.status, 0);
    printf("dptrain --version: %ld MB, dptrain model lenet: %ld MB\n", resting_kb / 1024,
           r.maxrss_kb / 1024);
    if (!SANITIZED && (resting_kb > 64 * 1024 || r.maxrss_kb > 64 * 1024))
        fail_msg("more than 64 MB at rest: --version %ld MB, model lenet %ld MB", resting_kb / 1024,
                 r.maxrss_kb / 1024);
}

/* ---- 4. a FIFO (or any file that is not a regular one) is never opened to
 * be read: open() of a FIFO waits for a writer, forever --------------------- */

static const char *fifo(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s", tu_tmp_path(name));
    unlink(p);
    assert_int_equal(mkfifo(p, 0644), 0);
    return p;
}

static void fifo_inputs(void **state)
{
    (void)state;
    const char *png = fifo("image.png");
    expect_refused("predict a FIFO image", ARGS("predict", "--checkpoint", checkpoint, png),
                   WANT(png, "not a regular file (a FIFO)"));
    const char *npy = fifo("batch.npy");
    expect_refused("predict a FIFO .npy", ARGS("predict", "--checkpoint", checkpoint, npy),
                   WANT(npy, "not a regular file (a FIFO)"));
    const char *st = fifo("weights.st");
    expect_refused("eval a FIFO checkpoint", ARGS("eval", "--checkpoint", st),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("predict with a FIFO checkpoint",
                   ARGS("predict", "--checkpoint", st, "/dev/null.png"),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("train --init a FIFO",
                   ARGS("train", "--dataset", "mnist", "--data", data_dir, "--init", st),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("train --resume a FIFO",
                   ARGS("train", "--dataset", "mnist", "--data", data_dir, "--resume", st),
                   WANT(st, "not a regular file (a FIFO)"));
    const char *txt = fifo("model.txt");
    expect_refused("model a FIFO model file", ARGS("model", txt),
                   WANT(txt, "not a regular file (a FIFO)"));
    const char *onnx = fifo("model.onnx");
    expect_refused("model a FIFO ONNX file", ARGS("model", onnx),
                   WANT(onnx, "not a regular file (a FIFO)"));
    expect_refused("a character device as a checkpoint", ARGS("eval", "--checkpoint", "/dev/zero"),
                   WANT("/dev/zero", "not a regular file (a character device)"));
    /* A data set whose training images are a FIFO. */
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("fifo-set"));
    write_idx_set(dir);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    unlink(path);
    assert_int_equal(mkfifo(path, 0644), 0);
    expect_refused("train on a FIFO of images", ARGS("train", "--dataset", "mnist", "--data", dir),
                   WANT(path, "not a regular file (a FIFO)"));
}

/* ---- images, written with zlib alone -------------------------------------- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A 28 x 28 grayscale PNG of value `v`, written with zlib alone. */
static void write_png(const char *path, uint8_t v)
{
    uint8_t raw[28 * 29], z[2048], file[4096];
    for (int r = 0; r < 28; r++) {
        raw[r * 29] = 0; /* filter: none */
        memset(raw + r * 29 + 1, v, 28);
    }
    uLongf zlen = sizeof z;
    assert_int_equal(compress(z, &zlen, raw, sizeof raw), Z_OK);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    size_t n = 0;
    memcpy(file, sig, 8);
    n = 8;
    const struct {
        const char *type;
        const uint8_t *data;
        size_t len;
    } chunks[3] = {{"IHDR", (const uint8_t[]){0, 0, 0, 28, 0, 0, 0, 28, 8, 0, 0, 0, 0}, 13},
                   {"IDAT", z, zlen},
                   {"IEND", NULL, 0}};
    for (int c = 0; c < 3; c++) {
        put_be32(file + n, (uint32_t)chunks[c].len);
        memcpy(file + n + 4, chunks[c].type, 4);
        if (chunks[c].len)
            memcpy(file + n + 8, chunks[c].data, chunks[c].len);
        uLong crc = crc32(0, file + n + 4, (uInt)(4 + chunks[c].len));
        put_be32(file + n + 8 + chunks[c].len, (uint32_t)crc);
        n += 12 + chunks[c].len;
    }
    assert_int_equal(tu_write_file(path, file, n), 0);
}

/* DIR/{train,test}/CLASS/0.png for each class of `classes`. */
static void make_folder(const char *dir, const char *const *classes, int n)
{
    static const char *const splits[2] = {"train", "test"};
    char path[1024];
    assert_int_equal(mkdir(dir, 0755), 0);
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/%s", dir, splits[s]);
        assert_int_equal(mkdir(path, 0755), 0);
        for (int k = 0; k < n; k++) {
            snprintf(path, sizeof path, "%s/%s/%s", dir, splits[s], classes[k]);
            assert_int_equal(mkdir(path, 0755), 0);
            snprintf(path, sizeof path, "%s/%s/%s/0.png", dir, splits[s], classes[k]);
            write_png(path, (uint8_t)(60 * k));
        }
    }
}

/* ---- the SHA-256 a checkpoint records of its model file -------------------- */

/* FIPS 180-4's examples (appendix B) and a megabyte against coreutils'
 * sha256sum: what dp_model_sha256 writes for the file. */
static void sha256_as_the_standard_gives_it(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t repeat;
        const char *digest;
    } cases[] = {
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    char path[512], hex[65];
    snprintf(path, sizeof path, "%s", tu_tmp_path("sha.txt"));
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        for (size_t k = 0; k < cases[i].repeat; k++)
            fputs(cases[i].text, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(dp_model_sha256(path, hex), 0);
        assert_string_equal(hex, cases[i].digest);
    }
    /* Every length from 0 to 200 bytes (the padding's cases), against
     * sha256sum where it is installed. */
    char cmd[700], line[128];
    snprintf(cmd, sizeof cmd, "sha256sum %s 2>/dev/null", path);
    int compared = 0;
    for (int len = 0; len <= 200; len++) {
        FILE *f = fopen(path, "wb");
        for (int k = 0; k < len; k++)
            fputc((k * 131 + len) & 0xff, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(dp_model_sha256(path, hex), 0);
        FILE *p = popen(cmd, "r");
        if (p && fgets(line, sizeof line, p) && strlen(line) > 64) {
            line[64] = '\0';
            assert_string_equal(hex, line);
            compared++;
        }
        if (p)
            pclose(p);
    }
    printf("SHA-256: FIPS 180-4's 4 examples, and %d lengths as sha256sum prints them\n", compared);
}

/* ---- 2. and 5. a checkpoint's metadata -------------------------------------- */

/* A copy of the group's checkpoint at tu_tmp_path(name) whose metadata
 * `key` is `value` (NULL: left out), every tensor and other key kept. */
static const char *with_meta(const char *name, const char *key, const char *value)
{
    static const char *const keys[] = {"format",
                                       "dptrain.model",
                                       "dptrain.epochs_done",
                                       "dptrain.step",
                                       "dptrain.seed",
                                       "dptrain.batch",
                                       "dptrain.partial",
                                       "dptrain.batch_size",
                                       "dptrain.augment",
                                       "dptrain.normalize",
                                       "dptrain.lr",
                                       "dptrain.momentum",
                                       "dptrain.weight_decay",
                                       "dptrain.precision",
                                       "dptrain.devices",
                                       "dptrain.history",
                                       "dptrain.conv_algos",
                                       "dptrain.lr_schedule",
                                       "dptrain.best",
                                       "dptrain.input",
                                       "dptrain.classes",
                                       "dptrain.optimizer",
                                       "dptrain.optimizer_steps",
                                       "dptrain.model_sha256"};
    static char paths[4][512];
    static int next;
    char *out = paths[next++ % 4];
    snprintf(out, 512, "%s", tu_tmp_path(name));
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, checkpoint), 0);
    int n = dp_safetensors_count(f), nmeta = 0;
    dp_st_tensor *ts = calloc((size_t)n, sizeof *ts);
    for (int i = 0; i < n; i++)
        assert_int_equal(dp_safetensors_get(f, i, &ts[i]), 0);
    const char *meta[2 * (COUNTOF(keys) + 1)];
    bool put = false;
    for (size_t i = 0; i < COUNTOF(keys); i++) {
        const char *v = strcmp(keys[i], key) == 0 ? value : dp_safetensors_meta(f, keys[i]);
        put = put || strcmp(keys[i], key) == 0;
        if (v) {
            meta[nmeta++] = keys[i];
            meta[nmeta++] = v;
        }
    }
    if (!put && value) {
        meta[nmeta++] = key;
        meta[nmeta++] = value;
    }
    assert_int_equal(dp_safetensors_write(out, ts, n, meta, nmeta / 2), 0);
    free(ts);
    dp_safetensors_close(f);
    return out;
}

/* The checkpoint: eval opened /etc/passwd and printed its first
 * line. A model file the metadata names is never opened on its word, and
 * nothing of another file reaches a message. */
static void checkpoint_naming_a_file(void **state)
{
    (void)state;
    const char *passwd = with_meta("passwd.st", "dptrain.model", "/etc/passwd");
    expect_refused("eval, model /etc/passwd", ARGS("eval", "--checkpoint", passwd),
                   WANT(passwd, ": names the model file '/etc/passwd'", "--model"));
    cli_run r;
    run_cli(ARGS("eval", "--checkpoint", passwd), 30, &r);
    assert_null(strstr(r.err, "root:"));
    char png[512]; /* tu_tmp_path's buffer is reused by the runs */
    snprintf(png, sizeof png, "%s", tu_tmp_path("one.png"));
    expect_refused("predict, model /etc/passwd", ARGS("predict", "--checkpoint", passwd, png),
                   WANT(passwd, "names the model file '/etc/passwd'"));
    /* Named by --model too, it is not the checkpoint's model. */
    expect_refused("eval --model lenet, model /etc/passwd",
                   ARGS("eval", "--checkpoint", passwd, "--model", "lenet"),
                   WANT(passwd, "a checkpoint of '/etc/passwd', not lenet"));
    const char *dev = with_meta("dev.st", "dptrain.model", "/dev/zero");
    expect_refused("eval, model /dev/zero", ARGS("eval", "--checkpoint", dev),
                   WANT(dev, "names the model file '/dev/zero'"));
    const char *odd = with_meta("odd.st", "dptrain.model", "x\n\x1b[31mred");
    expect_refused("eval, model with a newline", ARGS("eval", "--checkpoint", odd),
                   WANT(odd, "names the model file 'x\\n\\x1b[31mred'"));
}

/* A checkpoint of a model file loads where the run names that file, or a
 * copy of it (the SHA-256 it recorded); another file is refused. */
static void checkpoint_of_a_model_file(void **state)
{
    (void)state;
    char model[512], copy[512], other[512], ck[512];
    snprintf(model, sizeof model, "%s", tu_tmp_path("net.txt"));
    snprintf(copy, sizeof copy, "%s", tu_tmp_path("copy.txt"));
    snprintf(other, sizeof other, "%s", tu_tmp_path("other.txt"));
    snprintf(ck, sizeof ck, "%s", tu_tmp_path("net.st"));
    static const char net[] = "Flatten()\nLinear(784, 10)\n";
    assert_int_equal(tu_write_file(model, net, sizeof net - 1), 0);
    assert_int_equal(tu_write_file(copy, net, sizeof net - 1), 0);
    assert_int_equal(tu_write_file(other, "Flatten()\nLinear(784, 10)  # else\n", 35), 0);
    cli_run r;
    run_cli(ARGS("train", "--model", model, "--dataset", "mnist", "--data", data_dir, "--epochs",
                 "1", "--batch-size", "4", "--progress", "never", "--checkpoint", ck),
            60, &r);
    assert_int_equal(r.status, 0);
    char sha[65];
    assert_int_equal(dp_model_sha256(model, sha), 0);
    char *recorded;
    assert_int_equal(dp_checkpoint_meta(ck, "dptrain.model_sha256", &recorded), 0);
    assert_string_equal(recorded, sha);
    free(recorded);
    const char *eval[] = {"eval",   "--checkpoint", ck,        "--dataset", "mnist",
                          "--data", data_dir,       "--model", model,       NULL};
    run_cli(eval, 60, &r);
    assert_int_equal(r.status, 0);
    eval[8] = copy;
    run_cli(eval, 60, &r);
    if (r.status != 0)
        fail_msg("a copy of the model file was refused: %s", r.err);
    eval[8] = other;
    expect_refused("eval --model another file", eval,
                   WANT(ck, "a checkpoint of", "nor of a file with the SHA-256"));
    expect_refused("eval without --model", ARGS("eval", "--checkpoint", ck),
                   WANT(ck, "names the model file", "give the model file with --model"));
}

static void classes_not_strings(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"[1,2,3]", "expected a class name (a string)"},
        {"{\"a\":1}", "expected a JSON array of class names"},
        {"[\"a\",null]", "expected a class name (a string)"},
        {"[\"a\"] x", "more after the array"},
        {"\"dark\"", "expected a JSON array of class names"},
    };
    char png[512]; /* tu_tmp_path's buffer is reused by the runs */
    snprintf(png, sizeof png, "%s", tu_tmp_path("one.png"));
    for (size_t i = 0; i < COUNTOF(bad); i++) {
        char name[32];
        snprintf(name, sizeof name, "classes%zu.st", i);
        const char *ck = with_meta(name, "dptrain.classes", bad[i][0]);
        expect_refused("eval, bad dptrain.classes", ARGS("eval", "--checkpoint", ck),
                       WANT(ck, "dptrain.classes", bad[i][1]));
        expect_refused("predict, bad dptrain.classes", ARGS("predict", "--checkpoint", ck, png),
                       WANT(ck, "dptrain.classes", bad[i][1]));
    }
}

/* 8. predict --model resnet18 with a LeNet checkpoint: refused from the
 * header, before ResNet-18 is built. */
static void model_checked_before_it_is_built(void **state)
{
    (void)state;
    char png[512]; /* tu_tmp_path's buffer is reused by the runs */
    snprintf(png, sizeof png, "%s", tu_tmp_path("one.png"));
    write_png(png, 128);
    expect_refused("predict --model resnet18, LeNet weights",
                   ARGS("predict", "--checkpoint", checkpoint, "--model", "resnet18", png),
                   WANT(checkpoint, "a checkpoint of 'lenet', not resnet18"));
    expect_refused("eval --model resnet18, LeNet weights",
                   ARGS("eval", "--checkpoint", checkpoint, "--model", "resnet18"),
                   WANT(checkpoint, "a checkpoint of 'lenet', not resnet18"));
}

/* ---- 8. train checks what its options name before it loads the data ------- */

static const char *write_text(const char *name, const char *text)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s", tu_tmp_path(name));
    assert_int_equal(tu_write_file(p, text, strlen(text)), 0);
    return p;
}

/* On Fashion-MNIST (400 MB once loaded): each refusal comes from the
 * options' files and the data's headers alone. */
static void train_checks_before_loading(void **state)
{
    (void)state;
    NEED_DATA();
    const char *bad = write_text("paren.txt", "Conv2d(1, 6, 5\n");
    expect_refused("train --model, a bad file", ARGS("train", "--model", bad),
                   WANT(bad, "missing ')'"));
    expect_refused("train --resume, another model",
                   ARGS("train", "--model", "resnet18", "--resume", checkpoint),
                   WANT(checkpoint, "a checkpoint of 'lenet', not resnet18"));
    const char *linear = write_text("linear.txt", "Flatten()\nLinear(784, 10)\n");
    expect_refused("train --init, another model",
                   ARGS("train", "--model", linear, "--init", checkpoint),
                   WANT(checkpoint, "a checkpoint of 'lenet', not", linear));
    /* A state dict that names no model: its tensors against the model's. */
    const char *plain = with_meta("plain.st", "dptrain.model", NULL);
    expect_refused("train --init, another model's tensors",
                   ARGS("train", "--model", linear, "--init", plain),
                   WANT(plain, "tensor 'W1' is not part of", linear));
    expect_refused("train --resume, epochs all done",
                   ARGS("train", "--resume", checkpoint, "--epochs", "1"),
                   WANT(checkpoint, "already trained 1 epochs"));
    expect_refused("train --stages past the layers",
                   ARGS("train", "--devices", "2", "--pipeline", "2", "--stages", "0-3,4-99"),
                   WANT("--stages"));
    const char *broken = with_meta("broken.st", "dptrain.step", "-4");
    expect_refused("train --resume, a bad step count", ARGS("train", "--resume", broken),
                   WANT(broken, "'dptrain.step' is '-4'"));
}

/* ---- 3. a valid flag cannot exhaust memory --------------------------------- */

static void batch_capped_at_the_data(void **state)
{
    (void)state;
    NEED_DATA();
    cli_run small, big;
    run_cli(ARGS("train", "--batch-size", "64", "--limit-train", "64", "--limit-test", "64",
                 "--epochs", "1", "--progress", "never"),
            120, &small);
    assert_int_equal(small.status, 0);
    /* --max-memory: an uncapped batch of a million is refused, not run. */
    run_cli(ARGS("train", "--batch-size", "1048576", "--limit-train", "64", "--limit-test", "64",
                 "--epochs", "1", "--progress", "never", "--max-memory", "2G"),
            120, &big);
    printf("--batch-size 1048576 --limit-train 64: exit %d, %.2f s, %ld MB (batch 64: %ld MB): %s",
           big.status, big.seconds, big.maxrss_kb / 1024, small.maxrss_kb / 1024, big.err);
    assert_int_equal(big.status, 0);
    assert_int_equal(count_lines(big.err), 1);
    assert_has(big.err, "--batch-size 1048576 is more than the 64 training samples: each batch "
                        "holds all 64");
    if (big.maxrss_kb > small.maxrss_kb + HEADROOM_KB)
        fail_msg("%ld MB resident, the same run at batch 64 %ld MB", big.maxrss_kb / 1024,
                 small.maxrss_kb / 1024);
}

static void step_memory_estimated_first(void **state)
{
    (void)state;
    NEED_DATA();
    expect_refused("resnet18 at batch 60000",
                   ARGS("train", "--model", "resnet18", "--batch-size", "60000"),
                   WANT("a step of resnet18 needs about", "for 60000 samples", "is available",
                        "lower --batch-size, or raise --max-memory"));
    expect_refused("lenet over --max-memory 1M", ARGS("train", "--max-memory", "1M"),
                   WANT("a step of lenet needs about", "--max-memory is 1.0 MB"));
    /* 100,000 layers, each output kept for the backward pass: 80 GB at
     * batch 256, which grew until the kernel killed the run. */
    char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path("chain.txt"));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("Flatten()\n", f);
    for (int i = 0; i < 100000; i++)
        fputs("ReLU()\n", f);
    fputs("Linear(784, 10)\n", f);
    assert_int_equal(fclose(f), 0);
    /* Its definition alone is 100,000 modules, and their trace as many
     * tensors on the meta device: what `dptrain model` of it holds (94 MB
     * here) is the rest the refusal is measured over. */
    cli_run model;
    run_cli(ARGS("model", path), 30, &model);
    assert_int_equal(model.status, 0);
    printf("dptrain model of the chain: %ld MB\n", model.maxrss_kb / 1024);
    expect_refused_over("a chain of 100,000 layers", ARGS("train", "--model", path),
                        WANT("a step of", "chain.txt needs about", "GB of memory"),
                        model.maxrss_kb);
}

/* ---- 7. a name from a file cannot split a line of output ------------------- */

/* What Python 3.11's repr() prints for each (bytes that are not UTF-8
 * aside, which a str cannot hold: \xNN here). */
static void names_written_as_python_repr_writes_them(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"cat", "'cat'"},
        {"a\nb", "'a\\nb'"},
        {"it's", "\"it's\""},
        {"it's \"x\"", "'it\\'s \"x\"'"},
        {"back\\slash\ttab\rcr", "'back\\\\slash\\ttab\\rcr'"},
        {"caf\xc3\xa9", "'caf\xc3\xa9'"},
        {"\x01\x7f", "'\\x01\\x7f'"},
        {"\xc2\x85\xc2\xa0", "'\\x85\\xa0'"},
        {"left\xe2\x80\xaeright", "'left\\u202eright'"},
        {"\xe2\x80\xa8\xef\xbb\xbf", "'\\u2028\\ufeff'"},
        {"\xff\xc3", "'\\xff\\xc3'"},
        {"", "''"},
    };
    char buf[64];
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        dp_repr(cases[i][0], buf, sizeof buf);
        if (strcmp(buf, cases[i][1]) != 0)
            fail_msg("repr of case %zu: %s, Python writes %s", i, buf, cases[i][1]);
    }
    /* Plain names stay as they are; the others are quoted. */
    assert_string_equal(dp_name_str("dark", buf, sizeof buf), "dark");
    assert_string_equal(dp_name_str("caf\xc3\xa9 au lait", buf, sizeof buf), "caf\xc3\xa9 au lait");
    assert_string_equal(dp_name_str("a\nb", buf, sizeof buf), "'a\\nb'");
    assert_string_equal(dp_name_str(" x", buf, sizeof buf), "' x'");
    /* Cut to the buffer, quotes kept. */
    assert_string_equal(dp_repr("abcdefghijklmnop", buf, 12), "'abcdef...'");
}

static void class_named_with_a_newline(void **state)
{
    (void)state;
    char dir[512], ck[512], image[600];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("newline-classes"));
    make_folder(dir, (const char *const[]){"a\nb", "plain", "it's"}, 3);
    snprintf(ck, sizeof ck, "%s", tu_tmp_path("newline.st"));
    cli_run r;
    run_cli(ARGS("train", "--dataset", "folder", "--data", dir, "--epochs", "1", "--batch-size",
                 "3", "--progress", "never", "--checkpoint", ck),
            120, &r);
    if (r.status != 0)
        fail_msg("training on the folder failed (exit %d): %s", r.status, r.err);
    snprintf(image, sizeof image, "%s/test/plain/0.png", dir);
    run_cli(ARGS("predict", "--checkpoint", ck, "--topk", "3", image), 60, &r);
    printf("predict: exit %d: %s%s", r.status, r.out, r.err);
    assert_int_equal(r.status, 0);
    /* One line for the one image, naming every class, the odd ones as
     * Python's repr writes them. */
    assert_int_equal(count_lines(r.out), 1);
    assert_has(r.out, "'a\\nb' ");
    assert_has(r.out, "\"it's\" ");
    assert_has(r.out, " plain ");
}

/* ---- 5. an image folder's link to nothing ---------------------------------- */

static void dangling_link_in_a_folder(void **state)
{
    (void)state;
    char dir[512], link[700];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("dangling"));
    make_folder(dir, (const char *const[]){"dark", "light"}, 2);
    snprintf(link, sizeof link, "%s/train/light/gone.png", dir);
    assert_int_equal(symlink("/nowhere/gone.png", link), 0);
    /* A link to nothing that no image reader takes stays passed over, as
     * ImageFolder passes it over. */
    snprintf(link, sizeof link, "%s/train/light/notes.txt", dir);
    assert_int_equal(symlink("/nowhere/notes.txt", link), 0);
    snprintf(link, sizeof link, "%s/train/light/gone.png", dir);
    expect_refused("a folder with a link to nothing",
                   ARGS("train", "--dataset", "folder", "--data", dir),
                   WANT(link, "a symbolic link to '/nowhere/gone.png', which is not there"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rest_under_64_mb),
        cmocka_unit_test(fifo_inputs),
        cmocka_unit_test(sha256_as_the_standard_gives_it),
        cmocka_unit_test(checkpoint_naming_a_file),
        cmocka_unit_test(checkpoint_of_a_model_file),
        cmocka_unit_test(classes_not_strings),
        cmocka_unit_test(model_checked_before_it_is_built),
        cmocka_unit_test(train_checks_before_loading),
        cmocka_unit_test(batch_capped_at_the_data),
        cmocka_unit_test(step_memory_estimated_first),
        cmocka_unit_test(names_written_as_python_repr_writes_them),
        cmocka_unit_test(class_named_with_a_newline),
        cmocka_unit_test(dangling_link_in_a_folder),
    };
    return tu_run(argc, argv, tests, group_setup, group_teardown);
}
