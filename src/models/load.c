/* The model loader: what a name or a path given for a model means. One
 * table holds the kinds of model a name may name, each line how the kind
 * recognises a name or path and how it loads one; the built-in models are
 * a second table, by name. Adding a kind of model is its folder (its
 * definitions fill dp_model_def's entries) and one line in `kinds`.
 *
 * A definition must outlive its models, and a program may build models of
 * one definition from several threads: definitions are made once per
 * (name, input shape) under a lock and kept for the life of the process. */
#include "dp/nn.h"

#include "core/internal.h"
#include "core/sha256.h"
#include "nn/builtins.h"
#include "nn/sequential/sequential.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

typedef int (*def_fn)(dp_model_def *def, const int64_t *in_chw);

static const struct {
    const char *name;
    def_fn make;
} builtins[] = {
    {"lenet", dp__lenet_def}, {"resnet18", dp__resnet18_def}, {"tutorial", dp__tutorial_def}};
static const char *const builtin_names[] = {"lenet", "resnet18", "tutorial", NULL};
_Static_assert(DP_COUNTOF(builtins) + 1 == DP_COUNTOF(builtin_names), "one name per model");

/* Made definitions, newest first: a handful per process. */
typedef struct cached_def {
    dp_model_def def;
    int which;
    int64_t in_chw[3];
    struct cached_def *next;
} cached_def;

/* Definitions loaded from files. */
typedef struct loaded_def {
    dp_model_def *def;
    struct loaded_def *next;
} loaded_def;

/* Model files' SHA-256 as they were loaded, newest first: a checkpoint
 * records its model file's (dptrain.model_sha256). */
typedef struct file_hash {
    char *path;
    char hex[65];
    struct file_hash *next;
} file_hash;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cached_def *cache;
static loaded_def *loaded;
static file_hash *hashes;

const char *const *dp_model_names(void)
{
    return builtin_names;
}

static int find_builtin(const char *name)
{
    for (size_t i = 0; name && i < DP_COUNTOF(builtins); i++)
        if (strcmp(builtins[i].name, name) == 0)
            return (int)i;
    return -1;
}

int dp_model_builtin(const dp_model_def **out, const char *name, const int64_t *in_chw)
{
    static const int64_t fashion_mnist[3] = {1, 28, 28};
    const int64_t *shape = in_chw ? in_chw : fashion_mnist;
    int which = find_builtin(name);
    if (which < 0) {
        DP_ERROR("unknown model '%s' (known: lenet, resnet18, tutorial)", name ? name : "");
        return DP_EINVAL;
    }
    pthread_mutex_lock(&lock);
    cached_def *c = cache;
    while (c && (c->which != which || memcmp(c->in_chw, shape, sizeof c->in_chw) != 0))
        c = c->next;
    int rc = 0;
    if (!c) {
        c = dp__calloc(1, sizeof *c);
        rc = c ? builtins[which].make(&c->def, shape) : DP_ENOMEM;
        if (rc == 0) {
            c->which = which;
            memcpy(c->in_chw, shape, sizeof c->in_chw);
            c->next = cache;
            cache = c;
        } else {
            dp__free(c);
            c = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    if (rc == 0)
        *out = &c->def;
    return rc;
}

int dp_model_init_builtin(dp_model_t **out, const char *name, dp_device_t *dev, uint64_t seed)
{
    const dp_model_def *def;
    DP_TRY(dp_model_builtin(&def, name, NULL));
    return dp_model_init(out, def, dev, seed);
}

/* ---- the kinds of model ---------------------------------------------------- */

static bool is_builtin(const char *name)
{
    return find_builtin(name) >= 0;
}

static bool is_file(const char *path)
{
    return access(path, F_OK) == 0;
}

static bool is_onnx_file(const char *path)
{
    size_t len = strlen(path);
    return len > 5 && strcmp(path + len - 5, ".onnx") == 0 && is_file(path);
}

/* The SHA-256 of the file at `path`, read in blocks. */
static int hash_file(const char *path, char hex[65])
{
    int fd = dp__open_regular(path, NULL);
    if (fd < 0)
        return fd;
    enum { BLOCK = 1 << 16 };
    uint8_t *buf = dp__malloc(BLOCK);
    dp__sha256 s;
    dp__sha256_init(&s);
    int rc = buf ? 0 : DP_ENOMEM;
    for (ssize_t n = 1; rc == 0 && n > 0;) {
        n = read(fd, buf, BLOCK);
        if (n < 0 && errno != EINTR) {
            DP_ERROR("%s: cannot read the model file: %s", path, strerror(errno));
            rc = DP_EIO;
        } else if (n > 0) {
            dp__sha256_update(&s, buf, (size_t)n);
        }
    }
    close(fd);
    dp__free(buf);
    if (rc == 0)
        dp__sha256_hex(&s, hex);
    return rc;
}

/* Hashes a model file about to be loaded, and remembers it. */
static int remember_hash(const char *path)
{
    file_hash *h = dp__calloc(1, sizeof *h);
    if (!h || !(h->path = dp__strdup(path))) {
        dp__free(h);
        return DP_ENOMEM;
    }
    int rc = hash_file(path, h->hex);
    if (rc < 0) {
        dp__free(h->path);
        dp__free(h);
        return rc;
    }
    pthread_mutex_lock(&lock);
    h->next = hashes;
    hashes = h;
    pthread_mutex_unlock(&lock);
    return 0;
}

int dp_model_sha256(const char *path, char hex[65])
{
    if (!path || is_builtin(path)) {
        DP_ERROR("'%s' is a built-in model, not a file", path ? path : "");
        return DP_EINVAL;
    }
    pthread_mutex_lock(&lock);
    const file_hash *h = hashes;
    while (h && strcmp(h->path, path) != 0)
        h = h->next;
    if (h)
        memcpy(hex, h->hex, 65);
    pthread_mutex_unlock(&lock);
    return h ? 0 : hash_file(path, hex);
}

/* Files are parsed anew each time (their text may change between runs of
 * one program); the definition is kept like a built-in one. */
static int keep(const dp_model_def **out, dp_model_def *def)
{
    loaded_def *l = dp__calloc(1, sizeof *l);
    if (!l) {
        dp_model_def_free(def);
        return DP_ENOMEM;
    }
    l->def = def;
    pthread_mutex_lock(&lock);
    l->next = loaded;
    loaded = l;
    pthread_mutex_unlock(&lock);
    *out = def;
    return 0;
}

static int load_onnx(const dp_model_def **out, const char *path, const int64_t *in_chw)
{
    dp_model_def *def;
    DP_TRY(remember_hash(path));
    DP_TRY(dp_model_def_load_onnx(&def, path, in_chw));
    return keep(out, def);
}

static int load_sequential(const dp_model_def **out, const char *path, const int64_t *in_chw)
{
    dp_model_def *def;
    DP_TRY(remember_hash(path));
    DP_TRY(dp_sequential_load(&def, path, in_chw));
    return keep(out, def);
}

/* The first line whose kind recognises the name or path loads it. */
static const struct {
    bool (*recognises)(const char *name_or_path);
    int (*load)(const dp_model_def **out, const char *name_or_path, const int64_t *in_chw);
} kinds[] = {
    {is_builtin, dp_model_builtin}, /* lenet, resnet18, tutorial */
    {is_onnx_file, load_onnx},      /* a file ending in .onnx */
    {is_file, load_sequential},     /* any other file: nn.Sequential's modules */
};

int dp_model_def_load(const dp_model_def **out, const char *name_or_path, const int64_t *in_chw)
{
    for (size_t i = 0; name_or_path && i < DP_COUNTOF(kinds); i++)
        if (kinds[i].recognises(name_or_path))
            return kinds[i].load(out, name_or_path, in_chw);
    DP_ERROR("unknown model '%s': neither a built-in one (lenet, resnet18, tutorial) nor a "
             "file of nn.Sequential modules or an ONNX model",
             name_or_path ? name_or_path : "");
    return DP_EINVAL;
}
