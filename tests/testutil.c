#include "testutil.h"

#include "dp/core.h"
#include "dp/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

char *tu_tempdir(const char *name)
{
    char *path = malloc(strlen(name) + 32);
    sprintf(path, "tmp_%s_%d", name, (int)getpid());
    mkdir(path, 0755);
    return path;
}

int tu_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

bool tu_have_fashion_mnist(void)
{
    return access(DP_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0 &&
           access(DP_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) == 0;
}

static void quiet(dp_log_level level, const char *msg, void *user)
{
    (void)level, (void)msg, (void)user;
}

void tu_quiet_log(void)
{
    dp_log_set(quiet, NULL);
}

char *tu_tmp;

int tu_setup_tmp(void **state)
{
    (void)state;
    tu_tmp = tu_tempdir("test");
    return tu_tmp ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int tu_teardown_tmp(void **state)
{
    (void)state;
    nftw(tu_tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(tu_tmp);
    tu_tmp = NULL;
    return 0;
}

const char *tu_tmp_path(const char *name)
{
    static char buf[2][512];
    static int which;
    which ^= 1;
    snprintf(buf[which], sizeof buf[which], "%s/%s", tu_tmp, name);
    return buf[which];
}
