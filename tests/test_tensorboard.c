/* TensorBoard event files (src/io/tensorboard.c): the
 * CRC32C that ISA-L computes against the standard check values, the
 * TFRecord framing and the Event encoding byte for byte against what
 * TensorBoard's own Python writer made of the same events, the file a
 * writer leaves (every record's lengths and CRCs, each Event read back by
 * protobuf-c) and the directory check. */
#include "testutil.h"

#include "dp/dp.h"
#include "io/tensorboard.h"
#include "tensorboard.pb-c.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* "0a1b..." into bytes; returns their count. */
static size_t unhex(const char *hex, uint8_t *out)
{
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

static void crc32c_check_values(void **state)
{
    (void)state;
    /* The CRC catalogue's check value, and RFC 3720's (iSCSI) vectors. */
    assert_int_equal(dp__crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(dp__crc32c("", 0), 0);
    uint8_t buf[32];
    memset(buf, 0, sizeof buf);
    assert_int_equal(dp__crc32c(buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof buf);
    assert_int_equal(dp__crc32c(buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(dp__crc32c(buf, 32), 0x46DD794Eu);
    printf("CRC32C(\"123456789\") = 0x%08X\n", dp__crc32c("123456789", 9));
}

/* What tensorboard 2.21's RecordWriter wrote for event_pb2.Event(...)
 * .SerializeToString(): the serialized Event, then its record. */
static const char *const ref_version_event = "09000000000000f83f1a0d627261696e2e4576656e743a32";
static const char *const ref_version_record = "1800000000000000a37f4b2209000000000000f83f1a0d6272"
                                              "61696e2e4576656e743a322a28646c";
static const char *const ref_scalar_event =
    "09000000000000f83f10032a130a110a0a747261696e2f6c6f73731500001040";
static const char *const ref_scalar_record =
    "200000000000000029eda95009000000000000f83f10032a130a110a0a747261696e2f6c6f7373150000"
    "10407e61bfd1";

static void frames_as_tensorboard_does(void **state)
{
    (void)state;
    uint8_t data[64], want[96], got[96];
    size_t n = unhex(ref_version_event, data);
    assert_int_equal(unhex(ref_version_record, want), n + 16);
    dp__tb_frame(data, n, got);
    assert_memory_equal(got, want, n + 16);
    n = unhex(ref_scalar_event, data);
    assert_int_equal(unhex(ref_scalar_record, want), n + 16);
    dp__tb_frame(data, n, got);
    assert_memory_equal(got, want, n + 16);
}

static void encodes_as_tensorboard_does(void **state)
{
    (void)state;
    /* Event(wall_time=1.5, step=3, summary=Summary(value=[Value(tag="train/loss",
     * simple_value=2.25)])) */
    uint8_t want[64], got[64];
    size_t n = unhex(ref_scalar_event, want);
    const char *tag[] = {"train/loss"};
    float v[] = {2.25f};
    assert_int_equal(dp__tb_encode_scalars(1.5, 3, 1, tag, v, NULL, 0), n);
    assert_int_equal(dp__tb_encode_scalars(1.5, 3, 1, tag, v, got, sizeof got), n);
    assert_memory_equal(got, want, n);
    const char *empty[] = {""};
    assert_int_equal(dp__tb_encode_scalars(1.5, 3, 1, empty, v, got, sizeof got), 0);
    assert_int_equal(dp__tb_encode_scalars(1.5, 3, 0, tag, v, got, sizeof got), 0);
}

/* Every record of an event file, its length's and data's CRCs checked, as
 * protobuf-c reads its Event; returns their count (at most max). */
static int read_events(const char *path, DpTb__Event **ev, int max)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t head[12];
    int n = 0;
    while (fread(head, 1, 12, f) == 12) {
        uint64_t len = 0;
        uint32_t crc = 0;
        for (int i = 7; i >= 0; i--)
            len = len << 8 | head[i];
        for (int i = 11; i >= 8; i--)
            crc = crc << 8 | head[i];
        assert_int_equal(crc, dp__tb_masked_crc(dp__crc32c(head, 8)));
        assert_true(len < 4096 && n < max);
        uint8_t data[4096 + 4];
        assert_int_equal(fread(data, 1, len + 4, f), len + 4);
        crc = (uint32_t)data[len] | (uint32_t)data[len + 1] << 8 | (uint32_t)data[len + 2] << 16 |
              (uint32_t)data[len + 3] << 24;
        assert_int_equal(crc, dp__tb_masked_crc(dp__crc32c(data, len)));
        ev[n] = dp_tb__event__unpack(NULL, len, data);
        assert_non_null(ev[n]);
        n++;
    }
    assert_true(feof(f));
    fclose(f);
    return n;
}

static void free_events(DpTb__Event **ev, int n)
{
    for (int i = 0; i < n; i++)
        dp_tb__event__free_unpacked(ev[i], NULL);
}

/* The event files in dir, sorted by name (TensorBoard's order): up to 4. */
static int event_files(const char *dir, char names[4][512])
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0) {
            assert_true(n < 4);
            snprintf(names[n++], 512, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, 512, (int (*)(const void *, const void *))strcmp);
    return n;
}

static void writer_leaves_whole_records(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/runs/a", tu_tmp); /* runs/ is made too */
    dp__tb_writer *w;
    assert_int_equal(dp__tb_open(&w, dir), 0);
    char host[256] = "";
    gethostname(host, sizeof host);
    const char *name = strrchr(dp__tb_path(w), '/') + 1;
    long long when;
    char rest[300];
    assert_int_equal(sscanf(name, "events.out.tfevents.%10lld.%299s", &when, rest), 2);
    printf("%s\n", dp__tb_path(w));
    assert_true(llabs(when - (long long)time(NULL)) < 60);
    assert_true(strncmp(rest, host, strlen(host)) == 0 && rest[strlen(host)] == '.');
    const char *tags[] = {"train/loss", "train/lr"};
    for (int step = 1; step <= 3; step++)
        assert_int_equal(dp__tb_scalars(w, step, 2, tags, (float[]){2.5f / step, 0.1f}), 0);
    assert_int_equal(dp__tb_start(w, 3), 0);
    assert_int_equal(dp__tb_scalars(w, 3, 1, tags, (float[]){7}), 0);
    assert_int_equal(dp__tb_sync(w), 0);
    const char *bad[] = {NULL};
    tu_quiet_log();
    assert_int_equal(dp__tb_scalars(w, 4, 1, bad, (float[]){1}), DP_EINVAL);
    char names[4][512];
    assert_int_equal(event_files(dir, names), 1);

    /* Read while the writer is open: every record is in the file. */
    DpTb__Event *ev[16];
    int n = read_events(names[0], ev, 16);
    assert_int_equal(n, 6);
    assert_int_equal(ev[0]->what_case, DP_TB__EVENT__WHAT_FILE_VERSION);
    assert_string_equal(ev[0]->file_version, "brain.Event:2");
    assert_true(fabs(ev[0]->wall_time - (double)time(NULL)) < 60);
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(ev[i]->what_case, DP_TB__EVENT__WHAT_SUMMARY);
        assert_int_equal(ev[i]->step, i);
        assert_true(ev[i]->wall_time >= ev[i - 1]->wall_time);
        assert_int_equal(ev[i]->summary->n_value, 2);
        assert_string_equal(ev[i]->summary->value[0]->tag, "train/loss");
        assert_true(ev[i]->summary->value[0]->simple_value == 2.5f / i);
        assert_string_equal(ev[i]->summary->value[1]->tag, "train/lr");
        assert_true(ev[i]->summary->value[1]->simple_value == 0.1f);
    }
    assert_int_equal(ev[4]->what_case, DP_TB__EVENT__WHAT_SESSION_LOG);
    assert_int_equal(ev[4]->session_log->status, DP_TB__SESSION_LOG__SESSION_STATUS__START);
    assert_int_equal(ev[4]->step, 3);
    assert_true(ev[5]->summary->value[0]->simple_value == 7);
    free_events(ev, n);
    assert_int_equal(dp__tb_close(w), 0);

    /* A second writer in the same second gets a file of its own. */
    assert_int_equal(dp__tb_open(&w, dir), 0);
    assert_int_equal(dp__tb_close(w), 0);
    assert_int_equal(event_files(dir, names), 2);
}

static void check_dir_leaves_nothing(void **state)
{
    (void)state;
    struct stat st;
    char dir[1024], file[512];
    snprintf(dir, sizeof dir, "%s/new/deeper", tu_tmp);
    assert_int_equal(dp__tb_check_dir(dir), 0);
    snprintf(file, sizeof file, "%s/new", tu_tmp);
    assert_int_equal(stat(file, &st), -1); /* made, probed and removed */

    snprintf(file, sizeof file, "%s/a_file", tu_tmp);
    assert_int_equal(tu_write_file(file, "x", 1), 0);
    tu_quiet_log();
    assert_int_equal(dp__tb_check_dir(file), DP_EIO);
    tu_assert_error_mentions("it is not a directory");
    snprintf(dir, sizeof dir, "%s/sub", file);
    assert_int_equal(dp__tb_check_dir(dir), DP_EIO);
    tu_assert_error_mentions("Not a directory");
    assert_int_equal(dp__tb_check_dir("/proc/dptrain-tb"), DP_EIO);
    tu_assert_error_mentions("/proc/dptrain-tb");
    printf("refused: %s\n", dp_last_error());
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc32c_check_values),
        cmocka_unit_test(frames_as_tensorboard_does),
        cmocka_unit_test(encodes_as_tensorboard_does),
        cmocka_unit_test_setup_teardown(writer_leaves_whole_records, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(check_dir_leaves_nothing, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
