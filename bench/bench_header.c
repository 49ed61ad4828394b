/*
 * bench_header.c - the banner every benchmark program that links the
 * library prints first (bench_print_header, see bench_common.h): the
 * machine, the compiler, this build's flags, the library's version and
 * kernel variant, and the command that reproduces the run.
 */
#include "bench_common.h"

#include "bench_build_info.h"
#include "pyramidkv/pyramidkv.h"

/* Which kernel variant the library runs here: it picks, at create, the
 * first of AVX-512 (F, VL, DQ, BW; unless built with PB_SIMD_AVX512=OFF),
 * AVX2 and the portable one the CPU offers, when built with PB_SIMD=ON
 * (src/simd_kernels.c). */
static const char *kernel_line(void) {
#if PB_BENCH_SIMD && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    const int avx512 = __builtin_cpu_supports("avx512f") &&
                       __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512dq") &&
                       __builtin_cpu_supports("avx512bw");
    if (avx512 && PB_BENCH_AVX512)
        return "avx512 (PB_SIMD=ON, chosen at run time)";
    if (avx512)
        return "avx2 (PB_SIMD=ON, PB_SIMD_AVX512=OFF: no AVX-512 variant)";
    if (__builtin_cpu_supports("avx2"))
        return "avx2 (PB_SIMD=ON, chosen at run time; no AVX-512 here)";
    return "generic (PB_SIMD=ON, but this CPU has no AVX2)";
#elif PB_BENCH_SIMD
    return "generic (no SIMD variants for this compiler or CPU)";
#else
    return "generic (PB_SIMD=OFF: the portable kernels only)";
#endif
}

/* The configure and build commands of the build this program comes from. */
#if !PB_BENCH_SIMD
#define PB__BENCH_BUILD                                                       \
    "cmake --preset nosimd -DPB_BUILD_BENCH=ON && cmake --build --preset nosimd"
#elif !PB_BENCH_AVX512
#define PB__BENCH_BUILD                                                       \
    "cmake --preset bench -B build/avx2 -DPB_SIMD_AVX512=OFF && "             \
    "cmake --build build/avx2"
#else
#define PB__BENCH_BUILD "cmake --preset bench && cmake --build --preset bench"
#endif

void bench_print_header(FILE *out, const char *name, const bench_options *opt) {
    fprintf(out, "== %s\n", name);
    bench_print_machine(out);
    fprintf(out, "flags:    build type %s, C flags \"%s\" (library, reference "
                 "and benchmark alike)\n",
            PB_BENCH_BUILD_TYPE, PB_BENCH_C_FLAGS);
    fprintf(out, "library:  libpyramidkv %s (%s)\n", pb_version_string(),
            PB_BENCH_LIBRARY_KIND);
    fprintf(out, "kernels:  %s\n", kernel_line());
    fprintf(out, "reproduce: %s --target %s && %s\n\n", PB__BENCH_BUILD, name,
            opt->command);
    fflush(out);
}
