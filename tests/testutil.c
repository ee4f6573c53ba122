#include "testutil.h"

#include "dp/core.h"
#include "dp/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
