/* dp/conv_cache.h - the convolution kernels' cache file: the choices that
 * DP_CONV_ALGO_AUTO measures (dp_conv_choices_save's lines), kept per
 * machine and library version so that a later run reads them instead of
 * timing the candidates again, and so runs the same kernels (the same
 * bits). As cuDNN-style autotuners and oneDNN keep theirs: by default
 * $XDG_CACHE_HOME/dptrain/conv-algos.txt. The file is text, one section
 * per key:
 *
 *   # dptrain's convolution kernel choices (conv_algo auto), one section per machine key
 *   [dptrain=0.1.0; cpu=AMD EPYC 9R45; flags=avx2 avx512f ...; isa=avx512_core_bf16; onednn=3.0.0 (hash); max_cpu_isa=]
 *   f32 1x28x28 k6 5x5 s1x1 p2x2: forward=direct backward_data=gemm backward_weights=direct
 *
 * The key is dptrain's version and dp_conv_choices_key(): a section of
 * another CPU, oneDNN version, dptrain version or DNNL_MAX_CPU_ISA is not
 * used, and stays in the file for the machine it belongs to. */
#ifndef DP_CONV_CACHE_H
#define DP_CONV_CACHE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The file a setting names, into buf[0..size): the setting itself (a
 * path); with NULL or "", $DPTRAIN_CONV_ALGO_CACHE, else
 * $XDG_CACHE_HOME/dptrain/conv-algos.txt, else
 * $HOME/.cache/dptrain/conv-algos.txt. Returns 1 (buf "") when the setting
 * or the environment says "off", or no home is known; 0 with a path;
 * DP_EINVAL when it does not fit in buf. */
int dp_conv_algo_cache_path(const char *setting, char *buf, size_t size);

/* This machine's key: "dptrain=<version>; " and dp_conv_choices_key(). */
int dp_conv_algo_cache_key(char *buf, size_t size);

/* Loads the file's section for this machine's key into the process's
 * kernel choices, for the shapes and passes that have none yet (choices
 * already made, a checkpoint's or MPI rank 0's, win). A missing file holds
 * nothing; a corrupt one is one warning naming it and the line, and none
 * of it is loaded (the next dp_conv_algo_cache_add rewrites it); a section
 * of another key is passed over, saying why (DP_LOG_INFO). Returns how
 * many passes' choices it installed, or DP_ENOMEM. */
int dp_conv_algo_cache_read(const char *path);

/* Adds `lines` (dp_conv_choices_save's format, e.g. what
 * dp_conv_choices_save_measured returns) to this machine's section: under
 * an flock of PATH.lock it reads the file again, keeps the choices it has,
 * adds the shapes and passes it lacks, and replaces the file atomically (a
 * temporary file in the same folder, fsync, rename), so that processes
 * adding at once lose nothing. Creates the folder. A file that cannot be
 * written is one warning and DP_EIO, never a half-written file; lines
 * that are not choices are DP_EINVAL. */
int dp_conv_algo_cache_add(const char *path, const char *lines);

#ifdef __cplusplus
}
#endif

#endif
