/* torch_rng.c - PyTorch's CPU random numbers, bit for bit: the Mersenne
 * Twister its CPU generator runs, and the ways its kernels turn the
 * twister's 32-bit words into tensors (torch.rand, torch.randn,
 * torch.randperm, Tensor.random_). A script seeded with
 * dptrain.manual_seed(s) draws the numbers torch.manual_seed(s) draws, so
 * `import dptrain as torch` starts from PyTorch's initial weights.
 *
 * The transformations follow ATen's CPU kernels
 * (ATen/core/DistributionsHelper.h, ATen/native/cpu/DistributionTemplates.h,
 * ATen/native/TensorFactories.cpp):
 *   - a float in [0, 1) is (word & (2^24 - 1)) * 2^-24, a double
 *     (word64 & (2^53 - 1)) * 2^-53, with word64 = (first << 32) | second;
 *   - randn of 16 or more contiguous floats fills every element with a
 *     uniform first, then turns each block of 16 into normals by Box-Muller
 *     over the pairs (j, j + 8) with avx_mathfun's Cephes polynomials (not
 *     libm), the fused multiply-adds where the PyTorch wheel's compiler put
 *     them; a length not a multiple of 16 redraws the last 16 uniforms and
 *     converts that (overlapping) block again;
 *   - fewer than 16 draw doubles by Box-Muller over libm, keeping the
 *     second normal of each pair for the next draw;
 *   - randperm(n) is Fisher-Yates from the front, z = word % (n - i).
 * tests/python/test_torch_rng.py compares every one with PyTorch's own. */
#include "dpy.h"

#include <math.h>
#include <string.h>

#define MT_N 624
#define MT_M 397

/* The fmaf calls are exact either way; the "fma" clone makes them
 * instructions (x86-64's baseline has none, and libm's software fmaf is
 * many times slower). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define FMA_CLONES
#endif

typedef struct {
    PyObject_HEAD
    uint64_t seed;
    uint32_t state[MT_N];
    int next;              /* the state word to temper next; MT_N: twist first */
    int has_next_normal;   /* Box-Muller's second double, kept for the next draw */
    double next_normal;
} dpy_torch_rng;

static void mt_seed(dpy_torch_rng *g, uint64_t seed)
{
    g->seed = seed;
    g->state[0] = (uint32_t)seed; /* PyTorch seeds the twister with the low 32 bits */
    for (uint32_t j = 1; j < MT_N; j++)
        g->state[j] = 1812433253u * (g->state[j - 1] ^ (g->state[j - 1] >> 30)) + j;
    g->next = MT_N;
    g->has_next_normal = 0;
}

static void mt_twist(dpy_torch_rng *g)
{
    uint32_t *s = g->state;
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (s[i] & 0x80000000u) | (s[(i + 1) % MT_N] & 0x7fffffffu);
        s[i] = s[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    g->next = 0;
}

static uint32_t mt_word(dpy_torch_rng *g)
{
    if (g->next == MT_N)
        mt_twist(g);
    uint32_t y = g->state[g->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

static uint64_t mt_word64(dpy_torch_rng *g)
{
    uint64_t hi = mt_word(g);
    return (hi << 32) | mt_word(g);
}

static float uniform_float(dpy_torch_rng *g)
{
    return (float)(mt_word(g) & 0xffffffu) * (1.0f / 16777216.0f);
}

/* avx_mathfun's log256_ps for one lane; x in (0, 1]. */
static float cephes_log(float x)
{
    union { float f; uint32_t u; } v = {x};
    float e = (float)((int32_t)(v.u >> 23) - 0x7f) + 1.0f;
    v.u = (v.u & ~0x7f800000u) | 0x3f000000u; /* the mantissa, in [0.5, 1) */
    x = v.f;
    int below = x < 0.707106781186547524f;
    float tmp = below ? x : 0.0f;
    x -= 1.0f;
    if (below)
        e -= 1.0f;
    x += tmp;
    float z = x * x;
    float y = 7.0376836292e-2f;
    y = fmaf(y, x, -1.1514610310e-1f);
    y = fmaf(y, x, 1.1676998740e-1f);
    y = fmaf(y, x, -1.2420140846e-1f);
    y = fmaf(y, x, 1.4249322787e-1f);
    y = fmaf(y, x, -1.6668057665e-1f);
    y = fmaf(y, x, 2.0000714765e-1f);
    y = fmaf(y, x, -2.4999993993e-1f);
    y = fmaf(y, x, 3.3333331174e-1f);
    y = y * x;
    y = fmaf(y, z, e * -2.12194440e-4f);
    y = fmaf(z, -0.5f, y);
    x = x + y;
    return fmaf(e, 0.693359375f, x);
}

/* avx_mathfun's sincos256_ps for one lane; theta in [0, 2 pi). */
static void cephes_sincos(float theta, float *s, float *c)
{
    union { float f; uint32_t u; } v = {theta};
    uint32_t sign_sin = v.u & 0x80000000u;
    v.u &= 0x7fffffffu;
    float x = v.f;
    int32_t j = (int32_t)(x * 1.27323954473516f); /* 4 / pi, truncated */
    j = (j + 1) & ~1;
    float yq = (float)j;
    sign_sin ^= (uint32_t)(j & 4) << 29;
    uint32_t sign_cos = (uint32_t)(~(j - 2) & 4) << 29;
    int sine_poly_is_sin = (j & 2) == 0;
    x = fmaf(yq, -0.78515625f, x);
    x = fmaf(yq, -2.4187564849853515625e-4f, x);
    x = fmaf(yq, -3.77489497744594108e-8f, x);
    float z = x * x;
    float yc = fmaf(2.443315711809948e-5f, z, -1.388731625493765e-3f);
    yc = fmaf(yc, z, 4.166664568298827e-2f);
    yc = yc * z;
    yc = fmaf(yc, z, -(z * 0.5f));
    yc = yc + 1.0f;
    float ys = fmaf(-1.9515295891e-4f, z, 8.3321608736e-3f);
    ys = fmaf(ys, z, -1.6666654611e-1f);
    ys = ys * z;
    ys = fmaf(ys, x, x);
    union { float f; uint32_t u; } rs = {sine_poly_is_sin ? ys : yc},
                                   rc = {sine_poly_is_sin ? yc : ys};
    rs.u ^= sign_sin;
    rc.u ^= sign_cos;
    *s = rs.f;
    *c = rc.f;
}

/* One block of 16 uniforms d[0..15] to normals, in place. */
FMA_CLONES
static void normal_block16(float *d, float mean, float std)
{
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    for (int j = 0; j < 8; j++) {
        float radius = sqrtf(-2.0f * cephes_log(1.0f - d[j]));
        float s, c;
        cephes_sincos(two_pi * d[j + 8], &s, &c);
        d[j] = fmaf(radius * c, std, mean);
        d[j + 8] = fmaf(radius * s, std, mean);
    }
}

static double normal_double(dpy_torch_rng *g, double mean, double std)
{
    if (g->has_next_normal) {
        g->has_next_normal = 0;
        return g->next_normal * std + mean;
    }
    double u1 = (double)(mt_word64(g) & ((1ull << 53) - 1)) * 0x1p-53;
    double u2 = (double)(mt_word64(g) & ((1ull << 53) - 1)) * 0x1p-53;
    double r = sqrt(-2.0 * log1p(-u2));
    double theta = 2.0 * 3.14159265358979323846 * u1;
    g->next_normal = r * sin(theta);
    g->has_next_normal = 1;
    return r * cos(theta) * std + mean;
}

/* ---- the Python type: _dptrain.TorchRNG(seed) ---------------------------- */

static int64_t count_arg(PyObject *o, const char *func)
{
    long long n = PyLong_AsLongLong(o);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "TorchRNG.%s(): n must be >= 0, not %lld", func, n);
        return -1;
    }
    return n;
}

static int seed_arg(PyObject *o, uint64_t *seed)
{
    /* Any int: PyTorch keeps seeds modulo 2^64 (a negative one wraps). */
    PyObject *mask = PyLong_FromUnsignedLongLong(UINT64_MAX);
    PyObject *low = mask ? PyNumber_And(o, mask) : NULL;
    Py_XDECREF(mask);
    if (!low)
        return -1;
    *seed = PyLong_AsUnsignedLongLong(low);
    Py_DECREF(low);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *rng_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *seed_obj;
    if (!PyArg_ParseTuple(args, "O:TorchRNG", &seed_obj))
        return NULL;
    uint64_t seed;
    if (seed_arg(seed_obj, &seed) < 0)
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    dpy_torch_rng *g = (dpy_torch_rng *)alloc(type, 0);
    if (g)
        mt_seed(g, seed);
    return (PyObject *)g;
}

static PyObject *rng_manual_seed(PyObject *self, PyObject *arg)
{
    uint64_t seed;
    if (seed_arg(arg, &seed) < 0)
        return NULL;
    mt_seed((dpy_torch_rng *)self, seed);
    Py_RETURN_NONE;
}

static PyObject *rng_initial_seed(PyObject *self, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(((dpy_torch_rng *)self)->seed);
}

/* A new bytes object of n elements of `size` bytes, and its buffer. */
static PyObject *new_bytes(int64_t n, size_t size, void **buf)
{
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((size_t)n * size));
    *buf = b ? PyBytes_AsString(b) : NULL;
    return b;
}

/* out[0..n) = U[low, high): u * (to - from) + from in one rounding, as the
 * PyTorch wheel's compiler fused it, with from and to PyTorch's floats. */
FMA_CLONES
static void uniform_fill(dpy_torch_rng *g, float *out, int64_t n, double low, double high)
{
    float from = (float)low, range = (float)high - from;
    for (int64_t i = 0; i < n; i++)
        out[i] = fmaf(uniform_float(g), range, from);
}

/* out[0..n) = N(mean, std^2), as normal_(mean, std) on a contiguous float
 * tensor (torch.randn for 0 and 1). */
static void normal_fill(dpy_torch_rng *g, float *out, int64_t n, double mean, double std)
{
    if (n < 16) {
        for (int64_t i = 0; i < n; i++)
            out[i] = (float)normal_double(g, mean, std);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = uniform_float(g);
    for (int64_t i = 0; i + 16 <= n; i += 16)
        normal_block16(out + i, (float)mean, (float)std);
    if (n % 16) {
        for (int64_t i = n - 16; i < n; i++)
            out[i] = uniform_float(g);
        normal_block16(out + n - 16, (float)mean, (float)std);
    }
}

/* NAME(n, a, b) -> bytes of n float32 from fill(g, out, n, a, b). */
static PyObject *draw_floats(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             const char *name,
                             void (*fill)(dpy_torch_rng *, float *, int64_t, double, double))
{
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "TorchRNG.%s(): 3 arguments, %zd given", name,
                            nargs);
    int64_t n = count_arg(args[0], name);
    double a = PyFloat_AsDouble(args[1]), b = PyFloat_AsDouble(args[2]);
    if (n < 0 || PyErr_Occurred())
        return NULL;
    float *out;
    PyObject *bytes = new_bytes(n, sizeof(float), (void **)&out);
    if (bytes)
        fill((dpy_torch_rng *)self, out, n, a, b);
    return bytes;
}

/* uniform(n, low, high): U[low, high), as Tensor.uniform_(low, high). */
static PyObject *rng_uniform(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return draw_floats(self, args, nargs, "uniform", uniform_fill);
}

/* normal(n, mean, std): as Tensor.normal_(mean, std). */
static PyObject *rng_normal(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return draw_floats(self, args, nargs, "normal", normal_fill);
}

/* randperm(n) -> bytes of n int64, torch.randperm(n)'s order. */
static PyObject *rng_randperm(PyObject *self, PyObject *arg)
{
    int64_t n = count_arg(arg, "randperm");
    if (n < 0)
        return NULL;
    if (n >= (int64_t)(UINT32_MAX / 20))
        return PyErr_Format(PyExc_ValueError, "TorchRNG.randperm(): n = %lld is too large "
                                              "(below %u)", (long long)n, UINT32_MAX / 20);
    int64_t *r;
    PyObject *b = new_bytes(n, sizeof(int64_t), (void **)&r);
    if (!b)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        r[i] = i;
    dpy_torch_rng *g = (dpy_torch_rng *)self;
    for (int64_t i = 0; i < n - 1; i++) {
        int64_t z = (int64_t)(mt_word(g) % (uint64_t)(n - i));
        int64_t t = r[i];
        r[i] = r[z + i];
        r[z + i] = t;
    }
    return b;
}

/* random_int64() -> an int in [0, 2^63), as
 * torch.empty((), dtype=torch.int64).random_() (how the DataLoader draws
 * its seeds). */
static PyObject *rng_random_int64(PyObject *self, PyObject *unused)
{
    uint64_t w = mt_word64((dpy_torch_rng *)self);
    return PyLong_FromUnsignedLongLong(w % (1ull << 63));
}

/* get_state() / set_state(bytes): the whole generator, for
 * torch.get_rng_state()'s save and restore. */
static PyObject *rng_get_state(PyObject *self, PyObject *unused)
{
    dpy_torch_rng *g = (dpy_torch_rng *)self;
    return PyBytes_FromStringAndSize((const char *)&g->seed,
                                     (Py_ssize_t)(sizeof *g - offsetof(dpy_torch_rng, seed)));
}

static PyObject *rng_set_state(PyObject *self, PyObject *arg)
{
    dpy_torch_rng *g = (dpy_torch_rng *)self;
    size_t size = sizeof *g - offsetof(dpy_torch_rng, seed);
    char *buf;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(arg, &buf, &len) < 0)
        return NULL;
    dpy_torch_rng probe;
    if ((size_t)len == size)
        memcpy((char *)&probe + offsetof(dpy_torch_rng, seed), buf, size);
    if ((size_t)len != size || probe.next < 0 || probe.next > MT_N)
        return PyErr_Format(PyExc_ValueError, "set_state(): not a state from get_state() "
                                              "(%zd bytes, expected %zu)", len, size);
    memcpy((char *)g + offsetof(dpy_torch_rng, seed), buf, size);
    Py_RETURN_NONE;
}

static PyMethodDef rng_methods[] = {
    {"manual_seed", rng_manual_seed, METH_O, "manual_seed(seed): restart from seed"},
    {"initial_seed", rng_initial_seed, METH_NOARGS, "initial_seed() -> the seed"},
    {"uniform", DPY_FASTCALL(rng_uniform), "uniform(n, low, high) -> n float32 as bytes"},
    {"normal", DPY_FASTCALL(rng_normal), "normal(n, mean, std) -> n float32 as bytes"},
    {"randperm", rng_randperm, METH_O, "randperm(n) -> n int64 as bytes"},
    {"random_int64", rng_random_int64, METH_NOARGS, "random_int64() -> int in [0, 2^63)"},
    {"get_state", rng_get_state, METH_NOARGS, "get_state() -> bytes"},
    {"set_state", rng_set_state, METH_O, "set_state(bytes)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot rng_slots[] = {
    {Py_tp_doc, "TorchRNG(seed): PyTorch's CPU generator (Mersenne Twister) and its draws"},
    {Py_tp_new, rng_new},
    {Py_tp_methods, rng_methods},
    {0, NULL},
};

static PyType_Spec rng_spec = {
    .name = "_dptrain.TorchRNG",
    .basicsize = sizeof(dpy_torch_rng),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = rng_slots,
};

int dpy_torch_rng_add(PyObject *module)
{
    PyObject *type = PyType_FromSpec(&rng_spec);
    if (!type)
        return -1;
    int rc = PyModule_AddObject(module, "TorchRNG", type);
    if (rc < 0)
        Py_DECREF(type);
    return rc;
}
