/* DP_CPU_CLONES: compile a loop for AVX-512, AVX2 and plain x86-64, the
 * CPU picking at load time (GCC's target_clones). The library is built for
 * baseline x86-64, so without it GCC vectorises for SSE2 only; the
 * sanitizer builds and other compilers get the one plain version.
 *
 * A function GCC outlines for an OpenMP region does not inherit the clones'
 * targets: the region calls the cloned function, whose loops it runs. */
#ifndef DP_DEVICE_CPU_CLONES_H
#define DP_DEVICE_CPU_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define DP_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DP_CPU_CLONES
#endif

#endif
