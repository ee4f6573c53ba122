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
 * with other options would silently train something else. Each option the
 * list marks DP_OPTION_AGREE is compared by a hash of its text, one small
 * allgather each (at start, a word per rank), so that the error names the
 * one that differs. */
int dp__train_check_ranks_agree(const dp__trainer *t)
{
    /* The model trained: a program's own definition's name, if any. */
    dp_train_options o = *t->o;
    o.net.model = dp__train_model_name(t->o);
    int count;
    const dp_option *opts = dp_train_option_list(&count);
    for (int i = 0; i < count; i++) {
        if (!(opts[i].traits & DP_OPTION_AGREE))
            continue;
        char text[1024];
        dp_option_format(&opts[i], &o, text, sizeof text);
        uint64_t h = fnv1a(14695981039346656037ull, text, strlen(text) + 1);
        uint64_t all[DP_MAX_RANKS];
        DP_TRY(dp_dist_gather_u64(h, all));
        for (int r = 1; r < t->ranks; r++) {
            if (all[r] != all[0]) {
                DP_ERROR("rank %d was started with another `%s` than rank 0: every rank must "
                         "train the same model on the same batches",
                         r, opts[i].name);
                return DP_EINVAL;
            }
        }
    }
    return 0;
}
