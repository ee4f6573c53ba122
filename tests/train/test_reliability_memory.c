/* Reliability of long runs (issue 7), against the built dptrain
 * (DP_BUILD_DIR): 30 epochs with a checkpoint each keep a flat memory
 * profile. */
#include "reliabilityutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads "key": number from the JSON line of epoch `epoch`. */
static double metric(const char *text, int epoch, const char *key)
{
    char head[32], k[64];
    snprintf(head, sizeof head, "{\"epoch\": %d,", epoch);
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *line = strstr(text, head);
    assert_non_null(line);
    const char *end = strchr(line, '\n');
    const char *v = strstr(line, k);
    if (!v || (end && v > end))
        fail_msg("no %s in the line of epoch %d", key, epoch);
    return atof(v + strlen(k));
}

/* 30 epochs with a checkpoint after each: the memory of the last epoch is
 * that of the second (within 5%), both the peak and the current RSS. */
static void memory_flat_over_30_epochs(void **state)
{
    (void)state;
    NEED_DATA();
    char metrics[512];
    tmp_path(metrics, "m.jsonl");
    char ck[512];
    tmp_path(ck, "rss.safetensors");
    const char *a[] = {"--epochs", "30",        "--limit-train", "4096",      "--checkpoint",
                       ck,         "--metrics", metrics,         "--devices", "2",
                       "--lr",     "0.05",      "--momentum",    "0.9",       NULL};
#if defined(__SANITIZE_ADDRESS__)
    /* Under AddressSanitizer, freed memory waits in its quarantine (up to
     * 256 MB) before it can be reused, and counts in RSS until then: a
     * 1 MB quarantine makes the figures the process's own again. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL;
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=1", asan ? asan : "", asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
    int rc = run(a, NULL);
#if defined(__SANITIZE_ADDRESS__)
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
#endif
    assert_int_equal(rc, 0);
    const char *text = slurp(metrics);
    double peak2 = metric(text, 2, "peak_rss_mb"), peak30 = metric(text, 30, "peak_rss_mb");
    double rss2 = metric(text, 2, "rss_mb"), rss30 = metric(text, 30, "rss_mb");
    printf("peak RSS: epoch 2 %.1f MB, epoch 30 %.1f MB (%+.2f%%)\n", peak2, peak30,
           100.0 * (peak30 - peak2) / peak2);
    printf("RSS:      epoch 2 %.1f MB, epoch 30 %.1f MB (%+.2f%%)\n", rss2, rss30,
           100.0 * (rss30 - rss2) / rss2);
    assert_true(peak30 <= peak2 * 1.05);
    assert_true(rss30 <= rss2 * 1.05);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(memory_flat_over_30_epochs, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, setup, NULL);
}
