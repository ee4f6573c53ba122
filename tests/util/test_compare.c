/* tests/util/compare.c, the differences every C test takes: a NaN, an Inf or a
 * -Inf on either side, first, in the middle or last, makes each helper
 * fail (seen from a child process, whose cmocka run must fail naming the
 * value "not finite"), and finite values give the exact maximum. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 5 };

static const float not_finite[3] = {NAN, INFINITY, -INFINITY};

static void max_diff_finds_every_non_finite_value(void **state)
{
    (void)state;
    float a[N] = {1, -2, 3, 0.5f, 4}, b[N] = {1.5f, -2, 1, 0.5f, 4};
    int64_t at = -1;
    assert_true(tu_max_diff_or_nan(a, b, N, &at) == 2.0);
    assert_true(tu_max_diff_or_nan(a, b, 0, &at) == 0.0);
    for (int v = 0; v < 3; v++)
        for (int side = 0; side < 2; side++)
            for (int64_t i = 0; i < N; i += 2) { /* first, middle, last */
                float x[N], y[N];
                memcpy(x, a, sizeof x);
                memcpy(y, b, sizeof y);
                (side ? y : x)[i] = not_finite[v];
                at = -1;
                double d = tu_max_diff_or_nan(x, y, N, &at);
                if (!isnan(d) || at != i)
                    fail_msg("%g on side %d at %lld: got %g at %lld", (double)not_finite[v], side,
                             (long long)i, d, (long long)at);
            }
}

static void close_is_false_for_non_finite_values(void **state)
{
    (void)state;
    assert_true(tu_close(1.0, 1.0 + 1e-7, 1e-6, 0));
    assert_false(tu_close(1.0, 1.1, 1e-6, 1e-3));
    for (int v = 0; v < 3; v++) {
        assert_false(tu_close(not_finite[v], 1.0, 1e-6, 1e-6));
        assert_false(tu_close(1.0, not_finite[v], 1e-6, 1e-6));
        assert_false(tu_close(not_finite[v], not_finite[v], 1e-6, 1e-6));
    }
}

/* ---- each failing helper, run in a child -------------------------------- */

typedef enum helper {
    MAX_DIFF,
    MAX_ABS,
    MAX_REL,
    WORST_DIFF,
    WORST_ABS,
    WORST_REL,
    ASSERT_CLOSE,
    HELPERS
} helper;
static const char *const helper_names[HELPERS] = {
    "tu_max_diff",  "tu_max_abs",   "tu_max_rel_diff_of", "tu_worst_diff",
    "tu_worst_abs", "tu_worst_rel", "tu_assert_close"};

static helper child_helper;
static float child_value;
static int child_side;

/* The child's one test: the helper on a last element (or scalar) that is
 * child_value, on side child_side. */
static void call_helper(void **state)
{
    (void)state;
    float a[N] = {1, 2, 3, 4, 5}, b[N] = {1, 2, 3, 4, 5};
    (child_side ? b : a)[N - 1] = child_value;
    double x = child_side ? 1.0 : child_value, y = child_side ? child_value : 1.0;
    switch (child_helper) {
    case MAX_DIFF:
        tu_max_diff("a vs b", a, b, N);
        break;
    case MAX_ABS:
        tu_max_abs("x", child_side ? b : a, N);
        break;
    case MAX_REL:
        tu_max_rel_diff_of("a vs b", a, b, N);
        break;
    case WORST_DIFF:
        tu_worst_diff(0, x, y, "x vs y", 0);
        break;
    case WORST_ABS:
        tu_worst_abs(0, child_value, "x", 0);
        break;
    case WORST_REL:
        tu_worst_rel(0, x, y, 1.0, "x vs y", 0);
        break;
    default:
        tu_assert_close(x, y, 1e-3, 1e-3);
        break;
    }
}

/* Runs call_helper in a child's own cmocka group; whether that run failed
 * with "not finite" in its output. */
static bool child_fails(helper h, float value, int side)
{
    char path[64];
    snprintf(path, sizeof path, "compare_child_%d.out", (int)getpid());
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *out = freopen(path, "w", stdout);
        if (!out || dup2(fileno(stdout), 2) < 0)
            _exit(126);
        child_helper = h, child_value = value, child_side = side;
        const struct CMUnitTest one[] = {cmocka_unit_test(call_helper)};
        int failed = cmocka_run_group_tests(one, NULL, NULL);
        fflush(stdout);
        _exit(failed > 0 ? 1 : 0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    remove(path);
    return WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(text, "not finite");
}

static void every_helper_fails_on_a_non_finite_value(void **state)
{
    (void)state;
    int runs = 0;
    for (helper h = 0; h < HELPERS; h++)
        for (int v = 0; v < 3; v++)
            for (int side = 0; side < 2; side++) {
                if (!child_fails(h, not_finite[v], side))
                    fail_msg("%s passed with %g on side %d", helper_names[h], (double)not_finite[v],
                             side);
                runs++;
            }
    /* and passes on finite values */
    for (helper h = 0; h < HELPERS; h++)
        if (child_fails(h, 5.0f, 0))
            fail_msg("%s failed on finite values", helper_names[h]);
    printf("%d helpers x NaN, Inf, -Inf x either side: %d failing runs, as they must\n",
           (int)HELPERS, runs);
}

static void finite_values_give_the_largest_difference(void **state)
{
    (void)state;
    float a[N] = {1, -2, 3, 0.5f, 4}, b[N] = {1.5f, -2, 1, 0.5f, -8};
    assert_true(tu_max_diff("a vs b", a, b, N) == 12.0);
    assert_true(tu_max_abs("b", b, N) == 8.0);
    assert_true(tu_max_rel_diff_of("a vs b", a, b, N) == 12.0 / 8.0);
    float zeros[N] = {0};
    assert_true(tu_max_rel_diff_of("a vs 0", a, zeros, N) == 4.0);
    assert_true(tu_worst_diff(0.25, 1.0, 3.0, "x", 0) == 2.0);
    assert_true(tu_worst_abs(3.0, -2.0, "x", 0) == 3.0);
    assert_true(tu_worst_rel(0, 1.0, 3.0, 4.0, "x", 0) == 0.5);
    tu_assert_close(1.0, 1.0005, 1e-3, 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(max_diff_finds_every_non_finite_value),
        cmocka_unit_test(close_is_false_for_non_finite_values),
        cmocka_unit_test(every_helper_fails_on_a_non_finite_value),
        cmocka_unit_test(finite_values_give_the_largest_difference),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
