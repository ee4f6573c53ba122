/* dp/train_util.h - what a training loop reports: metrics as JSON lines, a
 * progress bar, and the seed's Animator as a PNG or SVG plot. */
#ifndef DP_TRAIN_UTIL_H
#define DP_TRAIN_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most epochs one run trains (dp_train_options.run.epochs): a checkpoint
 * keeps the figures of every epoch (DP_CHECKPOINT_MAX_HISTORY). */
#define DP_MAX_EPOCHS 1000

/* One epoch's figures. */
typedef struct dp_epoch_stats {
    int epoch;                 /* from 1 */
    double train_loss;         /* mean cross-entropy per sample */
    double train_acc;          /* fraction correct on the training batches */
    double test_acc;           /* fraction correct on the test set */
    double test_loss;          /* mean cross-entropy per test sample; 0: not measured */
    double test_top5;          /* fraction with the label among the 5 largest logits,
                                  with more than 5 classes; 0: not measured */
    double epoch_seconds;      /* training time only, as the seed's Timer */
    double samples_per_second; /* training samples / epoch_seconds */
    const char *devices;       /* "[cpu:0, cpu:1]" */
    int64_t batch_size;
    double lr;
    double peak_rss_mb;    /* peak resident memory so far; < 0 = unknown */
    int ranks;             /* MPI ranks (mpirun); 0 or 1: one process */
    double allreduce_ms;   /* with ranks > 1: mean time per step in MPI's gradient sums */
    double rss_mb;         /* resident memory at the end of the epoch; <= 0 = unknown */
    int64_t skipped_steps; /* steps dropped for a non-finite gradient */
    /* With several devices or ranks, per step (dp_comm_stats): the time in
     * the gradient collectives, and how much of it the update waited for
     * after the backward pass (the part the buckets did not hide). */
    double comm_ms, exposed_comm_ms;
    /* With --pipeline: the stages' devices' idle share, measured on them,
     * the mean over the epoch's steps (dp_pipeline_stats); 0 stages: none. */
    int pipeline_stages;
    double bubble_fraction;
    /* The run's precision ("fp32", "bf16", "bf16-reference"; NULL: not
     * written), and, in the first epoch a run trains, the convolution
     * kernels it chose (dp_conv_choices_save's lines; NULL: none). */
    const char *precision;
    const char *conv_algos;
    /* Training images left out of their batches for not decoding
     * (bad_images skip), this rank's. */
    int64_t skipped_images;
} dp_epoch_stats;

/* Whether `path` can be written as the output `what` names ("plot",
 * "metrics file"): not a directory, and the file can be created there or
 * opened for writing (a file this creates is removed again; one that was
 * there is left as it was). 0, or DP_EIO with one line naming the path and
 * why, e.g. "cannot write the plot /nonexistent/p.png: No such file or
 * directory". */
int dp_check_output_file(const char *path, const char *what);

/* ---- metrics: one JSON object per line ---------------------------------- */
typedef struct dp_metrics dp_metrics_t;
/* Creates (truncates) `path`. */
int dp_metrics_open(dp_metrics_t **out, const char *path);
/* Opens `path` to add lines after what it holds (a resumed run). */
int dp_metrics_open_append(dp_metrics_t **out, const char *path);
int dp_metrics_write_epoch(dp_metrics_t *m, const dp_epoch_stats *s);
/* {"step": 12, "epoch": 1, "loss": 0.6931, "lr": 0.1}: the step's mean
 * loss and the learning rate its update used. */
int dp_metrics_write_step(dp_metrics_t *m, int64_t step, int epoch, double loss, double lr);
/* Flushes and closes; reports a failed write. NULL is accepted. */
int dp_metrics_close(dp_metrics_t *m);

/* ---- progress bar on stderr ---------------------------------------------- */
typedef struct dp_progress dp_progress_t;
/* `enabled` false makes every call a no-op (stderr not a terminal). */
int dp_progress_init(dp_progress_t **out, bool enabled);
/* Redraws at most ~10 times a second:
 * "epoch 3/10 [#####.....] 120/235 loss 0.4123 25310 samples/s ETA 0:04" */
void dp_progress_update(dp_progress_t *p, int epoch, int epochs, int64_t batch, int64_t batches,
                        double loss, double samples_per_second);
/* Clears the line. */
void dp_progress_done(dp_progress_t *p);
void dp_progress_close(dp_progress_t *p);

/* ---- the seed's Animator, written to a file --------------------------------
 * Draws test accuracy, train accuracy and train loss against epoch (x from 1
 * to `num_epochs`), with a legend, like d2l's plot of train(). The format is
 * chosen by the extension: .png (cairo) or .svg. */
int dp_plot_write(const char *path, int num_epochs, const dp_epoch_stats *stats, int count);
/* One pipeline step as a Gantt chart (dp_pipeline_stats' times): a row per
 * stage, a box per task labelled F or B and its micro-batch, forwards
 * light and backwards dark, the idle time blank. `schedule` is a
 * dp_pipeline_schedule; start and end are [k * 2 micro_batches + i]. */
int dp_plot_pipeline(const char *path, int stages, int micro_batches, int schedule,
                     const double *start, const double *end);

/* Peak resident set size of this process in MiB (-1 if unknown). */
double dp_peak_rss_mb(void);
/* Resident set size of this process now, in MiB (-1 if unknown): unlike the
 * peak, it shows memory that grows and is given back. */
double dp_rss_mb(void);

#ifdef __cplusplus
}
#endif
#endif /* DP_TRAIN_UTIL_H */
