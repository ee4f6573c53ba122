/* The built-in models by name, dp_model_def_load (a name or a file) and
 * the input shape a loaded ONNX model declares.
 *
 * A definition must outlive its models, and a program may build models of
 * one definition from several threads: definitions are made once per
 * (name, input shape) under a lock and kept for the life of the process. */
#include "nn/model.h"

#include "core/internal.h"
#include "nn/sequential.h"

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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cached_def *cache;
static loaded_def *loaded;

const char *const *dp_model_names(void)
{
    return builtin_names;
}

static int find_builtin(const char *name)
{
    for (size_t i = 0; i < DP_COUNTOF(builtins); i++)
        if (strcmp(builtins[i].name, name) == 0)
            return (int)i;
    return -1;
}

int dp_model_builtin(const dp_model_def **out, const char *name, const int64_t *in_chw)
{
    static const int64_t fashion_mnist[3] = {1, 28, 28};
    const int64_t *shape = in_chw ? in_chw : fashion_mnist;
    int which = name ? find_builtin(name) : -1;
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

int dp_model_def_load(const dp_model_def **out, const char *name_or_path, const int64_t *in_chw)
{
    if (name_or_path && find_builtin(name_or_path) >= 0)
        return dp_model_builtin(out, name_or_path, in_chw);
    if (!name_or_path || access(name_or_path, F_OK) != 0) {
        DP_ERROR("unknown model '%s': neither a built-in one (lenet, resnet18, tutorial) nor a "
                 "file of nn.Sequential modules or an ONNX model",
                 name_or_path ? name_or_path : "");
        return DP_EINVAL;
    }
    /* Files are parsed anew each time (their text may change between runs of
     * one program); the definition is kept like a built-in one. */
    loaded_def *l = dp__calloc(1, sizeof *l);
    if (!l)
        return DP_ENOMEM;
    size_t len = strlen(name_or_path);
    int rc = len > 5 && strcmp(name_or_path + len - 5, ".onnx") == 0
                 ? dp_model_def_load_onnx(&l->def, name_or_path, in_chw)
                 : dp_sequential_load(&l->def, name_or_path, in_chw);
    if (rc < 0) {
        dp__free(l);
        return rc;
    }
    pthread_mutex_lock(&lock);
    l->next = loaded;
    loaded = l;
    pthread_mutex_unlock(&lock);
    *out = l->def;
    return 0;
}
