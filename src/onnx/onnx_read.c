/* ONNX files in and out (onnx.h): protobuf-c decodes and encodes the
 * messages; what is here bounds the input and checks every tensor's claim
 * against the bytes that back it before anything is sized by it. */
#include "onnx/onnx.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void dp__onnx_free(Onnx__ModelProto *m)
{
    if (m)
        onnx__model_proto__free_unpacked(m, NULL);
}

static bool default_domain(const char *d)
{
    return !d || !d[0] || strcmp(d, "ai.onnx") == 0;
}

int64_t dp__onnx_opset(const Onnx__ModelProto *m)
{
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (default_domain(m->opset_import[i]->domain))
            return m->opset_import[i]->version;
    return 0;
}

/* Bytes per element of the types read, 0 for the others. */
static size_t elem_size(int32_t type)
{
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        return 1;
    default:
        return 0;
    }
}

/* Elements in the typed field that holds this type's values. */
static size_t typed_count(const Onnx__TensorProto *t)
{
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        return t->n_float_data;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        return t->n_int64_data;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        return t->n_double_data;
    default: /* int32 and bool live in int32_data */
        return t->n_int32_data;
    }
}

int64_t dp__onnx_numel(const Onnx__TensorProto *t)
{
    int64_t n = 1;
    for (size_t d = 0; d < t->n_dims; d++)
        n *= t->dims[d];
    return n;
}

bool dp__onnx_is_float(const Onnx__TensorProto *t)
{
    return t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
           t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
}

/* Element i as a double (exact for every int32, float and double, and for
 * int64 below 2^53, which shapes and indices are). */
static double element(const Onnx__TensorProto *t, int64_t i)
{
    const uint8_t *raw = t->has_raw_data ? t->raw_data.data : NULL;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
        float v;
        if (raw)
            memcpy(&v, raw + 4 * i, 4);
        return raw ? v : t->float_data[i];
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: {
        double v;
        if (raw)
            memcpy(&v, raw + 8 * i, 8);
        return raw ? v : t->double_data[i];
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: {
        int64_t v;
        if (raw)
            memcpy(&v, raw + 8 * i, 8);
        return (double)(raw ? v : t->int64_data[i]);
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: {
        int32_t v;
        if (raw)
            memcpy(&v, raw + 4 * i, 4);
        return raw ? v : t->int32_data[i];
    }
    default: /* bool */
        return raw ? raw[i] != 0 : t->int32_data[i] != 0;
    }
}

void dp__onnx_to_floats(const Onnx__TensorProto *t, float *out)
{
    int64_t n = dp__onnx_numel(t);
    if (n == 0)
        return; /* no data, and maybe no buffer to copy from */
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && t->has_raw_data) {
        memcpy(out, t->raw_data.data, (size_t)n * 4); /* little-endian, as ONNX stores it */
        return;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)element(t, i);
}

void dp__onnx_to_int64s(const Onnx__TensorProto *t, int64_t *out)
{
    int64_t n = dp__onnx_numel(t);
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
        for (int64_t i = 0; i < n; i++) {
            if (t->has_raw_data)
                memcpy(&out[i], t->raw_data.data + 8 * i, 8);
            else
                out[i] = t->int64_data[i];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = (int64_t)element(t, i);
}

/* One tensor of the file (`what`: "initializer", "constant of node 3"),
 * checked: its data inside the file, of a type read here, as many
 * elements as its dims claim. */
static int check_tensor(const Onnx__TensorProto *t, const char *name, const char *what)
{
    const char *tn = t->name && t->name[0] ? t->name : "(unnamed)";
    if (t->n_external_data > 0 ||
        (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)) {
        DP_ERROR("%s: %s '%s' keeps its data in an external file, which dptrain does not read "
                 "(save the model with its data inside: onnx.save(model, path, "
                 "save_as_external_data=False))",
                 name, what, tn);
        return DP_EFORMAT;
    }
    if (t->segment) {
        DP_ERROR("%s: %s '%s' is a segment of a tensor, which dptrain does not read", name, what,
                 tn);
        return DP_EFORMAT;
    }
    size_t es = elem_size(t->data_type);
    if (es == 0) {
        DP_ERROR("%s: %s '%s' is of ONNX data type %d; dptrain reads float, double, int32, int64 "
                 "and bool tensors",
                 name, what, tn, (int)t->data_type);
        return DP_EFORMAT;
    }
    if (t->n_dims > DP__ONNX_MAX_RANK) {
        DP_ERROR("%s: %s '%s' has %zu dimensions, more than %d", name, what, tn, t->n_dims,
                 DP__ONNX_MAX_RANK);
        return DP_EFORMAT;
    }
    /* The claim is counted against what the file holds, never allocated:
     * a few bytes may claim 2^31 elements. */
    int64_t numel = 1;
    bool huge = false;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0) {
            DP_ERROR("%s: %s '%s' has a negative dimension (%lld)", name, what, tn,
                     (long long)t->dims[d]);
            return DP_EFORMAT;
        }
        if (t->dims[d] > 0 && numel > INT64_MAX / 8 / t->dims[d])
            huge = true;
        else
            numel *= t->dims[d];
    }
    size_t held = t->has_raw_data ? t->raw_data.len / es : typed_count(t);
    bool partial = t->has_raw_data && t->raw_data.len % es != 0;
    if (huge || partial || (uint64_t)numel != (uint64_t)held) {
        char dims[160];
        dp__shape_str(dims, sizeof dims, (int)DP_MIN(t->n_dims, 8), t->dims);
        DP_ERROR("%s: %s '%s' claims %s elements%s but holds %zu (%zu bytes): the file is "
                 "damaged",
                 name, what, tn, dims, huge ? ", more than any file can hold," : "", held,
                 t->has_raw_data ? t->raw_data.len : held * es);
        return DP_EFORMAT;
    }
    return 0;
}

static int check_model(const Onnx__ModelProto *m, const char *name)
{
    if (!m->has_ir_version || m->ir_version < 3 || !m->graph) {
        DP_ERROR("%s: not an ONNX model (%s)", name,
                 !m->graph ? "no graph" : "no IR version of 3 or more");
        return DP_EFORMAT;
    }
    int64_t opset = dp__onnx_opset(m);
    if (opset == 0) {
        DP_ERROR("%s: imports no opset of ONNX's default domain", name);
        return DP_EFORMAT;
    }
    if (opset < DP__ONNX_MIN_OPSET || opset > DP__ONNX_MAX_OPSET) {
        DP_ERROR("%s: opset %lld; dptrain reads opsets %d to %d (torch.onnx.export(..., "
                 "opset_version=17))",
                 name, (long long)opset, DP__ONNX_MIN_OPSET, DP__ONNX_MAX_OPSET);
        return DP_EFORMAT;
    }
    const Onnx__GraphProto *g = m->graph;
    if (g->n_sparse_initializer > 0) {
        DP_ERROR("%s: the graph has sparse initializers, which dptrain does not read", name);
        return DP_EFORMAT;
    }
    for (size_t i = 0; i < g->n_initializer; i++)
        DP_TRY(check_tensor(g->initializer[i], name, "initializer"));
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t a = 0; a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            char what[96];
            snprintf(what, sizeof what, "attribute '%s' of node %zu", at->name ? at->name : "", i);
            if (at->t)
                DP_TRY(check_tensor(at->t, name, what));
            for (size_t k = 0; k < at->n_tensors; k++)
                DP_TRY(check_tensor(at->tensors[k], name, what));
        }
    }
    return 0;
}

/* ---- how deep the messages nest, read from the wire format ---------------- */

/* A varint at *pos, before end. */
static bool read_varint(const uint8_t *data, size_t end, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && *pos < end; shift += 7) {
        uint8_t b = data[(*pos)++];
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* One message being walked: where it ends and its schema. */
typedef struct nest_frame {
    size_t end;
    const ProtobufCMessageDescriptor *desc;
} nest_frame;

/* Refuses bytes whose messages nest deeper than DP__ONNX_MAX_DEPTH, before
 * protobuf-c's unpack would recurse into them (3,000 If bodies nested in
 * 131 KB overflowed its stack). One pass over the wire format, the schema
 * (protobuf-c's descriptors) telling which length-delimited fields are
 * messages; the walk keeps one frame per level, so it cannot recurse
 * itself. Bytes it cannot follow are left to protobuf-c, which refuses
 * them. */
static int check_nesting(const uint8_t *data, size_t size, const char *name)
{
    nest_frame stack[DP__ONNX_MAX_DEPTH];
    int depth = 1, graphs = 0;
    stack[0] = (nest_frame){size, &onnx__model_proto__descriptor};
    size_t pos = 0;
    while (depth > 0) {
        const nest_frame *f = &stack[depth - 1];
        uint64_t key, v;
        if (pos == f->end) {
            graphs -= f->desc == &onnx__graph_proto__descriptor;
            depth--;
            continue;
        }
        if (!read_varint(data, f->end, &pos, &key))
            return 0;
        switch (key & 7) {
        case 0: /* varint */
            if (!read_varint(data, f->end, &pos, &v))
                return 0;
            break;
        case 1: /* 64 bits */
        case 5: /* 32 bits */
            if (f->end - pos < ((key & 7) == 1 ? 8u : 4u))
                return 0;
            pos += (key & 7) == 1 ? 8 : 4;
            break;
        case 2: { /* length-delimited: bytes, a string, packed numbers or a message */
            if (!read_varint(data, f->end, &pos, &v) || v > f->end - pos)
                return 0;
            const ProtobufCFieldDescriptor *fd =
                key >> 3 <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(f->desc, (unsigned)(key >> 3))
                    : NULL;
            if (!fd || fd->type != PROTOBUF_C_TYPE_MESSAGE) {
                pos += (size_t)v;
                break;
            }
            const ProtobufCMessageDescriptor *inner = fd->descriptor;
            graphs += inner == &onnx__graph_proto__descriptor;
            if (depth == DP__ONNX_MAX_DEPTH) {
                if (graphs > 1)
                    DP_ERROR("%s: messages nested more than %d deep (at byte %zu, %d graphs "
                             "deep: the bodies of If, Loop or Scan nodes, each inside the "
                             "one before): refused before decoding",
                             name, DP__ONNX_MAX_DEPTH, pos, graphs);
                else
                    DP_ERROR("%s: messages nested more than %d deep (at byte %zu, a %s inside "
                             "a %s): refused before decoding",
                             name, DP__ONNX_MAX_DEPTH, pos, inner->short_name, f->desc->short_name);
                return DP_EFORMAT;
            }
            stack[depth++] = (nest_frame){pos + (size_t)v, inner};
            break;
        }
        default: /* groups, which ONNX never uses */
            return 0;
        }
    }
    return 0;
}

int dp__onnx_decode(Onnx__ModelProto **out, const uint8_t *data, size_t size, const char *name)
{
    *out = NULL;
    if (size == 0) {
        DP_ERROR("%s: empty, not an ONNX model", name);
        return DP_EFORMAT;
    }
    if (size > DP__ONNX_MAX_BYTES) {
        DP_ERROR("%s: over 2 GiB, more than a protobuf message holds (models that big keep "
                 "their weights in external files, which dptrain does not read)",
                 name);
        return DP_EFORMAT;
    }
    DP_TRY(check_nesting(data, size, name));
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
    if (!m) {
        /* Every exporter writes ir_version first (field 1, a varint: 0x08). */
        if (data[0] == 0x08)
            DP_ERROR("%s: truncated or damaged: protobuf-c cannot decode it as an ONNX model",
                     name);
        else
            DP_ERROR("%s: not an ONNX model (not a protobuf ModelProto)", name);
        return DP_EFORMAT;
    }
    int rc = check_model(m, name);
    if (rc < 0) {
        dp__onnx_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int dp__onnx_read(Onnx__ModelProto **out, const char *path)
{
    *out = NULL;
    uint64_t file_size;
    int fd = dp__open_regular(path, &file_size);
    if (fd < 0)
        return fd;
    if (file_size > DP__ONNX_MAX_BYTES) {
        close(fd);
        return dp__onnx_decode(out, (const uint8_t *)"", DP__ONNX_MAX_BYTES + 1, path);
    }
    size_t size = (size_t)file_size;
    uint8_t *data = dp__malloc(size ? size : 1);
    size_t got = 0;
    while (data && got < size) {
        ssize_t r = read(fd, data + got, size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!data)
        return DP_ENOMEM;
    int rc;
    if (got != size) {
        DP_ERROR("%s: cannot read the ONNX model", path);
        rc = DP_EIO;
    } else {
        rc = dp__onnx_decode(out, data, size, path);
    }
    dp__free(data);
    return rc;
}

int dp__onnx_write(const Onnx__ModelProto *m, const char *path)
{
    size_t n = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = dp__malloc(n ? n : 1);
    if (!buf)
        return DP_ENOMEM;
    onnx__model_proto__pack(m, buf);
    size_t plen = strlen(path);
    char *tmp = dp__malloc(plen + 8);
    if (!tmp) {
        dp__free(buf);
        return DP_ENOMEM;
    }
    snprintf(tmp, plen + 8, "%s.tmp", path);
    int rc = 0;
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        DP_ERROR("%s: cannot write the ONNX model: %s", path, strerror(errno));
        rc = DP_EIO;
    }
    if (f && fclose(f) != 0 && rc == 0) {
        DP_ERROR("%s: cannot write the ONNX model: %s", path, strerror(errno));
        rc = DP_EIO;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        DP_ERROR("%s: cannot write the ONNX model: %s", path, strerror(errno));
        rc = DP_EIO;
    }
    if (rc < 0)
        unlink(tmp);
    dp__free(tmp);
    dp__free(buf);
    return rc;
}
