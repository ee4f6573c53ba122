/* Helpers of the tests that run dptrain under mpirun: see mpiutil.h. */
#include "mpiutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char mu_mpirun[512];

bool mu_find_in_path(const char *name, char *out, size_t size)
{
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s:/usr/bin", path ? path : "");
    for (char *save, *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        snprintf(out, size, "%s/%s", dir, name);
        if (access(out, X_OK) == 0)
            return true;
    }
    return false;
}

int mu_setup(void **state)
{
    (void)state;
    if (tu_find_dptrain() < 0)
        return -1;
    /* mpirun as root (CI containers), ranks on more ranks than cores, and
     * no cross-memory attach (often forbidden in containers). */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    return 0;
}

pid_t mu_start(const char *const *argv, const char *log)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setpgid(0, 0); /* its own group: a failed test kills what is left */
        if (strcmp(argv[0], mu_mpirun) == 0) {
            /* Under AddressSanitizer the ranks still check every access, but
             * not leaks: what Open MPI's dlopen'ed components keep after
             * MPI_Finalize has one-frame stacks that no suppression can
             * name. Leaks of dptrain's own code are checked by the
             * single-process runs, which take the same paths. */
            char opts[1024];
            const char *old = getenv("ASAN_OPTIONS");
            snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "", old ? ":" : "");
            setenv("ASAN_OPTIONS", opts, 1);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int status_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int mu_wait_for(pid_t pid, double seconds)
{
    int status;
    for (double t = 0; t < seconds; t += 0.01) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status_code(status);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

char *mu_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

int mu_count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + strlen(needle), needle))
        n++;
    return n;
}

double mu_json_number(const char *path, const char *key)
{
    char *s = mu_slurp(path);
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(s, pat);
    double v = p ? atof(p + strlen(pat)) : NAN;
    free(s);
    return v;
}

double mu_json_nth(const char *path, const char *key, int n)
{
    char *s = mu_slurp(path);
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(s, pat);
    for (int i = 0; p && i < n; i++)
        p = strstr(p + strlen(pat), pat);
    double v = p ? atof(p + strlen(pat)) : NAN;
    free(s);
    return v;
}

int mu_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    fflush(stdout);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double mu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int mu_run(int ranks, const char *devices, const char *ck, const char *metrics,
           const char *const *extra, const char *log)
{
    const char *argv[64];
    int n = 0;
    char np[16];
    if (ranks > 0) {
        snprintf(np, sizeof np, "%d", ranks);
        argv[n++] = mu_mpirun;
        argv[n++] = "-np";
        argv[n++] = np;
    }
    const char *common[] = {MU_COMMON};
    argv[n++] = tu_dptrain;
    for (size_t i = 0; i < sizeof common / sizeof *common; i++)
        argv[n++] = common[i];
    argv[n++] = "--devices";
    argv[n++] = devices;
    argv[n++] = "--checkpoint";
    argv[n++] = ck;
    if (metrics) {
        argv[n++] = "--metrics";
        argv[n++] = metrics;
    }
    for (int i = 0; extra && extra[i] && n < 63; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    int rc = mu_wait_for(mu_start(argv, log), 300);
    if (rc != 0) {
        char *s = mu_slurp(log);
        printf("%s", s);
        free(s);
    }
    return rc;
}

double mu_moved_from_init(const char *ck, const char *model, uint64_t seed)
{
    dp_device_t *dev;
    dp_model_t *m;
    dp_safetensors_t *f;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    assert_int_equal(dp_model_init_builtin(&m, model, dev, seed), 0);
    assert_int_equal(dp_safetensors_open(&f, ck), 0);
    dp_params_t *p = dp_model_params(m);
    double d = 0, scale = 0;
    for (int i = 0; i < dp_params_count(p); i++) {
        dp_tensor_t *t = dp_params_get(p, i);
        int64_t n = dp_tensor_numel(t);
        float *init = malloc((size_t)n * sizeof *init);
        assert_non_null(init);
        assert_int_equal(dp_tensor_to_host(t, init, (size_t)n * sizeof *init), 0);
        dp_st_tensor st;
        if (dp_safetensors_find(f, dp_params_name(p, i), &st) != 0)
            fail_msg("parameter '%s' is missing in %s", dp_params_name(p, i), ck);
        assert_int_equal(st.dtype, DP_ST_F32);
        assert_int_equal(st.bytes, (size_t)n * sizeof(float));
        d = fmax(d, tu_max_diff(dp_params_name(p, i), st.data, init, n));
        scale = fmax(scale, tu_max_abs(dp_params_name(p, i), st.data, n));
        free(init);
    }
    dp_safetensors_close(f);
    dp_model_close(m);
    dp_device_close(dev);
    return scale > 0 ? d / scale : 0;
}

/* max |a - b| / max |b| over the float tensors of two checkpoints, the
 * parameters (and running statistics when `running`) taken together and the
 * optimizer's state (momentum, Adam's moments: "_state.") together, the
 * larger of the two; a group whose b is all zeros counts max |a - b|. */
static double max_diff(const char *a, const char *b, bool running)
{
    dp_safetensors_t *fa, *fb;
    assert_int_equal(dp_safetensors_open(&fa, a), 0);
    assert_int_equal(dp_safetensors_open(&fb, b), 0);
    assert_int_equal(dp_safetensors_count(fa), dp_safetensors_count(fb));
    double d[2] = {0, 0}, scale[2] = {0, 0};
    for (int i = 0; i < dp_safetensors_count(fa); i++) {
        dp_st_tensor ta, tb;
        assert_int_equal(dp_safetensors_get(fa, i, &ta), 0);
        if (ta.dtype != DP_ST_F32 || (!running && strstr(ta.name, ".running_")))
            continue;
        if (dp_safetensors_find(fb, ta.name, &tb) != 0)
            fail_msg("tensor '%s' of %s is missing in %s", ta.name, a, b);
        assert_int_equal(ta.bytes, tb.bytes);
        int g = strncmp(ta.name, "_state.", 7) == 0;
        int64_t n = (int64_t)(ta.bytes / sizeof(float));
        d[g] = fmax(d[g], tu_max_diff(ta.name, ta.data, tb.data, n));
        scale[g] = fmax(scale[g], tu_max_abs(ta.name, tb.data, n));
    }
    dp_safetensors_close(fa);
    dp_safetensors_close(fb);
    return fmax(scale[0] > 0 ? d[0] / scale[0] : d[0], scale[1] > 0 ? d[1] / scale[1] : d[1]);
}

double mu_max_param_diff(const char *a, const char *b)
{
    return max_diff(a, b, true);
}

double mu_max_weight_diff(const char *a, const char *b)
{
    return max_diff(a, b, false);
}

pid_t mu_find_rank(pid_t parent, int rank)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    char want[64];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    pid_t found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d))) {
        pid_t pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/stat", pid);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        int ppid = 0;
        if (fscanf(f, "%*d (%*[^)]) %*c %d", &ppid) != 1)
            ppid = 0;
        fclose(f);
        if (ppid != parent)
            continue;
        snprintf(p, sizeof p, "/proc/%d/environ", pid);
        f = fopen(p, "r");
        if (!f)
            continue;
        static char env[1 << 16];
        size_t n = fread(env, 1, sizeof env - 1, f);
        fclose(f);
        env[n] = '\0';
        for (size_t k = 0; k < n; k += strlen(env + k) + 1) {
            if (strcmp(env + k, want) == 0)
                found = pid;
        }
    }
    closedir(d);
    return found;
}

bool mu_gone(pid_t pid, double seconds)
{
    for (double t = 0; t < seconds; t += 0.01) {
        char p[64], st = 0;
        snprintf(p, sizeof p, "/proc/%d/stat", pid);
        FILE *f = fopen(p, "r");
        if (!f)
            return true;
        if (fscanf(f, "%*d (%*[^)]) %c", &st) != 1)
            st = 0;
        fclose(f);
        if (st == 'Z' || st == 'X')
            return true;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return false;
}

int mu_assert_same_non_float(const char *a, const char *b)
{
    dp_safetensors_t *fa, *fb;
    assert_int_equal(dp_safetensors_open(&fa, a), 0);
    assert_int_equal(dp_safetensors_open(&fb, b), 0);
    assert_int_equal(dp_safetensors_count(fa), dp_safetensors_count(fb));
    int n = 0;
    for (int i = 0; i < dp_safetensors_count(fa); i++) {
        dp_st_tensor ta, tb;
        assert_int_equal(dp_safetensors_get(fa, i, &ta), 0);
        if (ta.dtype == DP_ST_F32)
            continue;
        if (dp_safetensors_find(fb, ta.name, &tb) != 0)
            fail_msg("tensor '%s' of %s is missing in %s", ta.name, a, b);
        assert_int_equal(ta.dtype, tb.dtype);
        assert_int_equal(ta.bytes, tb.bytes);
        if (memcmp(ta.data, tb.data, ta.bytes) != 0)
            fail_msg("tensor '%s' differs between %s and %s", ta.name, a, b);
        n++;
    }
    dp_safetensors_close(fa);
    dp_safetensors_close(fb);
    return n;
}
