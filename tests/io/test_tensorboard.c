/* TensorBoard event files (src/io/tensorboard.c, src/train/board.c): the
 * CRC32C that ISA-L computes against the standard check values, the
 * TFRecord framing and the Event encoding byte for byte against what
 * TensorBoard's own Python writer made of the same events, the file a
 * writer leaves (every record's lengths and CRCs, each Event read back by
 * protobuf-c), the directory check, and a run's events against its
 * --metrics file: every step's loss and lr, every epoch's figures, and
 * the START event of a resumed run. tests/train/cli_tensorboard.sh reads the
 * files with TensorBoard's EventAccumulator. */
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
    tu_assert_close(ev[0]->wall_time, (double)time(NULL), 0, 60);
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

/* The value of `tag` at `step` among ev[0..n), NAN if none; *count gets
 * how many there are. */
static double scalar_at(DpTb__Event **ev, int n, const char *tag, int64_t step, int *count)
{
    double v = NAN;
    *count = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i]->what_case != DP_TB__EVENT__WHAT_SUMMARY || ev[i]->step != step)
            continue;
        for (size_t k = 0; k < ev[i]->summary->n_value; k++) {
            if (strcmp(ev[i]->summary->value[k]->tag, tag) == 0) {
                v = ev[i]->summary->value[k]->simple_value;
                (*count)++;
            }
        }
    }
    return v;
}

/* Every step line and epoch line of `metrics` against the events. */
static void compare_with_metrics(const char *metrics, DpTb__Event **ev, int n, int64_t batches,
                                 int *steps, int *epochs)
{
    FILE *f = fopen(metrics, "r");
    assert_non_null(f);
    char line[4096];
    int c;
    *steps = *epochs = 0;
    while (fgets(line, sizeof line, f)) {
        long long step;
        int epoch;
        double loss, lr, train_loss, train_acc, test_acc;
        if (sscanf(line, "{\"step\": %lld, \"epoch\": %d, \"loss\": %lf, \"lr\": %lf", &step,
                   &epoch, &loss, &lr) == 4) {
            /* Near ln 10 in these first steps: the mean over the batch's
             * rows, 24 in each epoch's last. */
            if (!(loss > 2.0 && loss < 2.6))
                fail_msg("step %lld: loss %g, not near ln 10 = 2.303", step, loss);
            tu_assert_close(scalar_at(ev, n, "train/loss", step, &c), loss, 1e-6, 1e-6);
            assert_int_equal(c, 1);
            tu_assert_close(scalar_at(ev, n, "train/lr", step, &c), lr, 1e-7, 0);
            assert_int_equal(c, 1);
            (*steps)++;
        } else if (sscanf(line,
                          "{\"epoch\": %d, \"train_loss\": %lf, \"train_acc\": %lf, "
                          "\"test_acc\": %lf",
                          &epoch, &train_loss, &train_acc, &test_acc) == 4) {
            step = epoch * batches;
            tu_assert_close(scalar_at(ev, n, "train/epoch_loss", step, &c), train_loss, 1e-6, 1e-6);
            tu_assert_close(scalar_at(ev, n, "train/epoch_accuracy", step, &c), train_acc, 0, 1e-4);
            tu_assert_close(scalar_at(ev, n, "test/accuracy", step, &c), test_acc, 0, 1e-4);
            assert_true(scalar_at(ev, n, "test/loss", step, &c) > 0 && c == 1);
            assert_true(scalar_at(ev, n, "test/top5_accuracy", step, &c) >= test_acc && c == 1);
            assert_true(scalar_at(ev, n, "train/samples_per_second", step, &c) > 0);
            assert_int_equal(c, 1);
            (*epochs)++;
        }
    }
    fclose(f);
}

static void run_writes_every_step(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    char dir[512], metrics[512], ck[512];
    snprintf(dir, sizeof dir, "%s/tb", tu_tmp);
    snprintf(metrics, sizeof metrics, "%s/m.jsonl", tu_tmp);
    snprintf(ck, sizeof ck, "%s/ck.safetensors", tu_tmp);
    dp_train_options o;
    dp_train_options_default(&o);
    o.data.limit_train = 600; /* 10 batches of 64, the last of 24 */
    o.data.limit_test = 200;
    o.data.batch_size = 64;
    o.optim.lr = 0.05f;
    o.schedule.lr_schedule = DP_LR_COSINE;
    o.run.epochs = 1;
    o.parallel.devices = "2";
    o.parallel.threads = 1;
    o.output.metrics_path = metrics;
    o.output.log_steps = true;
    o.checkpoint.checkpoint_path = ck;
    o.output.tensorboard_dir = dir;
    dp_train_result r;
    assert_int_equal(dp_train(&o, &r), 0);
    /* One more epoch from the checkpoint: a second file, which starts by
     * telling TensorBoard to forget steps from 11 on. */
    o.run.epochs = 2;
    o.checkpoint.resume_path = ck;
    assert_int_equal(dp_train(&o, &r), 0);
    char names[4][512];
    assert_int_equal(event_files(dir, names), 2);
    DpTb__Event *ev[128];
    int n0 = read_events(names[0], ev, 128);
    int n = n0 + read_events(names[1], ev + n0, 128 - n0);
    assert_int_equal(ev[n0]->what_case, DP_TB__EVENT__WHAT_FILE_VERSION);
    assert_int_equal(ev[n0 + 1]->what_case, DP_TB__EVENT__WHAT_SESSION_LOG);
    assert_int_equal(ev[n0 + 1]->session_log->status, DP_TB__SESSION_LOG__SESSION_STATUS__START);
    assert_int_equal(ev[n0 + 1]->step, 11);
    int steps, epochs;
    compare_with_metrics(metrics, ev, n, 10, &steps, &epochs);
    printf("%d events in 2 files: every one of %d steps and %d epochs as in --metrics\n", n, steps,
           epochs);
    assert_int_equal(steps, 20);
    assert_int_equal(epochs, 2);
    /* 2 file versions, a START, 20 steps and 2 epochs: nothing else. */
    assert_int_equal(n, 25);
    free_events(ev, n);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc32c_check_values),
        cmocka_unit_test(frames_as_tensorboard_does),
        cmocka_unit_test(encodes_as_tensorboard_does),
        cmocka_unit_test_setup_teardown(writer_leaves_whole_records, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(check_dir_leaves_nothing, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(run_writes_every_step, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
