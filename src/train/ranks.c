/* Many processes under mpirun: each rank takes its chunk of every global
 * batch, and all must have been started with the same options. */
#include "train/trainer.h"

#include "core/internal.h"

#include <string.h>

/* This rank's rows of a global batch of n: chunk `rank` of torch.chunk(n,
 * ranks), starting at row *first. */
int64_t dp__train_rank_rows(const dp__trainer *t, int64_t n, int64_t *first)
{
    int64_t sizes[DP_MAX_RANKS];
    dp_chunk_sizes(n, t->ranks, sizes);
    *first = 0;
    for (int r = 0; r < t->rank; r++)
        *first += sizes[r];
    return sizes[t->rank];
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* Every rank must train the same model on the same batches: a rank started
 * with other options would silently train something else. One small
 * allgather per option (at start, 20 words per rank), so that the error
 * names the one that differs, as the dp_train_options field (the command
 * line turns it into its flag). */
int dp__train_check_ranks_agree(const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    const char *model = dp__train_model_name(o);
    const char *dataset = o->dataset ? o->dataset : "fashion-mnist";
    const char *stages = o->stages ? o->stages : "";
    char augment[512], normalize[512];
    dp_augment_str(&o->augment, augment, sizeof augment);
    dp_normalize_str(&o->augment, normalize, sizeof normalize);
    const struct {
        const char *field;
        const void *value;
        size_t size;
    } opts[] = {
        {"dp_train_options.model", model, strlen(model) + 1},
        {"dp_train_options.dataset", dataset, strlen(dataset) + 1},
        {"dp_train_options.batch_size", &o->batch_size, sizeof o->batch_size},
        {"dp_train_options.lr", &o->lr, sizeof o->lr},
        {"dp_train_options.momentum", &o->momentum, sizeof o->momentum},
        {"dp_train_options.weight_decay", &o->weight_decay, sizeof o->weight_decay},
        {"dp_train_options.epochs", &o->epochs, sizeof o->epochs},
        {"dp_train_options.seed", &o->seed, sizeof o->seed},
        {"dp_train_options.shuffle", &o->shuffle, sizeof o->shuffle},
        {"dp_train_options.limit_train", &o->limit_train, sizeof o->limit_train},
        {"dp_train_options.limit_test", &o->limit_test, sizeof o->limit_test},
        {"dp_train_options.sync_bn", &o->sync_bn, sizeof o->sync_bn},
        {"dp_train_options.bucket_mb", &o->bucket_mb, sizeof o->bucket_mb},
        {"dp_train_options.grad_compress", &o->grad_compress, sizeof o->grad_compress},
        {"dp_train_options.pipeline", &o->pipeline, sizeof o->pipeline},
        {"dp_train_options.stages", stages, strlen(stages) + 1},
        {"dp_train_options.micro_batches", &o->micro_batches, sizeof o->micro_batches},
        {"dp_train_options.schedule", &o->schedule, sizeof o->schedule},
        {"dp_train_options.precision", &o->precision, sizeof o->precision},
        {"dp_train_options.conv_algo", &o->conv_algo, sizeof o->conv_algo},
        {"dp_train_options.split_invariant", &o->split_invariant, sizeof o->split_invariant},
        {"dp_train_options.augment", augment, strlen(augment) + 1},
        {"dp_train_options.augment", normalize, strlen(normalize) + 1},
    };
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        uint64_t h = fnv1a(14695981039346656037ull, opts[i].value, opts[i].size);
        uint64_t all[DP_MAX_RANKS];
        DP_TRY(dp_dist_gather_u64(h, all));
        for (int r = 1; r < t->ranks; r++) {
            if (all[r] != all[0]) {
                DP_ERROR("rank %d was started with another %s than rank 0 (the model, dataset, "
                         "batch size, lr, momentum, weight decay, epochs, seed, shuffle, limits, "
                         "sync batch norm, bucket size, gradient compression, pipeline, precision, "
                         "convolution algorithm, split-invariant sums and augmentation must be the "
                         "same on every rank)",
                         r, opts[i].field);
                return DP_EINVAL;
            }
        }
    }
    return 0;
}
