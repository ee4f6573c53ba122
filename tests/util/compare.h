/* The one way the C tests take a difference. fmax(worst, NaN) is worst and
 * NaN > tol is false, so a comparison written as
 *     worst = fmax(worst, fabs(a - b)); assert_true(worst <= tol);
 * or  if (fabs(a - b) > tol) fail();
 * passes when a NaN or an Inf appears after the first element, and an
 * Inf passes a relative bound (Inf <= rtol * Inf). Every helper here fails
 * the test on a value that is not finite, on either side, naming what was
 * compared, the index and both values; the _or_nan forms return NaN
 * instead, so that tests/util/test_compare.c can see each case.
 * tests/util/compare.py is the same for the Python and shell tests. */
#ifndef DP_TESTS_COMPARE_H
#define DP_TESTS_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

/* max |a[i] - b[i]| over i < n, or NaN (*at: the first such i, when at is
 * given) when any a[i] or b[i] is not finite; 0 for n = 0. */
double tu_max_diff_or_nan(const float *a, const float *b, int64_t n, int64_t *at);
/* Whether a and b are finite and |a - b| <= atol + rtol max(|a|, |b|). */
bool tu_close(double a, double b, double rtol, double atol);

/* max |a[i] - b[i]|; fails the test on a value that is not finite. */
double tu_max_diff(const char *what, const float *a, const float *b, int64_t n);
/* max |x[i]|, the same failure. */
double tu_max_abs(const char *what, const float *x, int64_t n);
/* max |a - b| / max |b| over the n elements together (not per element: a
 * small b[i] weighs as the largest); max |a - b| where b is all zeros.
 * The same failure. */
double tu_max_rel_diff_of(const char *what, const float *a, const float *b, int64_t n);

/* One element at a time, for a reference computed on the fly (e.g. in
 * double): max(worst, |got - want|), and max(worst, |x|), failing as above
 * (element i of `what`). */
double tu_worst_diff(double worst, double got, double want, const char *what, int64_t i);
double tu_worst_abs(double worst, double x, const char *what, int64_t i);
/* max(worst, |got - want| / scale), for a bound relative to a figure
 * the caller chose (scale > 0). */
double tu_worst_rel(double worst, double got, double want, double scale, const char *what,
                    int64_t i);

/* Fails the test, printing both, unless value <= bound (a NaN value
 * fails). */
#define tu_assert_at_most(value, bound)                                                            \
    do {                                                                                           \
        double tu_v = (value), tu_b = (bound);                                                     \
        if (!(tu_v <= tu_b))                                                                       \
            fail_msg("%s = %.3g, more than %s = %.3g", #value, tu_v, #bound, tu_b);                \
    } while (0)

/* Fails the test, printing both, unless tu_close(a, b, rtol, atol). */
#define tu_assert_close(a, b, rtol, atol)                                                          \
    tu__assert_close((a), (b), (rtol), (atol), #a, #b, __FILE__, __LINE__)
void tu__assert_close(double a, double b, double rtol, double atol, const char *a_text,
                      const char *b_text, const char *file, int line);

#endif
