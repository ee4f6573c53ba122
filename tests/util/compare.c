#include "compare.h"

#include "testutil.h"

#include <math.h>

double tu_max_diff_or_nan(const float *a, const float *b, int64_t n, int64_t *at)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            if (at)
                *at = i;
            return NAN;
        }
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    }
    return worst;
}

bool tu_close(double a, double b, double rtol, double atol)
{
    return isfinite(a) && isfinite(b) && fabs(a - b) <= atol + rtol * fmax(fabs(a), fabs(b));
}

static void fail_not_finite(const char *what, int64_t i, double a, double b)
{
    fail_msg("%s[%lld] is %.9g vs %.9g: not finite", what, (long long)i, a, b);
}

double tu_max_diff(const char *what, const float *a, const float *b, int64_t n)
{
    int64_t at = 0;
    double d = tu_max_diff_or_nan(a, b, n, &at);
    if (isnan(d))
        fail_not_finite(what, at, a[at], b[at]);
    return d;
}

double tu_max_abs(const char *what, const float *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = tu_worst_abs(m, x[i], what, i);
    return m;
}

double tu_max_rel_diff_of(const char *what, const float *a, const float *b, int64_t n)
{
    double d = tu_max_diff(what, a, b, n), scale = tu_max_abs(what, b, n);
    return scale > 0 ? d / scale : d;
}

double tu_worst_diff(double worst, double got, double want, const char *what, int64_t i)
{
    if (!isfinite(got) || !isfinite(want))
        fail_not_finite(what, i, got, want);
    return fmax(worst, fabs(got - want));
}

double tu_worst_abs(double worst, double x, const char *what, int64_t i)
{
    if (!isfinite(x))
        fail_not_finite(what, i, x, x);
    return fmax(worst, fabs(x));
}

double tu_worst_rel(double worst, double got, double want, double scale, const char *what,
                    int64_t i)
{
    if (!(scale > 0) || !isfinite(scale))
        fail_msg("%s[%lld]: the scale %.9g is not a positive number", what, (long long)i, scale);
    return fmax(worst, tu_worst_diff(0, got, want, what, i) / scale);
}

void tu__assert_close(double a, double b, double rtol, double atol, const char *a_text,
                      const char *b_text, const char *file, int line)
{
    if (tu_close(a, b, rtol, atol))
        return;
    print_error("ERROR: %s = %.9g vs %s = %.9g (diff %.3g, rtol %.3g, atol %.3g)%s\n", a_text, a,
                b_text, b, fabs(a - b), rtol, atol,
                isfinite(a) && isfinite(b) ? "" : ": not finite");
    _fail(file, line);
}
