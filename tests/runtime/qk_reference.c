/*
 * qk_reference.c - the naive Q/K attention of qk_reference.h.
 */
#include "qk_reference.h"

#include <math.h>
#include <stdlib.h>

#include "pyramidkv/pyramidkv.h"

/* A 16-bit float with mbits mantissa bits and the rest exponent (bias
 * 2^(15 - mbits - 1) - 1): zero and subnormals, infinities and NaN, and
 * the normal numbers, exactly. */
static double half_value(uint16_t h, int mbits) {
    const int ebits = 15 - mbits, emax = (1 << ebits) - 1;
    const int bias = (1 << (ebits - 1)) - 1;
    const int sign = (h >> 15) & 1, e = (h >> mbits) & emax;
    const int m = h & ((1 << mbits) - 1);
    double v;
    if (e == 0)
        v = ldexp((double)m, 1 - bias - mbits);
    else if (e == emax)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((double)((1 << mbits) + m), e - bias - mbits);
    return sign ? -v : v;
}

double qkr_f16(uint16_t h) { return half_value(h, 10); }

double qkr_bf16(uint16_t h) { return half_value(h, 7); }

static double key_at(uint32_t key_type, const void *k, size_t at) {
    if (key_type == PB_KEYS_F16) return qkr_f16(((const uint16_t *)k)[at]);
    if (key_type == PB_KEYS_BF16) return qkr_bf16(((const uint16_t *)k)[at]);
    return (double)((const float *)k)[at];
}

void qkr_attention(size_t d, size_t group, uint32_t key_type,
                   uint32_t reduce, double scale, const float *q,
                   size_t q_head_stride, size_t q_row_stride, size_t rows,
                   const void *k, size_t k_stride, size_t n_keys,
                   double *out) {
    if (scale == 0.0) scale = 1.0 / sqrt((double)d);
    double *w = calloc(group * n_keys, sizeof *w);
    for (size_t r = 0; r < rows; ++r) {
        const size_t vis = n_keys - rows + r + 1u;
        for (size_t h = 0; h < group; ++h) {
            const float *qr = q + h * q_head_stride + r * q_row_stride;
            double m = -INFINITY, sum = 0.0;
            for (size_t i = 0; i < vis; ++i) {
                double dot = 0.0;
                for (size_t j = 0; j < d; ++j)
                    dot += (double)qr[j] * key_at(key_type, k, i * k_stride + j);
                w[h * n_keys + i] = dot * scale;
                if (dot * scale > m) m = dot * scale;
            }
            for (size_t i = 0; i < vis; ++i) {
                w[h * n_keys + i] = exp(w[h * n_keys + i] - m);
                sum += w[h * n_keys + i];
            }
            for (size_t i = 0; i < vis; ++i) w[h * n_keys + i] /= sum;
        }
        for (size_t i = 0; i < n_keys; ++i) {
            double v = 0.0;
            if (i < vis) {
                for (size_t h = 0; h < group; ++h) {
                    /* the library reduces weights already rounded to
                     * float; so does the reference */
                    const double x = (double)(float)w[h * n_keys + i];
                    if (reduce == PB_HEAD_REDUCE_MAX)
                        v = x > v ? x : v;
                    else
                        v += x;
                }
                if (reduce == PB_HEAD_REDUCE_MEAN) v /= (double)group;
            }
            out[r * n_keys + i] = v;
        }
    }
    free(w);
}

int qkr_close(float got, double want) {
    return fabs((double)got - want) <= 1e-6 * want + 1e-12;
}
