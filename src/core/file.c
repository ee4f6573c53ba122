/* Opening an input file: only a regular file is read. open() of a FIFO
 * waits for a writer, forever if none comes, and a character device
 * (/dev/zero, /dev/tty) never ends or waits for a person: every reader of
 * a path from the command line or from a file (checkpoints, model files,
 * images, .npy arrays, the datasets' files) opens it here, and a path that
 * is not a regular file is refused, naming what it is, before a byte is
 * read. */
#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a plain file";
}

int dp__open_regular(const char *path, uint64_t *size)
{
    /* O_NONBLOCK: opening a FIFO returns at once; fstat then says what the
     * descriptor is, with no window in which the path could be swapped. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            DP_ERROR("%s: no such file", path);
            return DP_ENOENT;
        }
        DP_ERROR("%s: cannot open: %s", path, strerror(e));
        return DP_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        DP_ERROR("%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return DP_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        DP_ERROR("%s: not a regular file (%s)", path, kind_of(st.st_mode));
        close(fd);
        return DP_EIO;
    }
    /* Regular files ignore O_NONBLOCK; cleared all the same, so that the
     * descriptor reads as any other (gzdopen, fdopen). */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    if (size)
        *size = (uint64_t)st.st_size;
    return fd;
}
