/* What a CPU convolution kernel choice holds for (dp__backend.choice_key):
 * the processor (its model name and the instruction-set flags oneDNN
 * dispatches on), oneDNN's version and the instruction set it uses here
 * (the CPU's, capped by DNNL_MAX_CPU_ISA, with which a newer CPU imitates
 * an older one: an AVX2 imitation must not reuse AVX-512 choices). E.g.
 *
 *   cpu=AMD EPYC 9R45; flags=avx2 avx512f avx512bw avx512_bf16; isa=avx512_core_bf16;
 *   onednn=3.0.0 (5e9e0a4a); max_cpu_isa=
 *
 * (one line). */
#include "device/cpu/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The /proc/cpuinfo flags that change which oneDNN kernels run. */
static const char *const isa_flags[] = {
    "avx",         "avx2",     "fma",      "f16c",     "avx_vnni",    "avx512f",
    "avx512bw",    "avx512vl", "avx512dq", "avx512cd", "avx512_vnni", "avx512_bf16",
    "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
};

static const struct {
    dnnl_cpu_isa_t isa;
    const char *name;
} isa_names[] = {
    {dnnl_cpu_isa_all, "all"},
    {dnnl_cpu_isa_sse41, "sse41"},
    {dnnl_cpu_isa_avx, "avx"},
    {dnnl_cpu_isa_avx2, "avx2"},
    {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
    {dnnl_cpu_isa_avx512_core, "avx512_core"},
    {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
    {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
    {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
};

/* The value of the first "key<blanks>: value" line of /proc/cpuinfo into
 * buf[0..size) ("" where there is none). Flags lines run to a few thousand
 * characters. */
static void cpuinfo_value(const char *key, char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[8192];
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0 || !strchr(line + klen, ':'))
            continue;
        const char *p = line + klen;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':')
            continue;
        p++;
        while (*p == ' ')
            p++;
        snprintf(buf, size, "%.*s", (int)strcspn(p, "\n"), p);
        break;
    }
    fclose(f);
}

int dp__cpu_choice_key(char *buf, size_t size)
{
    char model[128], flags[8192], isa[32], kept[512];
    cpuinfo_value("model name", model, sizeof model);
    cpuinfo_value("flags", flags, sizeof flags);
    /* the flags in /proc/cpuinfo's order that are in isa_flags */
    size_t n = 0;
    kept[0] = '\0';
    char *save = NULL;
    for (char *w = strtok_r(flags, " \t", &save); w && n < sizeof kept;
         w = strtok_r(NULL, " \t", &save))
        for (size_t i = 0; i < DP_COUNTOF(isa_flags); i++)
            if (strcmp(w, isa_flags[i]) == 0)
                n += (size_t)snprintf(kept + n, sizeof kept - n, "%s%s", n ? " " : "", w);
    dnnl_cpu_isa_t effective = dnnl_get_effective_cpu_isa();
    snprintf(isa, sizeof isa, "0x%x", (unsigned)effective);
    for (size_t i = 0; i < DP_COUNTOF(isa_names); i++)
        if (isa_names[i].isa == effective)
            snprintf(isa, sizeof isa, "%s", isa_names[i].name);
    const dnnl_version_t *v = dnnl_version();
    const char *max_isa = getenv("DNNL_MAX_CPU_ISA");
    return snprintf(buf, size, "cpu=%s; flags=%s; isa=%s; onednn=%d.%d.%d (%s); max_cpu_isa=%s",
                    model[0] ? model : "unknown", kept, isa, v->major, v->minor, v->patch,
                    v->hash && v->hash[0] ? v->hash : "no hash", max_isa ? max_isa : "");
}
