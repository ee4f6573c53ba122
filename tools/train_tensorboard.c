/* dptrain train's --tensorboard DIR: TensorBoard event files, as
 * torch.utils.tensorboard's SummaryWriter(log_dir=DIR) writes them. */
#include "cli.h"

#include "dp/dp.h"

#include <string.h>

const char cli_train_tensorboard_help[] =
    "  --tensorboard DIR    write TensorBoard event files to DIR (made if\n"
    "                       missing): train/loss and train/lr every step,\n"
    "                       the epoch's train loss and accuracy, samples/s\n"
    "                       and test/accuracy at its last step [none]\n";

const char *const cli_train_tensorboard_flags[] = {"--tensorboard", NULL};

int cli_train_tensorboard_flag(const char *f, const char *v, dp_train_options *o)
{
    if (strcmp(f, "--tensorboard") != 0)
        return -1;
    if (!v[0])
        return cli_bad_value(f, v, "expected a directory");
    o->tensorboard_dir = v;
    return 0;
}
