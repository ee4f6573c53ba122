/* Fashion-MNIST: the IDX image set (data/idx_dataset.c) that Debian
 * installs, and its class names. */
#include "data/dataset.h"

#include "core/internal.h"

/* Class names in label order, as d2l's get_fashion_mnist_labels. */
static const char *const label_names[] = {
    "t-shirt", "trouser", "pullover", "dress", "coat",
    "sandal",  "shirt",   "sneaker",  "bag",   "ankle boot",
};
#define NUM_CLASSES 10
_Static_assert(DP_COUNTOF(label_names) == NUM_CLASSES, "one name per class");

const char *dp_fashion_mnist_label(int label)
{
    if (label < 0 || label >= NUM_CLASSES)
        return "unknown";
    return label_names[label];
}

const char *const *dp__fashion_mnist_names(void)
{
    return label_names;
}

int dp_fashion_mnist_load(const char *dir, bool train, dp_dataset *out)
{
    return dp__idx_dataset_load(dir ? dir : DP_FASHION_MNIST_DIR, train, NULL, out);
}
