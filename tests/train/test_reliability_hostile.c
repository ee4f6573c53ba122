/* Hostile input, third round: each input below ends the command with one
 * line on stderr naming the file and the cause, a non-zero exit, within
 * 1 s and within 64 MB of resident memory over the program's rest (the
 * peak of `dptrain --version`, measured first: reliabilityutil.c's
 * hostile runs). Every input is made here; the checkpoints' metadata are
 * test_reliability_metadata.c's. */
#include "reliabilityutil.h"

#include "dp/dp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- 9. memory at rest ----------------------------------------------------- */

/* Without a GPU opened, the CUDA libraries stay unloaded (the backend is
 * a module): dptrain --version and dptrain model lenet rest under 64 MB
 * (227 MB each with the CUDA libraries linked). */
static void rest_under_64_mb(void **state)
{
    (void)state;
    cli_run r;
    run_cli(CMD("model", "lenet"), 30, &r);
    assert_int_equal(r.status, 0);
    printf("dptrain --version: %ld MB, dptrain model lenet: %ld MB\n", resting_kb / 1024,
           r.maxrss_kb / 1024);
    if (!SANITIZED && (resting_kb > 64 * 1024 || r.maxrss_kb > 64 * 1024))
        fail_msg("more than 64 MB at rest: --version %ld MB, model lenet %ld MB", resting_kb / 1024,
                 r.maxrss_kb / 1024);
}

/* ---- 4. a FIFO (or any file that is not a regular one) is never opened to
 * be read: open() of a FIFO waits for a writer, forever --------------------- */

static const char *fifo(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s", tu_tmp_path(name));
    unlink(p);
    assert_int_equal(mkfifo(p, 0644), 0);
    return p;
}

static void fifo_inputs(void **state)
{
    (void)state;
    const char *png = fifo("image.png");
    expect_refused("predict a FIFO image", CMD("predict", "--checkpoint", checkpoint, png),
                   WANT(png, "not a regular file (a FIFO)"));
    const char *npy = fifo("batch.npy");
    expect_refused("predict a FIFO .npy", CMD("predict", "--checkpoint", checkpoint, npy),
                   WANT(npy, "not a regular file (a FIFO)"));
    const char *st = fifo("weights.st");
    expect_refused("eval a FIFO checkpoint", CMD("eval", "--checkpoint", st),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("predict with a FIFO checkpoint",
                   CMD("predict", "--checkpoint", st, "/dev/null.png"),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("train --init a FIFO",
                   CMD("train", "--dataset", "mnist", "--data", data_dir, "--init", st),
                   WANT(st, "not a regular file (a FIFO)"));
    expect_refused("train --resume a FIFO",
                   CMD("train", "--dataset", "mnist", "--data", data_dir, "--resume", st),
                   WANT(st, "not a regular file (a FIFO)"));
    const char *txt = fifo("model.txt");
    expect_refused("model a FIFO model file", CMD("model", txt),
                   WANT(txt, "not a regular file (a FIFO)"));
    const char *onnx = fifo("model.onnx");
    expect_refused("model a FIFO ONNX file", CMD("model", onnx),
                   WANT(onnx, "not a regular file (a FIFO)"));
    expect_refused("a character device as a checkpoint", CMD("eval", "--checkpoint", "/dev/zero"),
                   WANT("/dev/zero", "not a regular file (a character device)"));
    /* A data set whose training images are a FIFO. */
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("fifo-set"));
    tu_write_idx_set(dir);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    unlink(path);
    assert_int_equal(mkfifo(path, 0644), 0);
    expect_refused("train on a FIFO of images", CMD("train", "--dataset", "mnist", "--data", dir),
                   WANT(path, "not a regular file (a FIFO)"));
}

/* ---- 8. train checks what its options name before it loads the data ------- */

static const char *write_text(const char *name, const char *text)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s", tu_tmp_path(name));
    assert_int_equal(tu_write_file(p, text, strlen(text)), 0);
    return p;
}

/* On Fashion-MNIST (400 MB once loaded): each refusal comes from the
 * options' files and the data's headers alone. */
static void train_checks_before_loading(void **state)
{
    (void)state;
    NEED_DATA();
    const char *bad = write_text("paren.txt", "Conv2d(1, 6, 5\n");
    expect_refused("train --model, a bad file", CMD("train", "--model", bad),
                   WANT(bad, "missing ')'"));
    expect_refused("train --resume, another model",
                   CMD("train", "--model", "resnet18", "--resume", checkpoint),
                   WANT(checkpoint, "a checkpoint of 'lenet', not resnet18"));
    const char *linear = write_text("linear.txt", "Flatten()\nLinear(784, 10)\n");
    expect_refused("train --init, another model",
                   CMD("train", "--model", linear, "--init", checkpoint),
                   WANT(checkpoint, "a checkpoint of 'lenet', not", linear));
    /* A state dict that names no model: its tensors against the model's. */
    const char *plain = with_meta("plain.st", "dptrain.model", NULL);
    expect_refused("train --init, another model's tensors",
                   CMD("train", "--model", linear, "--init", plain),
                   WANT(plain, "tensor 'W1' is not part of", linear));
    expect_refused("train --resume, epochs all done",
                   CMD("train", "--resume", checkpoint, "--epochs", "1"),
                   WANT(checkpoint, "already trained 1 epochs"));
    expect_refused("train --stages past the layers",
                   CMD("train", "--devices", "2", "--pipeline", "2", "--stages", "0-3,4-99"),
                   WANT("--stages"));
    const char *broken = with_meta("broken.st", "dptrain.step", "-4");
    expect_refused("train --resume, a bad step count", CMD("train", "--resume", broken),
                   WANT(broken, "'dptrain.step' is '-4'"));
}

/* ---- 3. a valid flag cannot exhaust memory --------------------------------- */

static void batch_capped_at_the_data(void **state)
{
    (void)state;
    NEED_DATA();
    cli_run small, big;
    run_cli(CMD("train", "--batch-size", "64", "--limit-train", "64", "--limit-test", "64",
                "--epochs", "1", "--progress", "never"),
            120, &small);
    assert_int_equal(small.status, 0);
    /* --max-memory: an uncapped batch of a million is refused, not run. */
    run_cli(CMD("train", "--batch-size", "1048576", "--limit-train", "64", "--limit-test", "64",
                "--epochs", "1", "--progress", "never", "--max-memory", "2G"),
            120, &big);
    printf("--batch-size 1048576 --limit-train 64: exit %d, %.2f s, %ld MB (batch 64: %ld MB): %s",
           big.status, big.seconds, big.maxrss_kb / 1024, small.maxrss_kb / 1024, big.err);
    assert_int_equal(big.status, 0);
    assert_int_equal(count_lines(big.err), 1);
    assert_has(big.err, "--batch-size 1048576 is more than the 64 training samples: each batch "
                        "holds all 64");
    if (big.maxrss_kb > small.maxrss_kb + HEADROOM_KB)
        fail_msg("%ld MB resident, the same run at batch 64 %ld MB", big.maxrss_kb / 1024,
                 small.maxrss_kb / 1024);
}

static void step_memory_estimated_first(void **state)
{
    (void)state;
    NEED_DATA();
    expect_refused("resnet18 at batch 60000",
                   CMD("train", "--model", "resnet18", "--batch-size", "60000"),
                   WANT("a step of resnet18 needs about", "for 60000 samples", "is available",
                        "lower --batch-size, or raise --max-memory"));
    expect_refused("lenet over --max-memory 1M", CMD("train", "--max-memory", "1M"),
                   WANT("a step of lenet needs about", "--max-memory is 1.0 MB"));
    /* 100,000 layers, each output kept for the backward pass: 80 GB at
     * batch 256, which grew until the kernel killed the run. */
    char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path("chain.txt"));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("Flatten()\n", f);
    for (int i = 0; i < 100000; i++)
        fputs("ReLU()\n", f);
    fputs("Linear(784, 10)\n", f);
    assert_int_equal(fclose(f), 0);
    /* Its definition alone is 100,000 modules, and their trace as many
     * tensors on the meta device: what `dptrain model` of it holds (94 MB
     * here) is the rest the refusal is measured over. */
    cli_run model;
    run_cli(CMD("model", path), 30, &model);
    assert_int_equal(model.status, 0);
    printf("dptrain model of the chain: %ld MB\n", model.maxrss_kb / 1024);
    expect_refused_over("a chain of 100,000 layers", CMD("train", "--model", path),
                        WANT("a step of", "chain.txt needs about", "GB of memory"),
                        model.maxrss_kb);
}

/* ---- 7. a name from a file cannot split a line of output ------------------- */

/* What Python 3.11's repr() prints for each (bytes that are not UTF-8
 * aside, which a str cannot hold: \xNN here). */
static void names_written_as_python_repr_writes_them(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"cat", "'cat'"},
        {"a\nb", "'a\\nb'"},
        {"it's", "\"it's\""},
        {"it's \"x\"", "'it\\'s \"x\"'"},
        {"back\\slash\ttab\rcr", "'back\\\\slash\\ttab\\rcr'"},
        {"caf\xc3\xa9", "'caf\xc3\xa9'"},
        {"\x01\x7f", "'\\x01\\x7f'"},
        {"\xc2\x85\xc2\xa0", "'\\x85\\xa0'"},
        {"left\xe2\x80\xaeright", "'left\\u202eright'"},
        {"\xe2\x80\xa8\xef\xbb\xbf", "'\\u2028\\ufeff'"},
        {"\xff\xc3", "'\\xff\\xc3'"},
        {"", "''"},
    };
    char buf[64];
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        dp_repr(cases[i][0], buf, sizeof buf);
        if (strcmp(buf, cases[i][1]) != 0)
            fail_msg("repr of case %zu: %s, Python writes %s", i, buf, cases[i][1]);
    }
    /* Plain names stay as they are; the others are quoted. */
    assert_string_equal(dp_name_str("dark", buf, sizeof buf), "dark");
    assert_string_equal(dp_name_str("caf\xc3\xa9 au lait", buf, sizeof buf), "caf\xc3\xa9 au lait");
    assert_string_equal(dp_name_str("a\nb", buf, sizeof buf), "'a\\nb'");
    assert_string_equal(dp_name_str(" x", buf, sizeof buf), "' x'");
    /* Cut to the buffer, quotes kept. */
    assert_string_equal(dp_repr("abcdefghijklmnop", buf, 12), "'abcdef...'");
}

static void class_named_with_a_newline(void **state)
{
    (void)state;
    char dir[512], ck[512], image[600];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("newline-classes"));
    make_folder(dir, (const char *const[]){"a\nb", "plain", "it's"}, 3);
    snprintf(ck, sizeof ck, "%s", tu_tmp_path("newline.st"));
    cli_run r;
    run_cli(CMD("train", "--dataset", "folder", "--data", dir, "--epochs", "1", "--batch-size", "3",
                "--progress", "never", "--checkpoint", ck),
            120, &r);
    if (r.status != 0)
        fail_msg("training on the folder failed (exit %d): %s", r.status, r.err);
    snprintf(image, sizeof image, "%s/test/plain/0.png", dir);
    run_cli(CMD("predict", "--checkpoint", ck, "--topk", "3", image), 60, &r);
    printf("predict: exit %d: %s%s", r.status, r.out, r.err);
    assert_int_equal(r.status, 0);
    /* One line for the one image, naming every class, the odd ones as
     * Python's repr writes them. */
    assert_int_equal(count_lines(r.out), 1);
    assert_has(r.out, "'a\\nb' ");
    assert_has(r.out, "\"it's\" ");
    assert_has(r.out, " plain ");
}

/* ---- 5. an image folder's link to nothing ---------------------------------- */

static void dangling_link_in_a_folder(void **state)
{
    (void)state;
    char dir[512], link[700];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("dangling"));
    make_folder(dir, (const char *const[]){"dark", "light"}, 2);
    snprintf(link, sizeof link, "%s/train/light/gone.png", dir);
    assert_int_equal(symlink("/nowhere/gone.png", link), 0);
    /* A link to nothing that no image reader takes stays passed over, as
     * ImageFolder passes it over. */
    snprintf(link, sizeof link, "%s/train/light/notes.txt", dir);
    assert_int_equal(symlink("/nowhere/notes.txt", link), 0);
    snprintf(link, sizeof link, "%s/train/light/gone.png", dir);
    expect_refused("a folder with a link to nothing",
                   CMD("train", "--dataset", "folder", "--data", dir),
                   WANT(link, "a symbolic link to '/nowhere/gone.png', which is not there"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rest_under_64_mb),
        cmocka_unit_test(fifo_inputs),
        cmocka_unit_test(train_checks_before_loading),
        cmocka_unit_test(batch_capped_at_the_data),
        cmocka_unit_test(step_memory_estimated_first),
        cmocka_unit_test(names_written_as_python_repr_writes_them),
        cmocka_unit_test(class_named_with_a_newline),
        cmocka_unit_test(dangling_link_in_a_folder),
    };
    return tu_run(argc, argv, tests, hostile_setup, hostile_teardown);
}
