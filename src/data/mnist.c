/* MNIST: the same IDX files as Fashion-MNIST (data/idx_dataset.c), which
 * no package installs: the directory is the caller's, and a missing file
 * says where the files are. */
#include "data/dataset.h"

#include "core/internal.h"

#include <string.h>

#define MNIST_WHERE                                                                                \
    "MNIST is at https://yann.lecun.com/exdb/mnist/ or the ossci-datasets mirror "                 \
    "https://ossci-datasets.s3.amazonaws.com/mnist/"

const char dp__mnist_where[] = MNIST_WHERE;

int dp_mnist_load(const char *dir, bool train, dp_dataset *out)
{
    DP_ASSERT(out);
    memset(out, 0, sizeof *out);
    DP_TRY(dp__data_require_dir(dir, "MNIST", MNIST_WHERE));
    return dp__idx_dataset_load(dir, train, MNIST_WHERE, out);
}
