/* PNG (libpng) and JPEG (libjpeg-turbo) decoding into dp_image, with the
 * channel conversions of PIL's convert("L") and convert("RGB"), so that
 * an image reads here as torchvision's ImageFolder (PIL) reads it.
 *
 * Both libraries report a bad file by a callback that must not return:
 * it records the library's message and longjmps back to the decoder,
 * which frees what it allocated (the buffers it touches after setjmp are
 * volatile) and logs one line naming the file. A JPEG's warnings (corrupt
 * data, premature end of file, which libjpeg would paper over with gray)
 * are errors here, as a truncated file is for PIL. The size is checked
 * against DP_IMAGE_MAX_SIDE and DP_IMAGE_MAX_PIXELS from the header,
 * before the pixels are allocated. */
#include "data/dataset.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

/* Files larger than this are not images we train on. */
#define IMAGE_MAX_FILE ((size_t)256 << 20)

/* ---- size checks and the conversion to [channels, rows, cols] ------------ */

static int check_size(const char *name, int64_t width, int64_t height)
{
    if (width < 1 || height < 1 || width > DP_IMAGE_MAX_SIDE || height > DP_IMAGE_MAX_SIDE ||
        width * height > DP_IMAGE_MAX_PIXELS) {
        DP_ERROR("%s: %lldx%lld pixels: images of at most %dx%d and %lld pixels are read", name,
                 (long long)width, (long long)height, DP_IMAGE_MAX_SIDE, DP_IMAGE_MAX_SIDE,
                 (long long)DP_IMAGE_MAX_PIXELS);
        return DP_EINVAL;
    }
    return 0;
}

/* Interleaved rows x cols x have (1 or 3) bytes into out's planes, with
 * `want` channels (0: have). */
static int to_planes(const uint8_t *hwc, int rows, int cols, int have, int want, dp_image *out)
{
    want = want ? want : have;
    size_t plane = (size_t)rows * (size_t)cols;
    out->pixels = dp__malloc(plane * (size_t)want);
    if (!out->pixels)
        return DP_ENOMEM;
    out->channels = want;
    out->rows = rows;
    out->cols = cols;
    if (want == 3 && have == 3) { /* the common case, without the per-pixel branches */
        uint8_t *r = out->pixels, *g = r + plane, *b = g + plane;
        for (size_t i = 0; i < plane; i++) {
            r[i] = hwc[3 * i];
            g[i] = hwc[3 * i + 1];
            b[i] = hwc[3 * i + 2];
        }
        return 0;
    }
    for (size_t i = 0; i < plane; i++) {
        const uint8_t *p = hwc + i * (size_t)have;
        if (want == have) {
            for (int c = 0; c < want; c++)
                out->pixels[(size_t)c * plane + i] = p[c];
        } else if (want == 3) { /* gray to RGB: copied */
            for (int c = 0; c < 3; c++)
                out->pixels[(size_t)c * plane + i] = p[0];
        } else { /* RGB to gray: PIL's ITU-R 601-2 luma, in its fixed point */
            uint32_t l = (uint32_t)p[0] * 19595 + (uint32_t)p[1] * 38470 + (uint32_t)p[2] * 7471;
            out->pixels[i] = (uint8_t)((l + 0x8000) >> 16);
        }
    }
    return 0;
}

/* ---- PNG ------------------------------------------------------------------ */

typedef struct png_src {
    const uint8_t *p;
    size_t n, pos;
    char msg[256];
} png_src;

static void png_read_mem(png_structp png, png_bytep out, size_t n)
{
    png_src *s = png_get_io_ptr(png);
    if (n > s->n - s->pos)
        png_error(png, "the file ends early (truncated)");
    memcpy(out, s->p + s->pos, n);
    s->pos += n;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* ancillary trouble (a bad iCCP, a tEXt): PIL reads on too */
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int decode_png(const uint8_t *buf, size_t len, const char *name, int channels, dp_image *out)
{
    /* The size from the IHDR chunk, which follows the signature (its 13
     * bytes and CRC intact; else libpng says what is wrong): libpng refuses
     * a size past its user limits as "Invalid IHDR data", which names
     * neither the size nor the limit. */
    if (len >= 33 && be32(buf + 8) == 13 && memcmp(buf + 12, "IHDR", 4) == 0 &&
        crc32(0L, buf + 12, 17) == be32(buf + 29))
        DP_TRY(check_size(name, be32(buf + 16), be32(buf + 20)));
    png_src src = {.p = buf, .n = len};
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return DP_ENOMEM;
    }
    uint8_t *volatile hwc = NULL;
    png_bytep *volatile rowp = NULL;
    volatile int rc = 0;
    if (setjmp(png_jmpbuf(png))) {
        if (rc == 0) {
            DP_ERROR("%s: not a readable PNG: %s", name, src.msg);
            rc = DP_EFORMAT;
        }
        goto done;
    }
    png_set_user_limits(png, DP_IMAGE_MAX_SIDE, DP_IMAGE_MAX_SIDE);
    png_set_chunk_malloc_max(png, (png_alloc_size_t)64 << 20);
    png_set_read_fn(png, &src, png_read_mem);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if ((rc = check_size(name, w, h)) < 0)
        goto done;
    /* As PIL's convert: palettes and low bit depths to 8-bit gray or RGB,
     * 16 bits to their high byte, transparency dropped. */
    png_set_expand(png);
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int have = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if ((have != 1 && have != 3) || rowbytes != (size_t)w * (size_t)have) {
        DP_ERROR("%s: not a readable PNG: %d channels of %zu bytes a row after conversion", name,
                 have, rowbytes);
        rc = DP_EFORMAT;
        goto done;
    }
    hwc = dp__malloc((size_t)h * rowbytes);
    rowp = dp__malloc((size_t)h * sizeof *rowp);
    if (!hwc || !rowp) {
        rc = DP_ENOMEM;
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++)
        rowp[y] = hwc + (size_t)y * rowbytes;
    png_read_image(png, rowp);
    png_read_end(png, NULL);
    rc = to_planes(hwc, (int)h, (int)w, have, channels, out);
done:
    png_destroy_read_struct(&png, &info, NULL);
    dp__free(rowp);
    dp__free(hwc);
    return rc;
}

/* ---- JPEG ----------------------------------------------------------------- */

typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_on_error(j_common_ptr c)
{
    jpeg_err *e = (jpeg_err *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jump, 1);
}

/* Level -1 is a warning: the data are corrupt or cut short. */
static void jpeg_on_message(j_common_ptr c, int level)
{
    if (level < 0)
        jpeg_on_error(c);
}

/* libjpeg's errors, and its warnings of corrupt data, as a longjmp to
 * err->jump with the message in err->msg (the caller's setjmp). */
static void jpeg_err_init(struct jpeg_decompress_struct *cinfo, jpeg_err *err)
{
    memset(err, 0, sizeof *err);
    cinfo->err = jpeg_std_error(&err->pub);
    err->pub.error_exit = jpeg_on_error;
    err->pub.emit_message = jpeg_on_message;
}

/* After the caller's setjmp(err.jump): the decompressor made over buf,
 * its header read and checked (size, no CMYK) and its output set to gray
 * or RGB: 0, or a code after one line naming `name`. A libjpeg error
 * longjmps to the caller, whose jpeg_destroy_decompress ends it either
 * way. */
static int jpeg_open(struct jpeg_decompress_struct *cinfo, const uint8_t *buf, size_t len,
                     const char *name)
{
    jpeg_create_decompress(cinfo);
    jpeg_mem_src(cinfo, buf, (unsigned long)len);
    jpeg_read_header(cinfo, TRUE);
    DP_TRY(check_size(name, cinfo->image_width, cinfo->image_height));
    if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
        DP_ERROR("%s: a CMYK JPEG: save it as RGB", name);
        return DP_EFORMAT;
    }
    cinfo->out_color_space = cinfo->jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
    return 0;
}

static int decode_jpeg(const uint8_t *buf, size_t len, const char *name, int channels,
                       dp_image *out)
{
    struct jpeg_decompress_struct cinfo;
    jpeg_err err;
    jpeg_err_init(&cinfo, &err);
    uint8_t *volatile hwc = NULL;
    volatile int rc = 0;
    if (setjmp(err.jump)) {
        if (rc == 0) {
            DP_ERROR("%s: not a readable JPEG: %s", name, err.msg);
            rc = DP_EFORMAT;
        }
        goto done;
    }
    if ((rc = jpeg_open(&cinfo, buf, len, name)) < 0)
        goto done;
    jpeg_start_decompress(&cinfo);
    int have = cinfo.output_components;
    size_t rowbytes = (size_t)cinfo.output_width * (size_t)have;
    hwc = dp__malloc((size_t)cinfo.output_height * rowbytes);
    if (!hwc) {
        rc = DP_ENOMEM;
        goto done;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = hwc + (size_t)cinfo.output_scanline * rowbytes;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    rc = to_planes(hwc, (int)cinfo.output_height, (int)cinfo.output_width, have, channels, out);
done:
    jpeg_destroy_decompress(&cinfo);
    dp__free(hwc);
    return rc;
}

/* The header alone: the size and the channels a decode gives. */
int dp__jpeg_header(const void *buf, size_t len, const char *name, int *rows, int *cols,
                    int *channels)
{
    struct jpeg_decompress_struct cinfo;
    jpeg_err err;
    jpeg_err_init(&cinfo, &err);
    volatile int rc = 0;
    if (setjmp(err.jump)) {
        DP_ERROR("%s: not a readable JPEG: %s", name, err.msg);
        rc = DP_EFORMAT;
        goto done;
    }
    if ((rc = jpeg_open(&cinfo, buf, len, name)) < 0)
        goto done;
    *rows = (int)cinfo.image_height;
    *cols = (int)cinfo.image_width;
    *channels = cinfo.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
done:
    jpeg_destroy_decompress(&cinfo);
    return rc;
}

/* As decode_jpeg, at scale 1/denom and only the region's rows (skipped to
 * with jpeg_skip_scanlines) and iMCU columns (jpeg_crop_scanline widens
 * the columns to them); the rows below are never decoded, so corruption
 * there goes unseen, as it does for PIL's draft of a crop. */
int dp__jpeg_decode_region(const void *buf, size_t len, const char *name, int channels, int denom,
                           const int region[4], dp_image *out, int at[2])
{
    DP_ASSERT(buf && name && out && region && at);
    DP_ASSERT(denom == 1 || denom == 2 || denom == 4 || denom == 8);
    memset(out, 0, sizeof *out);
    struct jpeg_decompress_struct cinfo;
    jpeg_err err;
    jpeg_err_init(&cinfo, &err);
    uint8_t *volatile hwc = NULL;
    volatile int rc = 0;
    if (setjmp(err.jump)) {
        if (rc == 0) {
            DP_ERROR("%s: not a readable JPEG: %s", name, err.msg);
            rc = DP_EFORMAT;
        }
        goto done;
    }
    if ((rc = jpeg_open(&cinfo, buf, len, name)) < 0)
        goto done;
    cinfo.scale_num = 1;
    cinfo.scale_denom = (unsigned)denom;
    jpeg_start_decompress(&cinfo);
    int64_t h = cinfo.output_height, w = cinfo.output_width;
    int top = region[0], rows = region[2];
    if (region[0] < 0 || region[1] < 0 || region[2] < 1 || region[3] < 1 ||
        region[0] + (int64_t)region[2] > h || region[1] + (int64_t)region[3] > w) {
        DP_ERROR("%s: the region %d,%d %dx%d is outside the %lldx%lld image at 1/%d", name,
                 region[0], region[1], region[2], region[3], (long long)h, (long long)w, denom);
        rc = DP_EINVAL;
        goto done;
    }
    /* A crop that ends at the image's right edge is not made: there
     * libjpeg-turbo 2.1's fancy upsampling of subsampled chroma leaves the
     * last columns unwritten (valgrind sees them undefined). Inside the
     * image the last one or two columns of a crop, and its first, differ
     * from a full decode's: the caller's margin keeps them out of use. */
    JDIMENSION xoff = (JDIMENSION)region[1], width = (JDIMENSION)region[3];
    if (xoff + width < cinfo.output_width)
        jpeg_crop_scanline(&cinfo, &xoff, &width);
    else
        xoff = 0;
    if (top > 0)
        jpeg_skip_scanlines(&cinfo, (JDIMENSION)top);
    int have = cinfo.output_components;
    size_t rowbytes = (size_t)cinfo.output_width * (size_t)have;
    hwc = dp__malloc((size_t)rows * rowbytes);
    if (!hwc) {
        rc = DP_ENOMEM;
        goto done;
    }
    for (int y = 0; y < rows; y++) {
        JSAMPROW row = hwc + (size_t)y * rowbytes;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_abort_decompress(&cinfo);
    rc = to_planes(hwc, rows, (int)cinfo.output_width, have, channels, out);
    at[0] = top;
    at[1] = (int)xoff;
done:
    jpeg_destroy_decompress(&cinfo);
    dp__free(hwc);
    return rc;
}

/* ---- by content ----------------------------------------------------------- */

int dp_image_decode(const void *buf, size_t len, const char *name, int channels, dp_image *out)
{
    DP_ASSERT(out && name && (buf || len == 0));
    memset(out, 0, sizeof *out);
    if (channels != 0 && channels != 1 && channels != 3) {
        DP_ERROR("%s: %d channels: images are read with 1 (grayscale) or 3 (RGB)", name, channels);
        return DP_EINVAL;
    }
    const uint8_t *p = buf;
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len >= 8 && memcmp(p, png_sig, 8) == 0)
        return decode_png(p, len, name, channels, out);
    if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return decode_jpeg(p, len, name, channels, out);
    if (len == 0) {
        DP_ERROR("%s: an empty file, not a PNG or JPEG image", name);
        return DP_EFORMAT;
    }
    char first[16] = "";
    for (size_t i = 0, at = 0; i < DP_MIN(len, 4); i++)
        at += (size_t)snprintf(first + at, sizeof first - at, "%s%02x", i ? " " : "", p[i]);
    DP_ERROR("%s: not a PNG or JPEG image (it starts with the bytes %s)", name, first);
    return DP_EFORMAT;
}

int dp_image_read(const char *path, int channels, dp_image *out)
{
    DP_ASSERT(path && out);
    memset(out, 0, sizeof *out);
    uint64_t size;
    int fd = dp__open_regular(path, &size);
    if (fd < 0)
        return fd;
    if (size > IMAGE_MAX_FILE) {
        DP_ERROR("%s: over %zu MiB, more than an image file here", path, IMAGE_MAX_FILE >> 20);
        close(fd);
        return DP_EIO;
    }
    size_t n = (size_t)size, done = 0;
    uint8_t *buf = dp__malloc(n ? n : 1);
    int rc = buf ? 0 : DP_ENOMEM;
    while (rc == 0 && done < n) {
        ssize_t r = read(fd, buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            DP_ERROR("%s: read error: %s", path, r < 0 ? strerror(errno) : "the file shrank");
            rc = DP_EIO;
        } else {
            done += (size_t)r;
        }
    }
    close(fd);
    if (rc == 0)
        rc = dp_image_decode(buf, n, path, channels, out);
    dp__free(buf);
    return rc;
}

void dp_image_close(dp_image *img)
{
    if (!img)
        return;
    dp__free(img->pixels);
    memset(img, 0, sizeof *img);
}
