/* Hostile model files, each written here and given to dptrain in a child
 * (hostileutil.h): one line naming the file and the cause (the node of an
 * ONNX graph, the line of an nn.Sequential file), a non-zero exit, within
 * 1 s of CPU and 64 MB beyond the program's own memory. The files: If
 * bodies nested 3,000 and 30,000 deep and types nested 20,000 deep (which
 * overflowed protobuf-c's recursion), a Conv of kernel_shape [0, 0]
 * (accepted), graph inputs of dimensions -5 and 0 (taken as symbolic) and
 * of 100000 and 2^40 (a downstream shape error, a wrapped size), dilations
 * of 1e6 (blamed on the weight), strides of 0, a weight of no values, a NaN
 * alpha, a Split of sizes -2 and 6, a Reshape whose target overflows, a
 * Gemm whose weight does not fit (an op's error, which must name the
 * node), an nn.Sequential layer whose output no tensor can hold (which
 * must name the line), and, in an image folder the model would train on,
 * a PNG whose header claims 100000 x 100000 (libpng's "Invalid IHDR
 * data"). And a valid chain of 200,000 nodes, which loads and prints in
 * linear time and memory. */
#include "hostileutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* An attribute of a node: ints (nints > 0), one int (nints -1: ints[0])
 * or one float (nints 0). */
typedef struct attr {
    const char *name;
    int nints;
    int64_t ints[4];
    float f;
} attr;

#define INTS2(n, a, b) ((attr){.name = (n), .nints = 2, .ints = {(a), (b)}})
#define INT1(n, a) ((attr){.name = (n), .nints = -1, .ints = {(a)}})
#define FLOAT1(n, v) ((attr){.name = (n), .f = (v)})

static void model_refused(const char *path, const char *const *words)
{
    hu_refused((const char *[]){"model", path, NULL}, path, words);
}

/* ---- ONNX messages (onnx.proto's field numbers) -------------------------- */

enum { SYMBOLIC = -1000000 }; /* a dimension written as dim_param "N" */

/* A ValueInfoProto (graph input `field` 11 or output 12): a float tensor
 * of dims[0..ndim), or of no type when ndim < 0. */
static void w_value(hu_wire *w, int field, const char *name, int ndim, const int64_t *dims)
{
    size_t end = w->at, type_end, tensor_end, shape_end;
    if (ndim >= 0) {
        type_end = w->at;
        tensor_end = w->at;
        shape_end = w->at;
        for (int d = ndim - 1; d >= 0; d--) {
            size_t dim_end = w->at;
            if (dims[d] == SYMBOLIC)
                hu_str(w, 2, "N");
            else
                hu_int(w, 1, dims[d]);
            hu_msg(w, 1, dim_end);
        }
        hu_msg(w, 2, shape_end); /* shape */
        hu_int(w, 1, 1);         /* elem_type float */
        hu_msg(w, 1, tensor_end);
        hu_msg(w, 2, type_end);
    }
    hu_str(w, 1, name);
    hu_msg(w, field, end);
}

/* An initializer of dims[0..ndim): zeros, float (type 1) or int64 (7)
 * holding ints. */
static void w_init(hu_wire *w, const char *name, int ndim, const int64_t *dims, int type,
                   const int64_t *ints)
{
    size_t end = w->at;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= dims[d];
    size_t bytes = (size_t)n * (type == 7 ? 8 : 4);
    uint8_t *raw = calloc(bytes ? bytes : 1, 1);
    if (ints)
        memcpy(raw, ints, bytes);
    hu_bytes(w, raw, bytes);
    free(raw);
    hu_varint(w, bytes);
    hu_tag(w, 9, 2); /* raw_data */
    hu_str(w, 8, name);
    hu_int(w, 2, type);
    for (int d = ndim - 1; d >= 0; d--)
        hu_int(w, 1, dims[d]);
    hu_msg(w, 5, end);
}

/* A NodeProto (graph field 1): ins and outs comma-separated, attrs ended
 * by one without a name. */
static void w_node(hu_wire *w, const char *op, const char *name, const char *ins, const char *outs,
                   const attr *attrs)
{
    size_t end = w->at;
    for (int a = 0; attrs && attrs[a].name; a++) {
        size_t at_end = w->at;
        int n = attrs[a].nints;
        hu_int(w, 20, n > 0 ? 7 : n < 0 ? 2 : 1); /* INTS, INT or FLOAT */
        for (int k = n - 1; k >= 0; k--)
            hu_int(w, 8, attrs[a].ints[k]);
        if (n < 0)
            hu_int(w, 3, attrs[a].ints[0]);
        if (n == 0)
            hu_float(w, 2, attrs[a].f);
        hu_str(w, 1, attrs[a].name);
        hu_msg(w, 5, at_end);
    }
    hu_str(w, 4, op);
    hu_str(w, 3, name);
    const char *lists[2] = {outs, ins};
    for (int l = 0; l < 2; l++) { /* outputs (field 2), then inputs (1), each last first */
        char copy[256], *names[16];
        int n = 0;
        snprintf(copy, sizeof copy, "%s", lists[l]);
        for (char *s = strtok(copy, ","); s && n < 16; s = strtok(NULL, ","))
            names[n++] = s;
        while (n-- > 0)
            hu_str(w, l == 0 ? 2 : 1, names[n]);
    }
    hu_msg(w, 1, end);
}

/* The model around a graph whose content was written since `graph_end`. */
static void w_model(hu_wire *w, size_t graph_end)
{
    hu_str(w, 2, "g");
    hu_msg(w, 7, graph_end);
    size_t opset_end = w->at;
    hu_int(w, 2, 17);
    hu_str(w, 1, "");
    hu_msg(w, 8, opset_end);
    hu_int(w, 1, 8); /* ir_version */
}

/* ---- the files ----------------------------------------------------------------- */

/* A Conv whose `levels` If nodes each hold the next one in its
 * then_branch, the innermost an Identity: messages nested 3 levels a
 * node. Every message ends where the innermost one does, at the buffer's
 * end, so each level is three headers and its own fields. */
static void nested_ifs(const char *path, int levels)
{
    hu_wire w;
    hu_open(&w, (size_t)levels * 80 + 4096);
    size_t end = w.at;
    w_node(&w, "Identity", "id", "c", "b", NULL);
    for (int i = levels - 1; i >= 0; i--) {
        char name[32];
        snprintf(name, sizeof name, "if%d", i);
        hu_msg(&w, 6, end); /* the attribute's graph */
        hu_int(&w, 20, 5);  /* GRAPH */
        hu_str(&w, 1, "then_branch");
        hu_msg(&w, 5, end); /* the node's attribute */
        hu_str(&w, 4, "If");
        hu_str(&w, 3, name);
        hu_str(&w, 2, "y");
        hu_str(&w, 1, "c");
        hu_msg(&w, 1, end); /* the graph's node */
    }
    w_value(&w, 12, "y", -1, NULL);
    w_value(&w, 11, "c", 1, (const int64_t[]){1});
    w_model(&w, end);
    hu_save(&w, path);
}

/* A Relu whose input's type is a sequence of a sequence ... of a tensor,
 * `levels` deep (TypeProto.sequence_type.elem_type). */
static void nested_types(const char *path, int levels)
{
    hu_wire w;
    hu_open(&w, (size_t)levels * 8 + 4096);
    size_t end = w.at;
    hu_int(&w, 1, 1);   /* elem_type float */
    hu_msg(&w, 1, end); /* tensor_type */
    for (int i = 0; i < levels; i++) {
        hu_msg(&w, 1, end); /* Sequence.elem_type */
        hu_msg(&w, 4, end); /* TypeProto.sequence_type */
    }
    hu_msg(&w, 2, end); /* ValueInfoProto.type */
    hu_str(&w, 1, "x");
    hu_msg(&w, 11, end);
    w_value(&w, 12, "y", -1, NULL);
    w_node(&w, "Relu", "relu", "x", "y", NULL);
    w_model(&w, end);
    hu_save(&w, path);
}

/* x (in) -> Conv (weight w, conv_attrs) -> [middle node: op, attrs, a
 * second input `extra` of int64 values] -> Flatten -> Gemm (weight
 * (10, fc_in)) -> y. The defaults: x (N, 1, 28, 28), w (4, 1, 3, 3),
 * fc_in 2704, nothing in the middle. */
typedef struct net {
    int64_t in[4], w[4], fc_in;
    attr conv[3];
    const char *middle;
    attr middle_attrs[2];
    int nextra;
    int64_t extra[4];
} net;

static net default_net(void)
{
    return (net){.in = {SYMBOLIC, 1, 28, 28}, .w = {4, 1, 3, 3}, .fc_in = 2704};
}

static void net_file(const char *path, const net *n)
{
    hu_wire w;
    hu_open(&w, 1 << 20);
    size_t end = w.at;
    w_value(&w, 12, "y", -1, NULL);
    w_value(&w, 11, "x", 4, n->in);
    w_init(&w, "w", 4, n->w, 1, NULL);
    w_init(&w, "fw", 2, (const int64_t[]){10, n->fc_in}, 1, NULL);
    w_node(&w, "Gemm", "fc", "f,fw", "y", (const attr[]){INT1("transB", 1), {0}});
    w_node(&w, "Flatten", "flat", n->middle ? "m" : "c", "f", NULL);
    if (n->middle) {
        const char *ins = "c";
        if (n->nextra) {
            w_init(&w, "extra", 1, (const int64_t[]){n->nextra}, 7, n->extra);
            ins = "c,extra";
        }
        /* Split's first output goes on, its second nowhere */
        w_node(&w, n->middle, "middle", ins, strcmp(n->middle, "Split") ? "m" : "m,unused",
               n->middle_attrs);
    }
    w_node(&w, "Conv", "conv", "x,w", "c", n->conv);
    w_model(&w, end);
    hu_save(&w, path);
}

/* A valid chain: Conv, then `count` nodes of Relu, Identity and MaxPool
 * (of kernel 1, its Indices output left unread) in turn, Flatten, Gemm. */
static void chain_file(const char *path, int count)
{
    hu_wire w;
    hu_open(&w, (size_t)count * 96 + 65536);
    size_t end = w.at;
    w_value(&w, 12, "y", -1, NULL);
    w_value(&w, 11, "x", 4, (const int64_t[]){SYMBOLIC, 1, 28, 28});
    w_init(&w, "w", 4, (const int64_t[]){4, 1, 3, 3}, 1, NULL);
    w_init(&w, "fw", 2, (const int64_t[]){10, 2704}, 1, NULL);
    w_node(&w, "Gemm", "fc", "f,fw", "y", (const attr[]){INT1("transB", 1), {0}});
    char in[32], out[64], name[32];
    snprintf(in, sizeof in, "v%d", count);
    w_node(&w, "Flatten", "flat", in, "f", NULL);
    static const char *const ops[3] = {"Relu", "Identity", "MaxPool"};
    for (int i = count - 1; i >= 0; i--) {
        snprintf(in, sizeof in, "v%d", i);
        snprintf(name, sizeof name, "n%d", i);
        if (i % 3 == 2) {
            snprintf(out, sizeof out, "v%d,ix%d", i + 1, i);
            w_node(&w, ops[2], name, in, out, (const attr[]){INTS2("kernel_shape", 1, 1), {0}});
        } else {
            snprintf(out, sizeof out, "v%d", i + 1);
            w_node(&w, ops[i % 3], name, in, out, NULL);
        }
    }
    w_node(&w, "Conv", "conv", "x,w", "v0", NULL);
    w_model(&w, end);
    hu_save(&w, path);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Appends a PNG chunk of `type` holding data[0..n) at out; its length. */
static size_t png_chunk(uint8_t *out, const char *type, const uint8_t *data, size_t n)
{
    put_be32(out, (uint32_t)n);
    memcpy(out + 4, type, 4);
    if (n > 0) /* IEND has no data, and memcpy may not take NULL */
        memcpy(out + 8, data, n);
    put_be32(out + 8 + n, (uint32_t)crc32(0L, out + 4, (uInt)(n + 4)));
    return 12 + n;
}

/* A gray PNG of w x h: its pixels (zeros) when they are few, else only
 * its header. */
static void png_file(const char *path, uint32_t w, uint32_t h)
{
    static uint8_t file[4096];
    uint8_t ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0}, rows[16 * 17] = {0}, idat[512];
    put_be32(ihdr, w);
    put_be32(ihdr + 4, h);
    memcpy(file, "\x89PNG\r\n\x1a\n", 8);
    size_t n = 8 + png_chunk(file + 8, "IHDR", ihdr, 13);
    if ((size_t)w * h <= 256) {
        uLongf len = sizeof idat;
        assert_int_equal(compress(idat, &len, rows, (uLong)(h * (w + 1))), Z_OK);
        n += png_chunk(file + n, "IDAT", idat, len);
    }
    n += png_chunk(file + n, "IEND", NULL, 0);
    assert_int_equal(tu_write_file(path, file, n), 0);
}

/* ---- the tests -------------------------------------------------------------------- */

static void nested_subgraphs(void **state)
{
    (void)state;
    static const int levels[2] = {3000, 30000};
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s", tu_tmp_path(i ? "if30000.onnx" : "if3000.onnx"));
        nested_ifs(path, levels[i]);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        printf("%d If nodes nested: %lld bytes\n", levels[i], (long long)st.st_size);
        model_refused(path, HU_WORDS("messages nested more than 100 deep", "34 graphs deep",
                                     "If, Loop or Scan"));
    }
    char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path("types.onnx"));
    nested_types(path, 20000);
    model_refused(path,
                  HU_WORDS("messages nested more than 100 deep", "a Sequence inside a TypeProto"));
}

static void input_dimensions(void **state)
{
    (void)state;
    static const int64_t dims[4] = {-5, 0, 100000, (int64_t)1 << 40};
    static const char *const why[4] = {
        "as -5; a dimension is a size of 1 or more", "as 0; a dimension is a size of 1 or more",
        "as 100000, more than 65536", "as 1099511627776, more than 65536"};
    for (int i = 0; i < 4; i++) {
        char name[32], path[512];
        snprintf(name, sizeof name, "input%d.onnx", i);
        snprintf(path, sizeof path, "%s", tu_tmp_path(name));
        net n = default_net();
        n.in[2] = dims[i];
        n.in[3] = i >= 2 ? dims[i] : 28;
        net_file(path, &n);
        model_refused(path, HU_WORDS("the input 'x' declares dimension 2", why[i]));
    }
}

static void node_settings(void **state)
{
    (void)state;
    char path[512];
    net n = default_net();
    n.conv[0] = INTS2("kernel_shape", 0, 0);
    snprintf(path, sizeof path, "%s", tu_tmp_path("kernel0.onnx"));
    net_file(path, &n);
    model_refused(path,
                  HU_WORDS("node 'conv' (Conv): kernel_shape 0, 0: each must be 1 to 1048576"));
    n = default_net();
    n.conv[0] = INTS2("strides", 0, 1);
    net_file(path, &n);
    model_refused(path, HU_WORDS("node 'conv' (Conv): strides 0, 1: each must be 1 to 1048576"));
    n = default_net();
    n.conv[0] = INTS2("dilations", 1000000, 1000000);
    net_file(path, &n);
    model_refused(path,
                  HU_WORDS("node 'conv' (Conv): conv2d: the 3 x 3 kernel dilated by 1000000 x "
                           "1000000 spans 2000001 x 2000001, more than input [2, 1, 28, 28]"));
    n = default_net();
    n.w[2] = n.w[3] = 0; /* a 0 x 0 kernel */
    n.fc_in = 4 * 29 * 29;
    net_file(path, &n);
    model_refused(path,
                  HU_WORDS("the initializer 'w' [4, 1, 0, 0] is read as a weight and holds no "
                           "values"));
    n = default_net();
    n.middle = "LeakyRelu";
    n.middle_attrs[0] = FLOAT1("alpha", NAN);
    net_file(path, &n);
    model_refused(path, HU_WORDS("node 'middle' (LeakyRelu): alpha nan is not a finite number"));
}

/* What the ops find when the graph runs on the input's shapes: each
 * message starts with the file and the node. */
static void shapes_when_run(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path("run.onnx"));
    net n = default_net();
    n.middle = "Split";
    n.middle_attrs[0] = INT1("axis", 1);
    n.nextra = 2;
    n.extra[0] = -2;
    n.extra[1] = 6;
    n.fc_in = 6 * 26 * 26;
    net_file(path, &n);
    model_refused(path, HU_WORDS("node 'middle' (Split): its split holds the size -2"));
    n = default_net();
    n.middle = "Reshape";
    n.nextra = 4;
    memcpy(n.extra, (const int64_t[]){0, (int64_t)1 << 40, (int64_t)1 << 40, -1}, sizeof n.extra);
    net_file(path, &n);
    model_refused(path, HU_WORDS("node 'middle' (Reshape): its shape holds more values than a "
                                 "tensor can"));
    n = default_net();
    n.fc_in = 100;
    net_file(path, &n);
    model_refused(path, HU_WORDS("node 'fc' (Gemm): linear: input [2, 2704] does not fit weight "
                                 "[10, 100]"));
}

/* A layer whose output a tensor cannot hold: the op's error names the
 * line. */
static void sequential_line(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path("wide.txt"));
    static const char text[] = "Conv2d(1, 268435457, 1, bias=False)\nAdaptiveAvgPool2d(1)\n"
                               "Flatten()\nLinear(268435457, 2)\n";
    assert_int_equal(tu_write_file(path, text, sizeof text - 1), 0);
    hu_refused(
        (const char *[]){"model", path, "--input", "1x32768x65536", NULL}, path,
        HU_WORDS("line 1: a tensor [2, 268435457, 32768, 65536] holds more than 2^62 bytes"));
}

/* An image folder holding a PNG whose header claims 100000 x 100000. */
static void png_header(void **state)
{
    (void)state;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("folder"));
    static const char *const sub[] = {"",         "/train",  "/test",  "/train/a",
                                      "/train/b", "/test/a", "/test/b"};
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
        snprintf(path, sizeof path, "%s%s", dir, sub[i]);
        assert_int_equal(mkdir(path, 0755), 0);
        for (int k = 0; i >= 3 && k < 2; k++) {
            snprintf(path, sizeof path, "%s%s/%d.png", dir, sub[i], k);
            png_file(path, 16, 16); /* LeNet's smallest: the run reaches the huge one */
        }
    }
    snprintf(path, sizeof path, "%s/train/a/huge.png", dir);
    png_file(path, 100000, 100000);
    /* Streamed: refused when the loader reaches it, before its step. */
    hu_refused((const char *[]){"train", "--dataset", "folder", "--data", dir, "--channels", "1",
                                "--epochs", "1", "--batch-size", "2", "--progress", "never", NULL},
               path, HU_WORDS("100000x100000 pixels: images of at most 16384x16384"));
}

/* 200,000 nodes load and print in linear time and memory: about 1 KB a
 * node of heap at the peak (at 100,000: protobuf-c's messages 22 MB, the
 * graph's nodes 19 MB, the summary's trace 50 MB, a tape entry, a meta
 * tensor and its autograd state for each op, the table's rows 7 MB).
 * The previous build took 36 s of CPU at 100,000, searching every node or
 * tape entry for each one; this one 0.3 s, and at 200,000 is held to 2 s
 * and 320 MB beyond dptrain model lenet. */
static void long_chain(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", tu_tmp_path("chain.onnx"));
    chain_file(path, 200000);
    hu_outcome o;
    hu_run((const char *[]){"model", path, NULL}, &o);
    hu_within("a chain of 200,000 nodes", &o, 2 * HU_CPU_S, 320L * 1024);
    if (o.status != 0 || !strstr(o.out, "total parameters: 27,076"))
        fail_msg("the chain: exit %d, %s%s", o.status, o.out, o.err);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nested_subgraphs), cmocka_unit_test(input_dimensions),
        cmocka_unit_test(node_settings),    cmocka_unit_test(shapes_when_run),
        cmocka_unit_test(sequential_line),  cmocka_unit_test(png_header),
        cmocka_unit_test(long_chain),
    };
    return tu_run(argc, argv, tests, hu_setup, tu_teardown_tmp);
}
