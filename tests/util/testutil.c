#include "testutil.h"

#include "dp/core.h"
#include "dp/autograd.h"
#include "dp/data.h"
#include "dp/ops.h"
#include "dp/parallel.h"
#include "dp/safetensors.h"

#include <errno.h>
#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

char *tu_tempdir(const char *name)
{
    char *path = malloc(strlen(name) + 32);
    sprintf(path, "tmp_%s_%d", name, (int)getpid());
    mkdir(path, 0755);
    return path;
}

int tu_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

bool tu_have_fashion_mnist(void)
{
    return access(DP_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0 &&
           access(DP_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) == 0;
}

static void quiet(dp_log_level level, const char *msg, void *user)
{
    (void)level, (void)msg, (void)user;
}

uint8_t *tu_make_idx(int ndims, const uint32_t *dims, const uint8_t *data, size_t *out_len)
{
    size_t n = 1;
    for (int i = 0; i < ndims; i++)
        n *= dims[i];
    size_t len = 4 + 4 * (size_t)ndims + n;
    uint8_t *buf = malloc(len);
    buf[0] = 0, buf[1] = 0, buf[2] = 0x08, buf[3] = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++) {
        uint8_t *b = buf + 4 + 4 * i;
        b[0] = (uint8_t)(dims[i] >> 24), b[1] = (uint8_t)(dims[i] >> 16);
        b[2] = (uint8_t)(dims[i] >> 8), b[3] = (uint8_t)dims[i];
    }
    memcpy(buf + 4 + 4 * ndims, data, n);
    *out_len = len;
    return buf;
}

void tu_write_idx_set(const char *dir)
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

void tu_assert_error_mentions(const char *what)
{
    const char *msg = dp_last_error();
    if (!strstr(msg, what))
        fail_msg("last error \"%s\" does not mention \"%s\"", msg, what);
}

void tu_quiet_log(void)
{
    dp_log_set(quiet, NULL);
}

char *tu_tmp;

int tu_setup_tmp(void **state)
{
    (void)state;
    tu_tmp = tu_tempdir("test");
    return tu_tmp ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int tu_teardown_tmp(void **state)
{
    (void)state;
    nftw(tu_tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(tu_tmp);
    tu_tmp = NULL;
    return 0;
}

const char *tu_tmp_path(const char *name)
{
    static char buf[2][512];
    static int which;
    which ^= 1;
    snprintf(buf[which], sizeof buf[which], "%s/%s", tu_tmp, name);
    return buf[which];
}

/* Calls fn on every tensor of a with b's tensor of the same name. */
static void each_tensor_pair(const char *a, const char *b,
                             void (*fn)(const dp_st_tensor *, const dp_st_tensor *, void *),
                             void *ctx)
{
    dp_safetensors_t *fa, *fb;
    assert_int_equal(dp_safetensors_open(&fa, a), 0);
    assert_int_equal(dp_safetensors_open(&fb, b), 0);
    assert_int_equal(dp_safetensors_count(fa), dp_safetensors_count(fb));
    for (int i = 0; i < dp_safetensors_count(fa); i++) {
        dp_st_tensor ta, tb;
        assert_int_equal(dp_safetensors_get(fa, i, &ta), 0);
        if (dp_safetensors_find(fb, ta.name, &tb) != 0)
            fail_msg("tensor '%s' of %s is missing in %s", ta.name, a, b);
        assert_int_equal(ta.bytes, tb.bytes);
        fn(&ta, &tb, ctx);
    }
    dp_safetensors_close(fa);
    dp_safetensors_close(fb);
}

static void same_bytes(const dp_st_tensor *ta, const dp_st_tensor *tb, void *ctx)
{
    if (memcmp(ta->data, tb->data, ta->bytes) != 0)
        fail_msg("tensor '%s' differs", ta->name);
    ++*(int *)ctx;
}

void tu_assert_same_tensors(const char *a, const char *b)
{
    int n = 0;
    each_tensor_pair(a, b, same_bytes, &n);
    printf("%d tensors identical\n", n);
}

/* A NaN or an Inf on either side fails (compare.h); a reference tensor of
 * zeros is compared absolutely, not skipped. */
static void rel_diff(const dp_st_tensor *ta, const dp_st_tensor *tb, void *ctx)
{
    if (ta->dtype != DP_ST_F32)
        return;
    double *worst = ctx;
    *worst = fmax(*worst, tu_max_rel_diff_of(ta->name, ta->data, tb->data,
                                             (int64_t)(ta->bytes / sizeof(float))));
}

double tu_max_rel_diff(const char *a, const char *b)
{
    double worst = 0;
    each_tensor_pair(a, b, rel_diff, &worst);
    return worst;
}

/* Sums |a - b|^2 and |b|^2 over the model's float tensors. */
static void l2_sums(const dp_st_tensor *ta, const dp_st_tensor *tb, void *ctx)
{
    if (ta->dtype != DP_ST_F32 || strncmp(ta->name, "_state.", 7) == 0)
        return;
    const float *x = ta->data, *y = tb->data;
    double *sums = ctx;
    for (size_t k = 0; k < ta->bytes / sizeof(float); k++) {
        tu_worst_diff(0, x[k], y[k], ta->name, (int64_t)k); /* fails on NaN and Inf */
        sums[0] += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
        sums[1] += (double)y[k] * y[k];
    }
}

double tu_l2_rel_diff(const char *a, const char *b)
{
    double sums[2] = {0, 0};
    each_tensor_pair(a, b, l2_sums, sums);
    return sqrt(sums[0] / sums[1]);
}

static int tu_skips;

void tu__note_skip(const char *test, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("SKIP %s: ", test);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    tu_skips++;
}

/* Whether `name` is in the comma-separated list `names`. */
static bool in_list(const char *names, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = names; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0)
            return true;
        p += n + (end != NULL);
    }
    return false;
}

int tu__run(int argc, char **argv, const char *group, const struct CMUnitTest *tests, size_t n,
            CMFixtureFunction setup, CMFixtureFunction teardown)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    bool exclude = only && only[0] == '-';
    struct CMUnitTest *chosen = calloc(n, sizeof *chosen);
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (!only || in_list(only + exclude, tests[i].name) != exclude)
            chosen[count++] = tests[i];
    if (count == 0) {
        printf("%s: no test matches '%s'\n", argv[0], only);
        free(chosen);
        return 1;
    }
    int failed = _cmocka_run_group_tests(group, chosen, count, setup, teardown);
    free(chosen);
    if (failed == 0 && tu_skips > 0) {
        printf("%d of %zu tests skipped (see the SKIP lines): reported to CTest as skipped\n",
               tu_skips, count);
        return TU_SKIP_EXIT;
    }
    return failed;
}

char tu_dptrain[512];

int tu_find_dptrain(void)
{
    const char *dir = getenv("DP_BUILD_DIR");
    snprintf(tu_dptrain, sizeof tu_dptrain, "%s/dptrain", dir ? dir : "..");
    if (access(tu_dptrain, X_OK) != 0) {
        printf("no dptrain binary at %s (run through ctest, which sets DP_BUILD_DIR)\n",
               tu_dptrain);
        return -1;
    }
    return 0;
}

void tu_make_batch(uint64_t seed, int64_t n, int64_t pixels, float *x, int32_t *y)
{
    uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (int64_t i = 0; i < n * pixels; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((s >> 40) & 0xffff) / 65536.0f;
    }
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        y[i] = (int32_t)((s >> 33) % 10);
    }
}

void tu_open_cpu_devices(dp_device_t **devs, int n)
{
    char spec[64] = "";
    int got;
    for (int k = 0; k < n; k++)
        snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%scpu:%d", k ? "," : "", k);
    assert_int_equal(dp_devices_open(devs, &got, spec, 1), 0);
    assert_int_equal(got, n);
}

float *tu_replica_params(dp_data_parallel_t *dp, dp_model_t *model, int n, int64_t *numel)
{
    *numel = dp_params_numel(dp_model_params(model));
    float *p0 = malloc((size_t)*numel * sizeof *p0), *pk = malloc((size_t)*numel * sizeof *pk);
    assert_int_equal(dp_params_get_all(dp_model_params(model), p0), 0);
    for (int k = 1; k < n; k++) {
        assert_int_equal(dp_params_get_all(dp_model_params(dp_data_parallel_replica(dp, k)), pk),
                         0);
        assert_memory_equal(p0, pk, (size_t)*numel * sizeof *pk);
    }
    free(pk);
    return p0;
}

float *tu_lenet_initial_params(uint64_t seed, int64_t numel)
{
    dp_device_t *dev;
    dp_model_t *m;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    assert_int_equal(dp_model_init_builtin(&m, "lenet", dev, seed), 0);
    assert_int_equal(dp_params_numel(dp_model_params(m)), numel);
    float *start = malloc((size_t)numel * sizeof *start);
    assert_int_equal(dp_params_get_all(dp_model_params(m), start), 0);
    dp_model_close(m);
    dp_device_close(dev);
    return start;
}

void tu_data_parallel_step(dp_data_parallel_t *dp, dp_tape_t *tape, dp_device_t *dev,
                           const float *images, const int32_t *labels, int64_t batch)
{
    int64_t xs[4] = {batch, 1, 28, 28}, ys = batch;
    dp_tensor_t *x, *y, *logits, *loss;
    assert_int_equal(dp_tensor_from_host(&x, dev, DP_F32, 4, xs, images), 0);
    assert_int_equal(dp_tensor_from_host(&y, dev, DP_I32, 1, &ys, labels), 0);
    dp_tape_begin(tape);
    assert_int_equal(dp_data_parallel_forward(dp, x, true, &logits), 0);
    assert_int_equal(dp_cross_entropy(&loss, logits, y, DP_REDUCE_SUM), 0);
    dp_data_parallel_zero_grad(dp);
    assert_int_equal(dp_backward(loss), 0);
    assert_int_equal(dp_data_parallel_step(dp, 1.0f / (float)batch), 0);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tensor_free(x);
    dp_tensor_free(y);
}

const char *tu_cpu_name(void)
{
    static char name[256];
    if (name[0])
        return name;
    snprintf(name, sizeof name, "this CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            char *v = strchr(line, ':') + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = '\0';
            snprintf(name, sizeof name, "%s", v);
            break;
        }
    }
    if (f)
        fclose(f);
    /* the instruction sets that decide which kernels exist */
    static const char *const flags[] = {"avx2", "avx512f", "avx512_bf16", "amx_bf16"};
    char have[128] = "";
    f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
            char word[32];
            snprintf(word, sizeof word, " %s", flags[i]);
            char *at = strstr(line, word);
            size_t n = strlen(word);
            if (at && (at[n] == ' ' || at[n] == '\n'))
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s",
                         have[0] ? " " : "", flags[i]);
        }
        break;
    }
    if (f)
        fclose(f);
    const char *isa = getenv("DNNL_MAX_CPU_ISA");
    snprintf(name + strlen(name), sizeof name - strlen(name), " (%s%s%s%s)",
             have[0] ? have : "no avx2", isa ? "; DNNL_MAX_CPU_ISA=" : "", isa ? isa : "", "");
    return name;
}

void tu_assert_metrics_epochs(const char *path, int first, int last)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read the metrics file %s", path);
    static char line[1 << 16];
    int want = first;
    while (fgets(line, sizeof line, f)) {
        int epoch;
        if (sscanf(line, "{\"epoch\": %d,", &epoch) != 1)
            continue; /* a --log-steps line */
        if (epoch != want) {
            fclose(f);
            fail_msg("%s holds epoch %d where epoch %d was expected (epochs %d to %d)", path, epoch,
                     want, first, last);
        }
        want++;
    }
    fclose(f);
    if (want == first)
        fail_msg("%s holds no epoch line (epochs %d to %d expected)", path, first, last);
    if (want != last + 1)
        fail_msg("%s holds epochs %d to %d, not %d to %d", path, first, want - 1, first, last);
    printf("%s: epochs %d to %d only\n", path, first, last);
}
