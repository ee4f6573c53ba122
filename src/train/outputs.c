/* The files a run writes, checked before its first step: a checkpoint, a
 * metrics file, a plot or a TensorBoard directory that cannot be written
 * fails the run at once with one line naming the path and why, not after
 * an epoch of work. Each check does what the write will do: it creates the
 * file (the checkpoint's temporary file, a TensorBoard directory and a file
 * in it) where it will be written, and removes what it created. */
#include "train/trainer.h"

#include "core/internal.h"
#include "dp/safetensors.h"
#include "dp/train_util.h"
#include "io/tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dp_check_output_file(const char *path, const char *what)
{
    if (!path || !path[0] || !what) {
        DP_ERROR("dp_check_output_file: no path or no description");
        return DP_EINVAL;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DP_ERROR("cannot write the %s %s: it is a directory", what, path);
        return DP_EIO;
    }
    /* A file that is there is opened for writing, not truncated: the run
     * replaces (or appends to) it later, and only if it gets that far. */
    bool created = true;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
        created = false;
        fd = open(path, O_WRONLY | O_CLOEXEC);
    }
    if (fd < 0) {
        DP_ERROR("cannot write the %s %s: %s", what, path, strerror(errno));
        return DP_EIO;
    }
    close(fd);
    if (created)
        unlink(path);
    return 0;
}

static int check_outputs(const dp_train_options *o)
{
    if (o->checkpoint.checkpoint_path)
        DP_TRY(dp_safetensors_check_writable(o->checkpoint.checkpoint_path));
    if (o->output.metrics_path)
        DP_TRY(dp_check_output_file(o->output.metrics_path, "metrics file"));
    if (o->output.plot_path)
        DP_TRY(dp_check_output_file(o->output.plot_path, "plot"));
    if (o->checkpoint.save_best_path)
        DP_TRY(dp_safetensors_check_writable(o->checkpoint.save_best_path));
    if (o->output.tensorboard_dir)
        DP_TRY(dp__tb_check_dir(o->output.tensorboard_dir));
    return 0;
}

int dp__train_check_outputs(const dp_train_options *o)
{
    /* A stop signal that ends the process here (dp_train_stops_between_steps)
     * would leave a probe's file behind: it waits for the probes, on the
     * one thread a run has this early. */
    sigset_t stops, was;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stops, &was);
    int rc = check_outputs(o);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return rc;
}
