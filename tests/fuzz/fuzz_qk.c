/*
 * fuzz_qk.c - libFuzzer target: the runtime helpers (pyramidkv_runtime.h)
 * on arbitrary shapes and bits. The input becomes a Q/K scorer's shape
 * (head_dim, group, key type, reduction, scale), a call's rows, key count
 * and strides, and the raw bits of its queries and keys (NaN and
 * infinities included). Whatever the input: no crash; a refusal is a
 * documented status and leaves the output untouched; PB_ERR_WEIGHT exactly
 * when an element read is not finite; a success is within tolerance of the
 * naive reference (qk_reference.c), zero past each row's causal edge, and
 * bit-identical when repeated. The rest of the input drives the
 * three-call loop (pb_qk_observe, pb_kvcache_evict_slots,
 * pb_kvcache_compact_rows) on rows tagged with their positions: after
 * every step row i still holds the i-th held position.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "pyramidkv/pyramidkv.h"
#include "qk_reference.h"
#include "test_configs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t take8(reader *r) { return fuzz_byte(r); }

static uint32_t take16(reader *r) { return take8(r) << 8 | take8(r); }

static uint32_t take32(reader *r) { return take16(r) << 16 | take16(r); }

/* A float from the input: mostly small values, sometimes raw bits. */
static float take_float(reader *r) {
    const uint32_t sel = take8(r);
    if (sel < 0xF0u) return ((float)(int)take8(r) - 128.0f) / 32.0f;
    if (sel == 0xFFu) return take8(r) & 1u ? NAN : -INFINITY;
    const uint32_t b = take32(r);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static double key_value(uint32_t t, const void *k, size_t at) {
    if (t == PB_KEYS_F16) return qkr_f16(((const uint16_t *)k)[at]);
    if (t == PB_KEYS_BF16) return qkr_bf16(((const uint16_t *)k)[at]);
    return (double)((const float *)k)[at];
}

enum { MAX_D = 24, MAX_G = 4, MAX_K = 40, MAX_R = 6 };

static void attention_case(reader *r) {
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = 1u + take8(r) % MAX_D;
    c.group = 1u + take8(r) % MAX_G;
    c.key_type = take8(r) % 4u; /* 3: refused */
    c.reduce = take8(r) % 3u;
    c.scale = take8(r) < 128u ? 0.0f : fabsf(take_float(r));
    c.max_keys = 1u + take8(r) % MAX_K;
    c.max_rows = 1u + take8(r) % MAX_R;
    const size_t d = c.head_dim, g = c.group;
    /* mostly within the scorer's limits, now and then past them */
    const size_t n_keys = take8(r) < 0xF0u ? 1u + take8(r) % c.max_keys
                                           : take8(r) % (MAX_K + 2u);
    const size_t fit = n_keys == 0u         ? 1u
                       : n_keys < c.max_rows ? n_keys
                                             : c.max_rows;
    const size_t rows = take8(r) < 0xF0u ? 1u + take8(r) % fit
                                         : take8(r) % (MAX_R + 2u);
    const size_t k_stride = d + take8(r) % 3u - (take8(r) == 0u ? 1u : 0u);
    const size_t q_row_stride = d + take8(r) % 3u;
    const size_t q_head_stride = (MAX_R + 1u) * q_row_stride;
    pb_qk *qk = NULL;
    const pb_status cst = pb_qk_create(&c, NULL, &qk);
    const int scale_ok = c.scale >= 0.0f && c.scale <= 3.4028234663852886e38f;
    check(cst == (c.key_type <= 2u && scale_ok ? PB_OK : PB_ERR_PARAM),
          "create status");
    if (cst != PB_OK) {
        check(qk == NULL, "refused create left a scorer");
        return;
    }
    static float q[MAX_G * (MAX_R + 1u) * (MAX_D + 2u)];
    static uint32_t kraw[(MAX_K + 2u) * (MAX_D + 2u)];
    for (size_t i = 0; i < g * q_head_stride; ++i) q[i] = take_float(r);
    const size_t n_elems = (n_keys + 1u) * (MAX_D + 2u);
    for (size_t i = 0; i < n_elems; ++i) {
        if (c.key_type == PB_KEYS_F32) {
            const float f = take_float(r);
            memcpy(&kraw[i], &f, sizeof f);
        } else {
            ((uint16_t *)kraw)[i] =
                (uint16_t)(take8(r) < 0xF8u ? 0x3000u + take8(r) * 16u
                                            : take16(r));
        }
    }
    static float out[(MAX_R + 2u) * (MAX_K + 2u)];
    for (size_t i = 0; i < sizeof out / sizeof *out; ++i) out[i] = -7.0f;
    const pb_status st = pb_qk_attention(qk, q, q_head_stride, q_row_stride,
                                         rows, kraw, k_stride, n_keys, out);
    const int shape_ok = n_keys >= 1u && n_keys <= c.max_keys && rows >= 1u &&
                         rows <= c.max_rows && rows <= n_keys &&
                         k_stride >= d;
    if (!shape_ok) {
        check(st == PB_ERR_PARAM, "shape refusal");
    } else {
        /* every query row and every key is read */
        int finite = 1;
        for (size_t h = 0; h < g; ++h)
            for (size_t row = 0; row < rows; ++row)
                for (size_t j = 0; j < d; ++j)
                    finite &= isfinite(q[h * q_head_stride + row * q_row_stride + j]) != 0;
        for (size_t i = 0; i < n_keys; ++i)
            for (size_t j = 0; j < d; ++j)
                finite &= isfinite(key_value(c.key_type, kraw, i * k_stride + j)) != 0;
        check(st == (finite ? PB_OK : PB_ERR_WEIGHT), "value status");
    }
    if (st != PB_OK) {
        for (size_t i = 0; i < sizeof out / sizeof *out; ++i)
            check(out[i] == -7.0f, "refused call wrote out");
    } else {
        static double want[(MAX_R + 2u) * (MAX_K + 2u)];
        qkr_attention(d, g, c.key_type, c.reduce, (double)c.scale, q,
                      q_head_stride, q_row_stride, rows, kraw, k_stride,
                      n_keys, want);
        /* The reference adds in another order: both are close to the
         * exact softmax only where the logits' rounding errors are small,
         * so compare there (bound: d * 2^-52 * s * sum |q_j k_j|). */
        const double s = c.scale > 0.0f ? (double)c.scale : 1.0 / sqrt((double)d);
        double cond = 0.0;
        for (size_t h = 0; h < g; ++h)
            for (size_t row = 0; row < rows; ++row)
                for (size_t i = 0; i < n_keys; ++i) {
                    double a = 0.0;
                    for (size_t j = 0; j < d; ++j)
                        a += fabs((double)q[h * q_head_stride +
                                            row * q_row_stride + j] *
                                  key_value(c.key_type, kraw,
                                            i * k_stride + j));
                    cond = a * s > cond ? a * s : cond;
                }
        const int comparable = cond * (double)d * 0x1p-52 < 1e-9;
        for (size_t i = 0; i < rows * n_keys; ++i) {
            const size_t row = i / n_keys, key = i % n_keys;
            if (key > n_keys - rows + row) check(out[i] == 0.0f, "causal zero");
            check(!comparable || qkr_close(out[i], want[i]),
                  "attention differs from the reference");
        }
        static float again[(MAX_R + 2u) * (MAX_K + 2u)];
        check(pb_qk_attention(qk, q, q_head_stride, q_row_stride, rows, kraw,
                              k_stride, n_keys, again) == PB_OK,
              "repeat status");
        check(memcmp(out, again, rows * n_keys * sizeof *out) == 0,
              "repeat differs");
    }
    pb_qk_destroy(qk);
}

/* The three-call loop on tagged rows. */
static void loop_case(reader *r) {
    enum { D = 4, G = 2, CAP = 48 };
    const uint32_t cfg_budget = 4u + take8(r) % 24u;
    pb_kvcache_config cfg = pbt_kvcache_config(cfg_budget, take8(r) % 4u);
    cfg.obs_window = 1u + take8(r) % 6u;
    cfg.pool_kernel = 1u + 2u * (take8(r) % 3u);
    cfg.scorer = take8(r) % 5u;
    cfg.capacity = cfg.budget + 2u + take8(r) % 16u;
    if (cfg.capacity > CAP) cfg.capacity = CAP;
    pb_kvcache *p = NULL;
    if (pb_kvcache_create(&cfg, NULL, &p) != PB_OK) return;
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = D;
    c.group = G;
    c.max_keys = CAP + 1u;
    pb_qk *qk = NULL;
    check(pb_qk_create(&c, NULL, &qk) == PB_OK, "loop scorer");
    /* K rows: D floats; V rows: the position as a tag, 6 bytes in 8 */
    static float k[(CAP + 1u) * D];
    static unsigned char v[(CAP + 1u) * 8u];
    memset(k, 0, sizeof k);
    memset(v, 0, sizeof v);
    size_t held = 1;
    uint32_t pos = 0;
    while (r->n > 0u) {
        pos += 1u + take8(r) % 3u;
        float qv[G * D];
        for (size_t j = 0; j < G * D; ++j) qv[j] = take_float(r);
        for (size_t j = 0; j < D; ++j) k[held * D + j] = take_float(r);
        memcpy(v + held * 8u, &pos, sizeof pos);
        const pb_status st = pb_qk_observe(qk, p, pos, qv, D, k, D, held + 1u);
        if (st == PB_ERR_FULL) {
            pos -= 1u; /* evict first, then try another step */
        } else if (st == PB_OK) {
            held += 1u;
        } else {
            check(st == PB_ERR_WEIGHT, "loop observe status");
        }
        uint32_t victims[CAP + 1u], slots[CAP + 1u];
        size_t n = 0;
        const uint32_t budget =
            take8(r) < 200u ? PB_KVCACHE_BUDGET_SHARE : take8(r);
        if (take8(r) < 64u || st == PB_ERR_FULL) {
            check(pb_kvcache_evict_slots(p, budget, victims, slots, CAP + 1u,
                                         &n) == PB_OK,
                  "loop evict");
            check(pb_kvcache_compact_rows(slots, n, held, k, D * sizeof(float),
                                          D * sizeof(float), v, 6u, 8u) ==
                      PB_OK,
                  "loop compact");
            held -= n;
        }
        uint32_t kept[CAP + 1u];
        size_t nk = 0;
        check(pb_kvcache_kept_positions(p, kept, CAP + 1u, &nk) == PB_OK,
              "loop kept");
        check(nk == held, "loop held count");
        for (size_t i = 0; i < held; ++i) {
            uint32_t tag;
            memcpy(&tag, v + i * 8u, sizeof tag);
            check(tag == kept[i], "row i is not the i-th held position");
        }
    }
    pb_qk_destroy(qk);
    pb_kvcache_destroy(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    if (take8(&r) & 1u)
        attention_case(&r);
    else
        loop_case(&r);
    return 0;
}
