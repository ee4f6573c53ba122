/* TensorBoard event files (tensorboard.h): the Event messages are encoded
 * by protobuf-c from tensorboard.proto, the TFRecord's CRC32C is ISA-L's;
 * what is left here is the framing and the file. */
#include "io/tensorboard.h"

#include "core/internal.h"
#include "tensorboard.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <limits.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The most scalars one Event carries (a step's, an epoch's). */
#define TB_MAX_VALUES 16

struct dp__tb_writer {
    int fd;
    char *path;
    int write_errno; /* the first failed write's errno; 0 while all went well */
};

uint32_t dp__crc32c(const void *p, size_t n)
{
    /* crc32_iscsi leaves the standard CRC32C's initial and final inversion
     * to its caller: it is ~crc32_iscsi(p, n, ~0). It only reads the
     * buffer, though its prototype does not say so, and takes an int
     * length, so longer buffers go in pieces (the state carries over). */
    const unsigned char *c = p;
    unsigned int crc = 0xffffffffu;
    while (n > 0) {
        int piece = n > INT_MAX ? INT_MAX : (int)n;
        crc = crc32_iscsi((unsigned char *)c, piece, crc);
        c += piece;
        n -= (size_t)piece;
    }
    return ~crc;
}

uint32_t dp__tb_masked_crc(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

void dp__tb_frame(const void *data, size_t n, uint8_t *out)
{
    put_le(out, n, 8);
    put_le(out + 8, dp__tb_masked_crc(dp__crc32c(out, 8)), 4);
    memmove(out + 12, data, n); /* data may already be there */
    put_le(out + 12 + n, dp__tb_masked_crc(dp__crc32c(out + 12, n)), 4);
}

static size_t pack_event(const DpTb__Event *e, uint8_t *out, size_t size)
{
    size_t len = dp_tb__event__get_packed_size(e);
    if (out && len <= size)
        dp_tb__event__pack(e, out);
    return len;
}

/* An Event of scalars, its parts beside it (never moved once built). */
typedef struct scalars_event {
    DpTb__Summary__Value v[TB_MAX_VALUES], *vp[TB_MAX_VALUES];
    DpTb__Summary s;
    DpTb__Event e;
} scalars_event;

/* false when n is out of range or a tag is NULL or empty. */
static bool build_scalars(scalars_event *m, double wall_time, int64_t step, int n,
                          const char *const *tags, const float *values)
{
    if (n <= 0 || n > TB_MAX_VALUES)
        return false;
    for (int i = 0; i < n; i++) {
        if (!tags[i] || !tags[i][0])
            return false;
        dp_tb__summary__value__init(&m->v[i]);
        m->v[i].tag = (char *)tags[i]; /* only read by the packer */
        m->v[i].value_case = DP_TB__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        m->v[i].simple_value = values[i];
        m->vp[i] = &m->v[i];
    }
    dp_tb__summary__init(&m->s);
    m->s.n_value = (size_t)n;
    m->s.value = m->vp;
    dp_tb__event__init(&m->e);
    m->e.wall_time = wall_time;
    m->e.step = step;
    m->e.what_case = DP_TB__EVENT__WHAT_SUMMARY;
    m->e.summary = &m->s;
    return true;
}

size_t dp__tb_encode_scalars(double wall_time, int64_t step, int n, const char *const *tags,
                             const float *values, uint8_t *out, size_t size)
{
    scalars_event m;
    return build_scalars(&m, wall_time, step, n, tags, values) ? pack_event(&m.e, out, size) : 0;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int check_write(dp__tb_writer *w, int failed)
{
    if (failed && w->write_errno == 0)
        w->write_errno = errno ? errno : EIO;
    if (w->write_errno) {
        DP_ERROR("cannot write the TensorBoard event file %s: %s", w->path,
                 strerror(w->write_errno));
        return DP_EIO;
    }
    return 0;
}

/* The record of an Event, in one write(2): whole in the file or, when the
 * process dies in between, not begun (a regular file's write is not cut
 * by a signal). */
static int write_event(dp__tb_writer *w, const DpTb__Event *e)
{
    DP_TRY(check_write(w, 0));
    size_t len = pack_event(e, NULL, 0);
    uint8_t *buf = dp__malloc(len + 16);
    if (!buf)
        return DP_ENOMEM;
    pack_event(e, buf + 12, len);
    dp__tb_frame(buf + 12, len, buf);
    size_t done = 0;
    int failed = 0;
    while (done < len + 16) {
        ssize_t k = write(w->fd, buf + done, len + 16 - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            failed = 1;
            break;
        }
        done += (size_t)k;
    }
    dp__free(buf);
    return check_write(w, failed);
}

/* Makes `dir` and its missing parents; *made (when not NULL) gets how many
 * of its trailing components were made here. */
static int make_dirs(const char *dir, int *made)
{
    char *p = dp__strdup(dir);
    if (!p)
        return DP_ENOMEM;
    int count = 0, rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0777) == 0) {
            count++;
        } else if (errno != EEXIST) {
            DP_ERROR("cannot write TensorBoard events in %s: cannot make %s: %s", dir, p,
                     strerror(errno));
            rc = DP_EIO;
        }
        *s = c;
        if (c == '\0' || rc)
            break;
    }
    dp__free(p);
    struct stat st;
    if (rc == 0 && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        DP_ERROR("cannot write TensorBoard events in %s: it is not a directory", dir);
        rc = DP_EIO;
    }
    if (made)
        *made = count;
    return rc;
}

/* Removes the last `n` components of `dir`, deepest first. */
static void remove_dirs(const char *dir, int n)
{
    char *p = dp__strdup(dir);
    if (!p)
        return;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(p);
        while (len > 1 && p[len - 1] == '/')
            p[--len] = '\0';
        rmdir(p);
        char *slash = strrchr(p, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    dp__free(p);
}

int dp__tb_check_dir(const char *dir)
{
    if (!dir || !dir[0]) {
        DP_ERROR("dp__tb_check_dir: no directory");
        return DP_EINVAL;
    }
    int made = 0;
    int rc = make_dirs(dir, &made);
    if (rc == 0) {
        size_t size = strlen(dir) + 64;
        char *probe = dp__malloc(size);
        if (!probe) {
            rc = DP_ENOMEM;
        } else {
            snprintf(probe, size, "%s/events.out.tfevents.check.%d", dir, (int)getpid());
            int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0) {
                DP_ERROR("cannot write TensorBoard events in %s: %s", dir, strerror(errno));
                rc = DP_EIO;
            } else {
                close(fd);
                unlink(probe);
            }
            dp__free(probe);
        }
    }
    remove_dirs(dir, made);
    return rc;
}

/* Numbers the files one process opens, as SummaryWriter's name does: two
 * runs in one second of one process get files of their own. */
static atomic_int files_opened;

int dp__tb_open(dp__tb_writer **out, const char *dir)
{
    if (!out || !dir || !dir[0]) {
        DP_ERROR("dp__tb_open: no directory");
        return DP_EINVAL;
    }
    *out = NULL;
    DP_TRY(make_dirs(dir, NULL));
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0 || !host[0])
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    dp__tb_writer *w = dp__calloc(1, sizeof *w);
    size_t size = strlen(dir) + strlen(host) + 96;
    if (!w || !(w->path = dp__malloc(size))) {
        dp__free(w);
        return DP_ENOMEM;
    }
    double now = wall_now();
    snprintf(w->path, size, "%s/events.out.tfevents.%010lld.%s.%d.%d", dir, (long long)now, host,
             (int)getpid(), atomic_fetch_add(&files_opened, 1));
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        DP_ERROR("cannot create the TensorBoard event file %s: %s", w->path, strerror(errno));
        dp__free(w->path);
        dp__free(w);
        return DP_EIO;
    }
    *out = w;
    DpTb__Event e = DP_TB__EVENT__INIT;
    e.wall_time = now;
    e.what_case = DP_TB__EVENT__WHAT_FILE_VERSION;
    e.file_version = "brain.Event:2";
    return write_event(w, &e);
}

const char *dp__tb_path(const dp__tb_writer *w)
{
    return w->path;
}

int dp__tb_scalars(dp__tb_writer *w, int64_t step, int n, const char *const *tags,
                   const float *values)
{
    scalars_event m;
    if (!build_scalars(&m, wall_now(), step, n, tags, values)) {
        DP_ERROR("dp__tb_scalars: %d scalars: want 1 to %d, each with a tag", n, TB_MAX_VALUES);
        return DP_EINVAL;
    }
    return write_event(w, &m.e);
}

int dp__tb_start(dp__tb_writer *w, int64_t step)
{
    DpTb__SessionLog log = DP_TB__SESSION_LOG__INIT;
    log.status = DP_TB__SESSION_LOG__SESSION_STATUS__START;
    DpTb__Event e = DP_TB__EVENT__INIT;
    e.wall_time = wall_now();
    e.step = step;
    e.what_case = DP_TB__EVENT__WHAT_SESSION_LOG;
    e.session_log = &log;
    return write_event(w, &e);
}

int dp__tb_sync(dp__tb_writer *w)
{
    DP_TRY(check_write(w, 0));
    /* EINVAL: a file that cannot be synced (a pipe, /dev/null); nothing to wait for. */
    return check_write(w, fsync(w->fd) != 0 && errno != EINVAL);
}

int dp__tb_close(dp__tb_writer *w)
{
    if (!w)
        return 0;
    int rc = dp__tb_sync(w);
    if (close(w->fd) != 0 && rc == 0)
        rc = check_write(w, 1);
    dp__free(w->path);
    dp__free(w);
    return rc;
}
