/* A checkpoint is data from elsewhere (issue 36): its metadata may name a
 * built-in model but never a file for a run to read, a model file's
 * checkpoint loads where the run names that file or a copy of it (the
 * SHA-256 it recorded, as FIPS 180-4 computes it), dptrain.classes must be
 * an array of strings for eval as for predict, and the header is read
 * before a model is built. Each refusal: one line naming the checkpoint, a
 * non-zero exit, within 1 s and 64 MB over the program's rest
 * (reliabilityutil.c's hostile runs). */
#include "reliabilityutil.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the SHA-256 a checkpoint records of its model file -------------------- */

/* FIPS 180-4's examples (appendix B) and a megabyte against coreutils'
 * sha256sum: what dp_model_sha256 writes for the file. */
static void sha256_as_the_standard_gives_it(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t repeat;
        const char *digest;
    } cases[] = {
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    char path[512], hex[65];
    snprintf(path, sizeof path, "%s", tu_tmp_path("sha.txt"));
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        for (size_t k = 0; k < cases[i].repeat; k++)
            fputs(cases[i].text, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(dp_model_sha256(path, hex), 0);
        assert_string_equal(hex, cases[i].digest);
    }
    /* Every length from 0 to 200 bytes (the padding's cases), against
     * sha256sum where it is installed. */
    char cmd[700], line[128];
    snprintf(cmd, sizeof cmd, "sha256sum %s 2>/dev/null", path);
    int compared = 0;
    for (int len = 0; len <= 200; len++) {
        FILE *f = fopen(path, "wb");
        for (int k = 0; k < len; k++)
            fputc((k * 131 + len) & 0xff, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(dp_model_sha256(path, hex), 0);
        FILE *p = popen(cmd, "r");
        if (p && fgets(line, sizeof line, p) && strlen(line) > 64) {
            line[64] = '\0';
            assert_string_equal(hex, line);
            compared++;
        }
        if (p)
            pclose(p);
    }
    printf("SHA-256: FIPS 180-4's 4 examples, and %d lengths as sha256sum prints them\n", compared);
}

/* ---- 2. and 5. a checkpoint's metadata -------------------------------------- */

/* The checkpoint: eval opened /etc/passwd and printed its first
 * line. A model file the metadata names is never opened on its word, and
 * nothing of another file reaches a message. */
static void checkpoint_naming_a_file(void **state)
{
    (void)state;
    const char *passwd = with_meta("passwd.st", "dptrain.model", "/etc/passwd");
    expect_refused("eval, model /etc/passwd", CMD("eval", "--checkpoint", passwd),
                   WANT(passwd, ": names the model file '/etc/passwd'", "--model"));
    cli_run r;
    run_cli(CMD("eval", "--checkpoint", passwd), 30, &r);
    assert_null(strstr(r.err, "root:"));
    char png[512]; /* tu_tmp_path's buffer is reused by the runs */
    snprintf(png, sizeof png, "%s", tu_tmp_path("one.png"));
    expect_refused("predict, model /etc/passwd", CMD("predict", "--checkpoint", passwd, png),
                   WANT(passwd, "names the model file '/etc/passwd'"));
    /* Named by --model too, it is not the checkpoint's model. */
    expect_refused("eval --model lenet, model /etc/passwd",
                   CMD("eval", "--checkpoint", passwd, "--model", "lenet"),
                   WANT(passwd, "a checkpoint of '/etc/passwd', not lenet"));
    const char *dev = with_meta("dev.st", "dptrain.model", "/dev/zero");
    expect_refused("eval, model /dev/zero", CMD("eval", "--checkpoint", dev),
                   WANT(dev, "names the model file '/dev/zero'"));
    const char *odd = with_meta("odd.st", "dptrain.model", "x\n\x1b[31mred");
    expect_refused("eval, model with a newline", CMD("eval", "--checkpoint", odd),
                   WANT(odd, "names the model file 'x\\n\\x1b[31mred'"));
}

/* A checkpoint of a model file loads where the run names that file, or a
 * copy of it (the SHA-256 it recorded); another file is refused. */
static void checkpoint_of_a_model_file(void **state)
{
    (void)state;
    char model[512], copy[512], other[512], ck[512];
    snprintf(model, sizeof model, "%s", tu_tmp_path("net.txt"));
    snprintf(copy, sizeof copy, "%s", tu_tmp_path("copy.txt"));
    snprintf(other, sizeof other, "%s", tu_tmp_path("other.txt"));
    snprintf(ck, sizeof ck, "%s", tu_tmp_path("net.st"));
    static const char net[] = "Flatten()\nLinear(784, 10)\n";
    assert_int_equal(tu_write_file(model, net, sizeof net - 1), 0);
    assert_int_equal(tu_write_file(copy, net, sizeof net - 1), 0);
    assert_int_equal(tu_write_file(other, "Flatten()\nLinear(784, 10)  # else\n", 35), 0);
    cli_run r;
    run_cli(CMD("train", "--model", model, "--dataset", "mnist", "--data", data_dir, "--epochs",
                "1", "--batch-size", "4", "--progress", "never", "--checkpoint", ck),
            60, &r);
    assert_int_equal(r.status, 0);
    char sha[65];
    assert_int_equal(dp_model_sha256(model, sha), 0);
    char *recorded;
    assert_int_equal(dp_checkpoint_meta(ck, "dptrain.model_sha256", &recorded), 0);
    assert_string_equal(recorded, sha);
    free(recorded);
    const char *eval[] = {"eval",   "--checkpoint", ck,        "--dataset", "mnist",
                          "--data", data_dir,       "--model", model,       NULL};
    run_cli(eval, 60, &r);
    assert_int_equal(r.status, 0);
    eval[8] = copy;
    run_cli(eval, 60, &r);
    if (r.status != 0)
        fail_msg("a copy of the model file was refused: %s", r.err);
    eval[8] = other;
    expect_refused("eval --model another file", eval,
                   WANT(ck, "a checkpoint of", "nor of a file with the SHA-256"));
    expect_refused("eval without --model", CMD("eval", "--checkpoint", ck),
                   WANT(ck, "names the model file", "give the model file with --model"));
}

static void classes_not_strings(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"[1,2,3]", "expected a class name (a string)"},
        {"{\"a\":1}", "expected a JSON array of class names"},
        {"[\"a\",null]", "expected a class name (a string)"},
        {"[\"a\"] x", "more after the array"},
        {"\"dark\"", "expected a JSON array of class names"},
    };
    char png[512]; /* tu_tmp_path's buffer is reused by the runs */
    snprintf(png, sizeof png, "%s", tu_tmp_path("one.png"));
    for (size_t i = 0; i < COUNTOF(bad); i++) {
        char name[32];
        snprintf(name, sizeof name, "classes%zu.st", i);
        const char *ck = with_meta(name, "dptrain.classes", bad[i][0]);
        expect_refused("eval, bad dptrain.classes", CMD("eval", "--checkpoint", ck),
                       WANT(ck, "dptrain.classes", bad[i][1]));
        expect_refused("predict, bad dptrain.classes", CMD("predict", "--checkpoint", ck, png),
                       WANT(ck, "dptrain.classes", bad[i][1]));
    }
}

/* 8. predict --model resnet18 with a LeNet checkpoint: refused from the
 * header, before ResNet-18 is built. */
static void model_checked_before_it_is_built(void **state)
{
    (void)state;
    char png[512]; /* tu_tmp_path's buffer is reused by the runs */
    snprintf(png, sizeof png, "%s", tu_tmp_path("one.png"));
    write_png(png, 128);
    expect_refused("predict --model resnet18, LeNet weights",
                   CMD("predict", "--checkpoint", checkpoint, "--model", "resnet18", png),
                   WANT(checkpoint, "a checkpoint of 'lenet', not resnet18"));
    expect_refused("eval --model resnet18, LeNet weights",
                   CMD("eval", "--checkpoint", checkpoint, "--model", "resnet18"),
                   WANT(checkpoint, "a checkpoint of 'lenet', not resnet18"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sha256_as_the_standard_gives_it),
        cmocka_unit_test(checkpoint_naming_a_file),
        cmocka_unit_test(checkpoint_of_a_model_file),
        cmocka_unit_test(classes_not_strings),
        cmocka_unit_test(model_checked_before_it_is_built),
    };
    return tu_run(argc, argv, tests, hostile_setup, hostile_teardown);
}
