/* dp/data.h - IDX files, Fashion-MNIST, MNIST, CIFAR-10, folders of PNG and
 * JPEG images (torchvision's ImageFolder), NumPy's .npy files, datasets a
 * program fills itself, and the prefetching batch loader. */
#ifndef DP_DATA_H
#define DP_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One IDX file in memory (http://yann.lecun.com/exdb/mnist/ format). */
typedef struct dp_idx {
    uint8_t type;    /* element type code: 0x08 unsigned byte is the only one read */
    int ndims;       /* 1..4 */
    int64_t dims[4]; /* big-endian sizes from the header */
    uint8_t *data;   /* dims[0] * ... * dims[ndims-1] bytes */
    size_t size;     /* bytes in data */
} dp_idx;

/* Reads an IDX file, gzip-compressed or plain (told apart by the gzip magic).
 * Errors: DP_ENOENT (missing), DP_EFORMAT (wrong magic, bad type or dims,
 * corrupt gzip), DP_ETRUNC (fewer bytes than the header promises), each
 * logged with the file name and what is wrong. */
int dp_idx_read(const char *path, dp_idx *out);
void dp_idx_close(dp_idx *idx);

/* Images with labels. Pixels are floats, in [0, 1] for the file formats,
 * held either as floats (`images`) or as bytes (`pixels`, scaled by 1/255
 * as each batch is gathered: a quarter of the memory), never both. */
typedef struct dp_dataset {
    int64_t n;       /* samples */
    int channels;    /* 1 for the IDX sets, 3 for CIFAR-10; 0 is read as 1 */
    int rows, cols;  /* 28 x 28 for (Fashion-)MNIST, 32 x 32 for CIFAR-10 */
    float *images;   /* [n, channels, rows, cols], or NULL when `pixels` holds them */
    int32_t *labels; /* [n], 0..9 for the file formats */
    /* The images as bytes [n, channels, rows, cols] (image folders, .npy
     * files of uint8), else NULL. */
    uint8_t *pixels;
    /* The labels are below `classes` (0: not known); class_names[0..classes)
     * name them where the data does (a folder's class directories), else
     * class_names is NULL. */
    int classes;
    char **class_names;
    /* A streamed dataset (an image folder by default): NULL `images` and
     * `pixels`; the source reads sample i when the loader asks for it, its
     * (channels, rows, cols) above, its labels [n] in `labels`. NULL for a
     * dataset held in memory. dp_dataset_close closes it. */
    struct dp_dataset_source *source;
} dp_dataset;

/* Where Debian's dataset-fashion-mnist package puts the files. */
#define DP_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Loads the train (60000) or test (10000) split from `dir` (NULL: the Debian
 * directory), finding `train-images-idx3-ubyte` with or without `.gz`.
 * Checks that images and labels agree in count and labels are below 10. */
int dp_fashion_mnist_load(const char *dir, bool train, dp_dataset *out);

/* MNIST: the same four IDX file names and checks as Fashion-MNIST, but no
 * package installs it, so `dir` is required (NULL is DP_EINVAL); a missing
 * file's error says where to get it. */
int dp_mnist_load(const char *dir, bool train, dp_dataset *out);

/* CIFAR-10, binary version: data_batch_1.bin .. data_batch_5.bin (train,
 * 50000) or test_batch.bin (10000), in `dir` or in its cifar-10-batches-bin/
 * (as the tarball unpacks). Each record is 1 label byte, then 3 x 32 x 32
 * pixel bytes as three planes (R, G, B): channels 0, 1, 2 of the sample.
 * `dir` is required. Errors, each naming the file: DP_ENOENT (missing),
 * DP_ETRUNC (not a whole number of 3073-byte records), DP_EFORMAT (a label
 * over 9, with its record index). */
int dp_cifar10_load(const char *dir, bool train, dp_dataset *out);

/* A dataset from a program's own arrays, copied (dp_dataset_close frees
 * the copy): n samples of [channels, rows, cols], given either as floats
 * (`images`, used as they are) or as bytes (`bytes`, scaled by 1/255),
 * the other NULL; labels [n] each in 0..classes-1 (an error names the first
 * index that is not). */
int dp_dataset_from_memory(dp_dataset *out, int64_t n, int channels, int rows, int cols,
                           const float *images, const uint8_t *bytes, const int32_t *labels,
                           int classes);

/* ---- images, image folders, .npy files ----------------------------------- */

/* One decoded image: pixels [channels, rows, cols], one byte each. */
typedef struct dp_image {
    int channels; /* 1 (grayscale) or 3 (RGB) */
    int rows, cols;
    uint8_t *pixels;
} dp_image;

/* The largest side and pixel count an image may have (a small file can
 * declare a huge image: it is refused before anything is allocated). */
#define DP_IMAGE_MAX_SIDE 16384
#define DP_IMAGE_MAX_PIXELS ((int64_t)1 << 26)

/* Decodes a PNG (libpng) or a JPEG (libjpeg-turbo), told apart by their
 * first bytes, from buf[0..len), `name` naming it in messages. channels 1
 * or 3 converts as PIL's convert("L") and convert("RGB") do (luma
 * L = (19595 R + 38470 G + 7471 B + 32768) >> 16; gray copied to R, G, B;
 * alpha dropped; 16-bit samples cut to their high byte); 0 keeps the file's:
 * 1 for gray (with or without alpha), else 3. Errors, one line starting
 * with `name`: DP_EFORMAT (neither format, a damaged or truncated file: a
 * JPEG's "premature end" too, which libjpeg would fill with gray),
 * DP_EINVAL (larger than DP_IMAGE_MAX_SIDE or DP_IMAGE_MAX_PIXELS). */
int dp_image_decode(const void *buf, size_t len, const char *name, int channels, dp_image *out);
/* dp_image_decode of the file at `path` (DP_ENOENT, DP_EIO as the file
 * says). */
int dp_image_read(const char *path, int channels, dp_image *out);
void dp_image_close(dp_image *img);

/* One split of a folder of images as torchvision's ImageFolder reads it:
 * DIR/train/CLASS/... or DIR/test/CLASS/..., the classes the directories
 * sorted by name (label k is the k-th), in each the .png, .jpg and .jpeg
 * files (any case) of it and its subdirectories in sorted(os.walk())'s
 * order; other files are passed over. Every image is decoded up front
 * into `pixels` (bytes: n x channels x rows x cols of memory), with
 * `channels` 1 or 3 (0: the first image's, as dp_image_decode). Every
 * image must have the first one's size: one of another size is refused
 * (DP_EINVAL), not resized, with both sizes. Errors name the file or
 * directory: an empty class directory, no class directory, a file that
 * does not decode. */
int dp_image_folder_load(const char *dir, bool train, int channels, dp_dataset *out);

/* What happens to an image that does not decode, found when the loader
 * reaches it: the run stops with its line (STOP, the default), or the
 * sample is left out of its batch and counted (SKIP). */
typedef enum dp_bad_images {
    DP_BAD_IMAGES_STOP = 0,
    DP_BAD_IMAGES_SKIP = 1,
} dp_bad_images;

struct dp_transform_list;

/* How dp_image_folder_open reads a split. */
typedef struct dp_folder_options {
    int channels; /* 1 or 3; 0: the first image's */
    /* The split's transforms (dp/transform.h); NULL or empty: none, and
     * then every image must have the first one's size. */
    const struct dp_transform_list *transform;
    int jpeg_scale; /* dp_jpeg_scale (dp/transform.h): 0 auto, 1 off */
    /* Decode every file into memory up front (its own size each), the
     * transforms drawn per epoch: for sets that fit. Else (the default)
     * the split is streamed: only the file list is read here (and the
     * first image, for the channels and, without a size-fixing stage, the
     * size), each image read and decoded as the loader needs it. */
    bool cache;
} dp_folder_options;

/* One split of a folder of images (ImageFolder's layout and order, as
 * dp_image_folder_load), streamed or cached as `opt` says, each sample of
 * the transforms' fixed output size (dp_transform_fixed_size), else of the
 * first image's: an image of another size is an error when it is read,
 * naming the file, both sizes and the stage that would fix it. */
int dp_image_folder_open(const char *dir, bool train, const dp_folder_options *opt,
                         dp_dataset *out);
/* How many image files a streamed dataset's source has read for samples
 * so far (all threads together; a folder's look at its first image counts
 * as sample 0's read; 0 for a dataset in memory): what tests count to show
 * that each rank reads only its share. */
int64_t dp_dataset_files_opened(const dp_dataset *ds);

/* A NumPy array file (.npy, format versions 1.0, 2.0 and 3.0), read by
 * its own rules: the magic, the header dict with exactly 'descr',
 * 'fortran_order' and 'shape', C order only, and exactly the bytes the
 * shape asks for after the header. */
typedef enum dp_npy_dtype {
    DP_NPY_U8 = 0,  /* '|u1' */
    DP_NPY_I32 = 1, /* '<i4' */
    DP_NPY_I64 = 2, /* '<i8' */
    DP_NPY_F32 = 3, /* '<f4' */
} dp_npy_dtype;
#define DP_NPY_MAX_DIMS 8
typedef struct dp_npy {
    dp_npy_dtype dtype;
    int ndim; /* 0 to DP_NPY_MAX_DIMS */
    int64_t shape[DP_NPY_MAX_DIMS];
    void *data;  /* the elements, little-endian as the file has them */
    size_t size; /* bytes in data */
} dp_npy;
/* Errors, one line naming the file and what is wrong: DP_ENOENT, DP_EIO,
 * DP_EFORMAT (a bad magic, version or header; a dtype other than the four
 * above; Fortran order; bytes after the data), DP_ETRUNC (fewer bytes than
 * the shape needs). */
int dp_npy_read(const char *path, dp_npy *out);
void dp_npy_close(dp_npy *a);
/* Writes a->data (a->size bytes, C order, little-endian) of a->dtype and
 * a->shape as np.save does (format 1.0, the header padded to 64 bytes), so
 * that np.load and dp_npy_read read it back. A size that does not match
 * the shape is DP_EINVAL; a file that cannot be written, DP_EIO with one
 * line naming it (a partly written file is removed). */
int dp_npy_write(const char *path, const dp_npy *a);

/* One split of a dataset of .npy files: DIR/train/images.npy and
 * DIR/train/labels.npy, or DIR/test/..., as np.save writes them: images
 * uint8 (scaled by 1/255, held as bytes) or float32 (as they are) of shape
 * (N, H, W) or (N, C, H, W), labels int64, int32 or uint8 of shape (N,),
 * each from 0 to 2^20 - 1. */
int dp_npy_dataset_load(const char *dir, bool train, dp_dataset *out);

/* The datasets dp_dataset_load knows, NULL-terminated: "fashion-mnist"
 * (the default), "mnist", "cifar10", "folder" (dp_image_folder_load, with
 * the first image's channels) and "npy" (dp_npy_dataset_load). */
const char *const *dp_dataset_names(void);
/* One split of dataset `name` (NULL: fashion-mnist) from `dir` (NULL: where
 * the dataset has a default, else an error). */
int dp_dataset_load(const char *name, const char *dir, bool train, dp_dataset *out);
/* Sample i of ds as the loader gets it, before --augment and Normalize:
 * floats [channels, rows, cols] into out, the draws of (seed, epoch, i)
 * for a streamed set's transforms. 0, or the negative DP_E* code of a
 * file that does not decode (its line logged). */
int dp_dataset_read(const dp_dataset *ds, int64_t i, uint64_t seed, int64_t epoch, float *out);
/* The (C, H, W) of dataset `name`'s training samples and their count, from
 * its files' headers alone, before anything is loaded; a header that
 * dp_dataset_load would refuse is refused the same way. Returns 0, 1 where
 * only loading tells (a folder of images; nothing logged), or a negative
 * DP_E* code. */
int dp_dataset_sample_shape(const char *name, const char *dir, int64_t chw[3], int64_t *n);
/* The dataset's channels, reading 0 as 1. */
int dp_dataset_channels(const dp_dataset *ds);
/* Samples [first, first + count) as floats into out (count x channels x
 * rows x cols), from `images` or `pixels`, or a streamed set's source (its
 * draws of seed 0, epoch 0; a sample that does not read is zeros, and not
 * reported: the loader reports it when it reaches it). */
void dp_dataset_get(const dp_dataset *ds, int64_t first, int64_t count, float *out);
void dp_dataset_close(dp_dataset *ds);

/* The ten class names, as d2l's get_fashion_mnist_labels. */
const char *dp_fashion_mnist_label(int label);
/* The class names of a built-in dataset (classes[0..10)): Fashion-MNIST's,
 * CIFAR-10's ("airplane", ..., "truck"), MNIST's "0".."9"; NULL for
 * another name. */
const char *const *dp_dataset_builtin_classes(const char *name);

/* ---- augmentation and normalisation --------------------------------------
 * What torchvision's transforms do to a training image, in their order:
 * RandomCrop(size, padding=crop_pad) (zero padding, the output the input's
 * size), RandomHorizontalFlip(p=0.5), Normalize(mean, std). The loader
 * applies them on its thread, to each sample of a batch before the batch
 * is split over ranks and devices. A sample's random draws are a pure
 * function of (seed, epoch, the sample's index in the dataset): 1 device,
 * N devices, N ranks and a resumed run see the same images, whatever the
 * batch size or the loader's timing. */
#define DP_AUGMENT_MAX_CHANNELS 16

typedef struct dp_augment_options {
    int crop_pad; /* RandomCrop's padding, 0 to DP_AUGMENT_MAX_PAD; 0: no crop */
    bool flip;    /* RandomHorizontalFlip(p=0.5) */
    /* Normalize: 0 for none; 1 for one mean and std for every channel (as
     * Normalize((m,), (s,)) broadcasts); else one pair per channel. */
    int norm_channels;
    float mean[DP_AUGMENT_MAX_CHANNELS], std[DP_AUGMENT_MAX_CHANNELS];
} dp_augment_options;

#define DP_AUGMENT_MAX_PAD 1024

/* One sample's draws: the crop's corner in the padded image (torchvision's
 * i, j of crop(pad(img, crop_pad), top, left, rows, cols)), each in
 * 0..2 * crop_pad, and whether it is flipped after the crop. */
typedef struct dp_augment_draw {
    int top, left;
    bool flip;
} dp_augment_draw;

/* "crop:PAD", "flip" or both, comma-separated, in any order ("crop:4,flip");
 * "none" for neither. Sets crop_pad and flip of *o only. DP_EINVAL (and *o
 * unchanged) for anything else. */
int dp_augment_parse(const char *spec, dp_augment_options *o);
/* "M1,...,Mc,S1,...,Sc": c means, then c standard deviations (each > 0),
 * torchvision's Normalize(mean, std) flattened: "0.2860,0.3530" for
 * Fashion-MNIST, "0.4914,0.4822,0.4465,0.2470,0.2435,0.2616" for CIFAR-10;
 * "none" for none. Sets the normalisation of *o only; DP_EINVAL (*o
 * unchanged) otherwise. */
int dp_normalize_parse(const char *spec, dp_augment_options *o);
/* The options for samples of `channels` channels: DP_EINVAL, with a
 * message, for a padding out of range, a std that is not above 0, or
 * another count of means than 1 or `channels`. */
int dp_augment_check(const dp_augment_options *o, int channels);
/* Whether the options do anything; whether they draw anything. */
bool dp_augment_any(const dp_augment_options *o);
bool dp_augment_random(const dp_augment_options *o);
/* The options back in the syntax of dp_augment_parse ("crop:4,flip",
 * "none") and of dp_normalize_parse ("0.286,0.353", "none"), for records:
 * parsed, each gives the same options. */
const char *dp_augment_str(const dp_augment_options *o, char *buf, size_t size);
const char *dp_normalize_str(const dp_augment_options *o, char *buf, size_t size);
/* Sample `index`'s draws in epoch `epoch` of a run seeded with `seed`: from
 * the counter-based RNG's stream (1 << 62) | epoch << 40 | index, top, left
 * (with crop_pad), then the flip (with flip); all zero for what is off. */
void dp_augment_draw_for(const dp_augment_options *o, uint64_t seed, int64_t epoch, int64_t index,
                         dp_augment_draw *d);
/* One sample [channels, rows, cols] from src to dst (not the same memory):
 * cropped at d (NULL: not cropped or flipped), flipped as d says, then
 * normalised, (x - mean) / std in float as Normalize's sub_ and div_. */
void dp_augment_apply(const dp_augment_options *o, const dp_augment_draw *d, int channels, int rows,
                      int cols, const float *src, float *dst);

/* ---- loader -------------------------------------------------------------
 * Shuffles with a seed (a new permutation each epoch, a pure function of
 * seed and epoch), cuts batches (the last one partial), and prepares the
 * next `prefetch` batches on a pool of `workers` threads while the caller
 * trains on the current one; each batch is handed out whole, in order.
 * Every sample's pixels are a function of (seed, epoch, its index) alone:
 * the batches are the same bit for bit whatever the workers, the timing,
 * the ranks or a resume. Under mpirun each rank fills only its rows of
 * every global batch (torch.chunk's, as dp_chunk_sizes), so it reads only
 * its share of the files (DistributedSampler's split of one permutation). */
typedef struct dp_loader dp_loader_t;

typedef struct dp_loader_options {
    int64_t batch_size; /* > 0 */
    bool shuffle;       /* false: file order */
    uint64_t seed;
    int64_t limit; /* use the first `limit` samples; 0 = all */
    int prefetch;  /* batches prepared ahead; 0 = default (2) */
    /* Applied to every sample, the draws from `seed`, the epoch and the
     * sample's index; zero: the samples as they are. */
    dp_augment_options augment;
    /* Threads reading and decoding samples; 0 = the default: the cores
     * this process may run on (sched_getaffinity), at most 16. */
    int workers;
    /* This process's rank of `ranks` (0 of 0 or 1: every row). */
    int rank, ranks;
    dp_bad_images bad_images;
} dp_loader_options;

typedef struct dp_batch {
    const float *x;   /* [rows, channels, rows, cols]: this rank's rows */
    const int32_t *y; /* [rows] */
    int64_t n;        /* samples in the global batch (<= batch_size), less skipped ones */
    int64_t index;    /* batch number within the epoch, from 0 */
    int64_t first;    /* the global batch's row that x[0] is (0 with one rank) */
    int64_t rows;     /* rows in x: this rank's chunk (all n with one rank), less skipped */
    int64_t skipped;  /* bad images this rank left out of the batch (bad_images skip) */
} dp_batch;

int dp_loader_init(dp_loader_t **out, const dp_dataset *ds, const dp_loader_options *opt);
/* Starts epoch `epoch` (from 0) at batch `first_batch` (0 normally; resuming
 * passes where it stopped). */
int dp_loader_start_epoch(dp_loader_t *l, int64_t epoch, int64_t first_batch);
/* Starts epoch `epoch` reading the samples in the caller's order: order[0..n)
 * is a permutation of 0 .. n-1 (n = dp_loader_num_samples), copied; the
 * shuffle flag is passed over. For a front end that reproduces another
 * framework's sampler (the Python DataLoader draws PyTorch's). A dataset of
 * shards, which reads in its own order, is refused with DP_EINVAL. */
int dp_loader_start_epoch_in_order(dp_loader_t *l, int64_t epoch, const int64_t *order);
/* 1 and the next batch, or 0 at the end of the epoch. The batch's memory
 * stays valid until the next call of dp_loader_next or dp_loader_start_epoch.
 * A sample that did not decode: with bad_images stop, its error code
 * (the file's line was logged when a worker met it); with skip, the batch
 * without it. */
int dp_loader_next(dp_loader_t *l, dp_batch *out);
int64_t dp_loader_num_batches(const dp_loader_t *l);
int64_t dp_loader_num_samples(const dp_loader_t *l);
void dp_loader_close(dp_loader_t *l);

#ifdef __cplusplus
}
#endif
/* The transforms' types (dp_transform_list), which the training options
 * hold: transform.h includes this header first, so either order works. */
#include "dp/transform.h"

#endif /* DP_DATA_H */
