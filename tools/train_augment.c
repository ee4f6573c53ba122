/* dptrain train's augmentation flags: --augment (torchvision's RandomCrop
 * with padding and RandomHorizontalFlip) and --normalize (Normalize). */
#include "cli.h"

#include "dp/dp.h"

#include <string.h>

const char cli_train_augment_help[] =
    "  --augment LIST       training images only: crop:PAD (RandomCrop(size,\n"
    "                       padding=PAD), zero padding) and/or flip\n"
    "                       (RandomHorizontalFlip()), e.g. crop:4,flip [none]\n"
    "  --normalize M,..,S,..\n"
    "                       (x - mean) / std per channel, training and test\n"
    "                       images: the means, then the stds, e.g.\n"
    "                       0.2860,0.3530 (Fashion-MNIST) [none]\n";

const char *const cli_train_augment_flags[] = {"--augment", "--normalize", NULL};

int cli_train_augment_flag(const char *f, const char *v, dp_train_options *o)
{
    if (strcmp(f, "--augment") == 0) {
        if (dp_augment_parse(v, &o->augment) < 0)
            return cli_bad_value(f, v,
                                 "expected crop:PAD (1 to 1024) and/or flip, comma-separated, "
                                 "e.g. crop:4,flip; or none");
        return 0;
    }
    if (strcmp(f, "--normalize") == 0) {
        if (dp_normalize_parse(v, &o->augment) < 0)
            return cli_bad_value(f, v,
                                 "expected one mean per channel, then one std (> 0) per "
                                 "channel, e.g. 0.2860,0.3530 or "
                                 "0.4914,0.4822,0.4465,0.2470,0.2435,0.2616");
        return 0;
    }
    return -1;
}
