/*
 * size_pair.c - the sizes of two shared builds compared, each loaded with
 * dlopen: pb_kvcache_size and memory_bytes over 2,400 configurations (five
 * scorers, four budgets, three recent windows, two observation windows,
 * two kernels, ten variants: sinks, explicit capacity, prefill scratch,
 * average pooling and streamed rows, explicit shares over 32 layers),
 * pb_kvcache_group_size over 20 and pb_qk_size over 24. B must refuse
 * what A refuses, need no more bytes than A, and report memory_bytes equal
 * to its size. Exit status 0, or 1 with the differing rows printed.
 *   size_pair A.so B.so   (docs/abi.md, "Sizes")
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "pyramidkv/pyramidkv.h"
typedef pb_status (*size_fn)(const pb_kvcache_config *, size_t *);
typedef pb_status (*create_fn)(const pb_kvcache_config *, const pb_allocator *, pb_kvcache **);
typedef size_t (*mem_fn)(const pb_kvcache *);
typedef void (*destroy_fn)(pb_kvcache *);
typedef pb_status (*gsize_fn)(const pb_kvcache_config *, const pb_kvcache_group_params *, size_t *);
typedef pb_status (*qsize_fn)(const pb_qk_config *, size_t *);
static void *sym(void *h, const char *n) { void *s = dlsym(h, n); if (!s) { fprintf(stderr, "no %s\n", n); } return s; }
int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: size_pair A.so B.so\n");
        return 2;
    }
    void *h[2]; size_fn sz[2]; create_fn cr[2]; mem_fn mb[2]; destroy_fn de[2]; gsize_fn gs[2]; qsize_fn qs[2];
    for (int i = 0; i < 2; ++i) {
        h[i] = dlopen(argv[1 + i], RTLD_NOW | RTLD_LOCAL);
        if (!h[i]) { fprintf(stderr, "%s\n", dlerror()); return 2; }
        void *p;
        p = sym(h[i], "pb_kvcache_size"); memcpy(&sz[i], &p, sizeof p);
        p = sym(h[i], "pb_kvcache_create"); memcpy(&cr[i], &p, sizeof p);
        p = sym(h[i], "pb_kvcache_memory_bytes"); memcpy(&mb[i], &p, sizeof p);
        p = sym(h[i], "pb_kvcache_destroy"); memcpy(&de[i], &p, sizeof p);
        p = sym(h[i], "pb_kvcache_group_size"); memcpy(&gs[i], &p, sizeof p);
        p = sym(h[i], "pb_qk_size"); memcpy(&qs[i], &p, sizeof p);
    }
    static const uint32_t budgets[] = {64, 512, 2048, 8192}, recents[] = {0, 8, 32},
                          obss[] = {1, 16}, kernels[] = {1, 7};
    size_t n = 0, same = 0, smaller = 0, bad = 0, refused_same = 0;
    for (uint32_t sc = 0; sc < 5; ++sc)
    for (size_t b = 0; b < 4; ++b) for (size_t r = 0; r < 3; ++r)
    for (size_t o = 0; o < 2; ++o) for (size_t k = 0; k < 2; ++k)
    for (uint32_t v = 0; v < 10; ++v) {
        pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
        c.budget = budgets[b]; c.recent_window = recents[r]; c.obs_window = obss[o];
        c.pool_kernel = kernels[k]; c.scorer = sc; c.layer = v % 4u; c.num_layers = 4;
        if (v >= 5) { c.share = c.budget / 2u + v; c.num_layers = 32; c.layer = v * 3u; }
        if (v % 5u == 1) c.sinks = 4;
        if (v % 5u == 2) c.capacity = budgets[b] * 2u;
        if (v % 5u == 3) c.prefill_max_len = 1024; /* window only; refused by others */
        if (v % 5u == 4) { c.pool = PB_POOL_AVG; c.row_stores = PB_ROW_STORES_STREAMED; }
        size_t s[2] = {0, 0}, m[2] = {0, 0};
        pb_status st[2];
        for (int i = 0; i < 2; ++i) {
            st[i] = sz[i](&c, &s[i]);
            pb_kvcache *p = NULL;
            if (st[i] == PB_OK && cr[i](&c, NULL, &p) == PB_OK) { m[i] = mb[i](p); de[i](p); }
        }
        ++n;
        if (st[0] != st[1]) { ++bad; printf("status differs sc %u b %u v %u: %d %d\n", sc, c.budget, v, st[0], st[1]); continue; }
        if (st[0] != PB_OK) { ++refused_same; continue; }
        if (s[1] > s[0] || m[1] > m[0] || m[1] != s[1]) { ++bad; printf("bigger sc %u b %u v %u: %zu %zu / %zu %zu\n", sc, c.budget, v, s[0], s[1], m[0], m[1]); }
        else if (s[1] == s[0]) ++same; else ++smaller;
    }
    printf("pb_kvcache_size + memory_bytes: %zu configurations: %zu same, %zu smaller, %zu refused by both, %zu worse\n", n, same, smaller, refused_same, bad);
    size_t gsame = 0, gn = 0, qsame = 0, qsmall = 0, qn = 0;
    for (uint32_t heads = 1; heads <= 8; heads *= 2) for (uint32_t sc = 0; sc < 5; ++sc) {
        pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT; c.scorer = sc; c.budget = 1024;
        pb_kvcache_group_params g = PB_KVCACHE_GROUP_PARAMS_DEFAULT; g.num_heads = heads;
        size_t a = 0, bb = 0; pb_status s0 = gs[0](&c, &g, &a), s1 = gs[1](&c, &g, &bb);
        ++gn; if (s0 == s1 && a == bb) ++gsame; else { ++bad; printf("group differs %u %u: %zu %zu\n", heads, sc, a, bb); }
    }
    for (uint32_t d = 64; d <= 128; d *= 2) for (uint32_t g = 1; g <= 8; g *= 2) for (uint32_t keys = 100; keys <= 10000; keys *= 10) {
        pb_qk_config q = PB_QK_CONFIG_DEFAULT; q.head_dim = d; q.group = g; q.max_keys = keys; q.max_rows = 32;
        size_t a = 0, bb = 0; pb_status s0 = qs[0](&q, &a), s1 = qs[1](&q, &bb);
        ++qn; if (s0 != s1 || bb > a) { ++bad; printf("qk worse\n"); } else if (a == bb) ++qsame; else ++qsmall;
    }
    printf("pb_kvcache_group_size: %zu configurations, %zu same; pb_qk_size: %zu, %zu same, %zu smaller\n", gn, gsame, qn, qsame, qsmall);
    return bad ? 1 : 0;
}
