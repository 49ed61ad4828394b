/*
 * qk_score.c - the Q/K scorer (pb_qk): attention rows computed from a
 * runtime's queries and one KV head's keys, the group of query heads
 * reduced, and fed to a policy instance as a decode step or a prefill.
 * It owns the scorer object, its scratch and the arithmetic of
 * docs/spec.md §15; it reaches the engine only through the public calls
 * pb_kvcache_observe, pb_kvcache_prefill and pb_kvcache_head_reduce.
 */
#include <math.h>
#include <string.h>

#include "allocator.h"
#include "block_layout.h"
#include "pyramidkv/pyramidkv.h"
#include "runtime_internal.h"
#include "struct_growth.h"

struct pb_qk {
    pb_allocator alloc;
    void *raw;           /* what the allocator returned */
    size_t bytes;        /* what it was asked for */
    uint32_t head_dim, group, key_type, reduce, max_keys, max_rows;
    double scale;
    double *qd;          /* [group * head_dim]: one row's queries */
    double *kd;          /* [head_dim]: one key, converted */
    double *logits;      /* [group * max_keys]; with heads and spare, the
                            prefill workspace */
    float *heads;        /* [group * max_keys]: per-head weights */
    unsigned char *spare;/* [16 * max_keys] */
    float *block;        /* [max_rows * max_keys]: the reduced rows */
    size_t work_bytes;   /* logits + heads + spare */
    pb__qk_logits_fn logits_fn; /* the best variants, chosen at create */
    pb__qk_exp_fn exp_fn;
};

/* Reads a caller's config by the rule of docs/abi.md and validates it. */
static pb_status load_config(const pb_qk_config *user, pb_qk_config *out) {
    const pb_qk_config def = PB_QK_CONFIG_DEFAULT;
    *out = def;
    if (pb__struct_read(user, PB__QK_CONFIG_SIZE_0_2, sizeof *out, out) !=
        PB_OK)
        return PB_ERR_PARAM;
    if (out->head_dim == 0u || out->head_dim > 65536u) return PB_ERR_PARAM;
    if (out->group == 0u || out->group > 1024u) return PB_ERR_PARAM;
    if (out->key_type > (uint32_t)PB_KEYS_BF16) return PB_ERR_PARAM;
    if (out->reduce > (uint32_t)PB_HEAD_REDUCE_SUM) return PB_ERR_PARAM;
    if (!(out->scale >= 0.0f) || !(out->scale <= 3.4028234663852886e38f))
        return PB_ERR_PARAM; /* NaN, negative or infinite */
    if (out->max_keys == 0u) return PB_ERR_PARAM;
    if (out->max_rows == 0u || out->max_rows > 65536u) return PB_ERR_PARAM;
    return PB_OK;
}

/* The layout of a scorer; 0 if it does not fit in size_t. */
static size_t layout(const pb_qk_config *c, size_t *off_qd, size_t *off_kd,
                     size_t *off_logits, size_t *off_heads,
                     size_t *off_spare, size_t *off_block) {
    const size_t d = c->head_dim, g = c->group, k = c->max_keys;
    const size_t r = c->max_rows;
    if (k > SIZE_MAX / 64u / g || k > SIZE_MAX / 8u / r) return 0;
    pb__cursor at = {0, 0};
    (void)pb__part(&at, sizeof(struct pb_qk));
    *off_qd = pb__part(&at, 8u * g * d);
    *off_kd = pb__part(&at, 8u * d);
    /* logits, heads and spare stay contiguous (one workspace), and the
     * block follows them. */
    *off_logits = pb__part_unpadded(&at, 8u * g * k);
    *off_heads = pb__part_unpadded(&at, 4u * g * k);
    *off_spare = pb__part_unpadded(&at, pb__lines(16u * k));
    *off_block = pb__part_unpadded(&at, pb__lines(4u * r * k));
    return pb__block_bytes(&at);
}

PB_API pb_status pb_qk_size(const pb_qk_config *config, size_t *bytes) {
    if (bytes == NULL) return PB_ERR_NULL;
    pb_qk_config c;
    const pb_status st = load_config(config, &c);
    if (st != PB_OK) return st;
    size_t o[6];
    const size_t n = layout(&c, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]);
    if (n == 0u) return PB_ERR_TOO_LARGE;
    *bytes = n;
    return PB_OK;
}

PB_API pb_status pb_qk_create(const pb_qk_config *config,
                              const pb_allocator *allocator, pb_qk **out) {
    if (out == NULL) return PB_ERR_NULL;
    *out = NULL;
    pb_qk_config c;
    pb_status st = load_config(config, &c);
    if (st != PB_OK) return st;
    size_t o[6];
    const size_t n = layout(&c, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]);
    if (n == 0u) return PB_ERR_TOO_LARGE;
    pb_allocator a;
    if (!pb__allocator_of(allocator, &a)) return PB_ERR_PARAM;
    /* One allocation, aligned by hand to a cache line. */
    unsigned char *raw = (unsigned char *)a.alloc(a.ctx, n);
    if (raw == NULL) return PB_ERR_NOMEM;
    unsigned char *base = pb__block_start(raw);
    pb_qk *qk = (pb_qk *)(void *)base;
    memset(qk, 0, sizeof *qk);
    qk->alloc = a;
    qk->raw = raw;
    qk->bytes = n;
    qk->head_dim = c.head_dim;
    qk->group = c.group;
    qk->key_type = c.key_type;
    qk->reduce = c.reduce;
    qk->max_keys = c.max_keys;
    qk->max_rows = c.max_rows;
    qk->scale = c.scale > 0.0f ? (double)c.scale
                               : 1.0 / sqrt((double)c.head_dim);
    qk->qd = (double *)(void *)(base + o[0]);
    qk->kd = (double *)(void *)(base + o[1]);
    qk->logits = (double *)(void *)(base + o[2]);
    qk->heads = (float *)(void *)(base + o[3]);
    qk->spare = base + o[4];
    qk->block = (float *)(void *)(base + o[5]);
    qk->work_bytes = o[5] - o[2];
    qk->logits_fn = pb__qk_logits_best();
    qk->exp_fn = pb__qk_exp_best();
    *out = qk;
    return PB_OK;
}

PB_API void pb_qk_destroy(pb_qk *qk) {
    if (qk == NULL) return;
    const pb_allocator a = qk->alloc;
    a.free(a.ctx, qk->raw, qk->bytes);
}

/* Nonzero if any of the group's rows of query row r has a NaN or an
 * infinity (read from the bits). */
static int queries_bad(const pb_qk *qk, const float *q, size_t q_head_stride,
                       size_t q_row_stride, size_t r) {
    uint32_t bad = 0u;
    for (size_t h = 0; h < qk->group; ++h) {
        const float *row = q + h * q_head_stride + r * q_row_stride;
        for (size_t j = 0; j < qk->head_dim; ++j) {
            uint32_t b;
            memcpy(&b, &row[j], sizeof b);
            bad |= (uint32_t)((b & UINT32_C(0x7FFFFFFF)) >
                              UINT32_C(0x7F7FFFFF));
        }
    }
    return bad != 0u;
}

/* One query row over keys 0 .. vis-1: the group's softmax rows, reduced,
 * to out[0 .. n_keys-1] (zeros from vis on). 0 (out untouched) if a key
 * read is not finite. */
static int score_row(pb_qk *qk, const float *q, size_t q_head_stride,
                     size_t q_row_stride, size_t r, const void *k,
                     size_t k_stride, size_t vis, size_t n_keys,
                     float *out) {
    const size_t d = qk->head_dim, g = qk->group, kmax = qk->max_keys;
    for (size_t h = 0; h < g; ++h) {
        const float *row = q + h * q_head_stride + r * q_row_stride;
        for (size_t j = 0; j < d; ++j) qk->qd[h * d + j] = (double)row[j];
    }
    /* Logits: one key at a time against every head of the group. */
    const double bad = qk->logits_fn(qk->qd, g, d, k, k_stride, qk->key_type,
                                     vis, qk->scale, qk->logits, kmax,
                                     qk->kd);
    if (bad != 0.0 || bad != bad) return 0;

    /* Softmax per head: subtract the maximum, exponentiate, sum in
     * ascending key order, divide, round once to float. */
    float *heads = g == 1u ? out : qk->heads;
    for (size_t h = 0; h < g; ++h) {
        double *z = qk->logits + h * kmax;
        double m = z[0];
        for (size_t i = 1; i < vis; ++i) m = z[i] > m ? z[i] : m;
        qk->exp_fn(z, vis, m);
        double sum = 0.0;
        for (size_t i = 0; i < vis; ++i) sum += z[i];
        float *w = heads + h * vis;
        for (size_t i = 0; i < vis; ++i) w[i] = (float)(z[i] / sum);
    }
    if (g > 1u) {
        const pb_status st = pb_kvcache_head_reduce(qk->heads, g, vis, vis,
                                                    qk->reduce, out);
        (void)st; /* weights in [0, 1] are always accepted */
    }
    for (size_t i = vis; i < n_keys; ++i) out[i] = 0.0f;
    return 1;
}

/* The shape checks of pb_qk_attention. */
static pb_status check_call(const pb_qk *qk, size_t q_head_stride,
                            size_t q_row_stride, size_t rows,
                            size_t k_stride, size_t n_keys) {
    if (n_keys == 0u || n_keys > qk->max_keys) return PB_ERR_PARAM;
    if (rows == 0u || rows > qk->max_rows || rows > n_keys)
        return PB_ERR_PARAM;
    if (k_stride < qk->head_dim) return PB_ERR_PARAM;
    if (qk->group > 1u && q_head_stride < qk->head_dim) return PB_ERR_PARAM;
    if (rows > 1u && q_row_stride < qk->head_dim) return PB_ERR_PARAM;
    return PB_OK;
}

/* pb_qk_attention after its checks. The last row sees every key and runs
 * first, so a bad key is found before any row is written. */
static pb_status attention(pb_qk *qk, const float *q, size_t q_head_stride,
                           size_t q_row_stride, size_t rows, const void *k,
                           size_t k_stride, size_t n_keys, float *out) {
    for (size_t r = 0; r < rows; ++r)
        if (queries_bad(qk, q, q_head_stride, q_row_stride, r))
            return PB_ERR_WEIGHT;
    for (size_t r = rows; r-- > 0;) {
        const size_t vis = n_keys - rows + r + 1u;
        if (!score_row(qk, q, q_head_stride, q_row_stride, r, k, k_stride,
                       vis, n_keys, out + r * n_keys))
            return PB_ERR_WEIGHT;
    }
    return PB_OK;
}

PB_API pb_status pb_qk_attention(pb_qk *qk, const float *q,
                                 size_t q_head_stride, size_t q_row_stride,
                                 size_t rows, const void *k, size_t k_stride,
                                 size_t n_keys, float *out) {
    if (qk == NULL || q == NULL || k == NULL || out == NULL)
        return PB_ERR_NULL;
    const pb_status st =
        check_call(qk, q_head_stride, q_row_stride, rows, k_stride, n_keys);
    if (st != PB_OK) return st;
    return attention(qk, q, q_head_stride, q_row_stride, rows, k, k_stride,
                     n_keys, out);
}

PB_API pb_status pb_qk_observe(pb_qk *qk, pb_kvcache *policy, uint32_t pos,
                               const float *q, size_t q_head_stride,
                               const void *k, size_t k_stride,
                               size_t n_keys) {
    if (qk == NULL || policy == NULL || q == NULL || k == NULL)
        return PB_ERR_NULL;
    const size_t held = pb_kvcache_kept_count(policy);
    if (n_keys != held && n_keys != held + 1u) return PB_ERR_LENGTH;
    pb_status st = check_call(qk, q_head_stride, 0u, 1u, k_stride, n_keys);
    if (st != PB_OK) return st;
    st = attention(qk, q, q_head_stride, 0u, 1u, k, k_stride, n_keys,
                   qk->block);
    if (st != PB_OK) return st;
    return pb_kvcache_observe(policy, pos, qk->block, held);
}

PB_API pb_status pb_qk_prefill(pb_qk *qk, pb_kvcache *policy, const float *q,
                               size_t q_head_stride, size_t q_row_stride,
                               size_t rows, const void *k, size_t k_stride,
                               size_t len, uint32_t budget, uint32_t *kept,
                               size_t kept_cap, uint32_t *victims,
                               size_t victims_cap, size_t *n_kept) {
    if (qk == NULL || policy == NULL || q == NULL || k == NULL ||
        n_kept == NULL)
        return PB_ERR_NULL;
    pb_status st =
        check_call(qk, q_head_stride, q_row_stride, rows, k_stride, len);
    if (st != PB_OK) return st;
    st = attention(qk, q, q_head_stride, q_row_stride, rows, k, k_stride, len,
                   qk->block);
    if (st != PB_OK) return st;
    /* logits, heads and spare, free again, are the prefill's workspace:
     * 12 * group * max_keys + 16 * max_keys bytes, above what any
     * instance asks for len <= max_keys. */
    return pb_kvcache_prefill(policy, qk->block, rows, len, budget,
                              qk->logits, qk->work_bytes, kept, kept_cap,
                              victims, victims_cap, n_kept);
}
