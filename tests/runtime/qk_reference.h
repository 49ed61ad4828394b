/*
 * qk_reference.h - the naive Q/K attention the tests hold pb_qk_attention
 * to: straight loops, libm's exp, the 16-bit keys decoded by ldexp from
 * their fields. Independent of the library's arithmetic order, so the
 * comparison is within a tolerance (qk_reference_close).
 */
#ifndef PB_TESTS_QK_REFERENCE_H
#define PB_TESTS_QK_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

/* binary16 and bfloat16 bits as a double, from sign, exponent and
 * fraction fields. */
double qkr_f16(uint16_t h);
double qkr_bf16(uint16_t h);

/* out[r * n_keys + i]: the group-reduced softmax of query row r over keys
 * 0 .. n_keys - rows + r (0 beyond), with the layouts of pb_qk_attention.
 * key_type and reduce are pb_key_type and pb_head_reduce values; scale 0
 * is 1/sqrt(d). */
void qkr_attention(size_t d, size_t group, uint32_t key_type,
                   uint32_t reduce, double scale, const float *q,
                   size_t q_head_stride, size_t q_row_stride, size_t rows,
                   const void *k, size_t k_stride, size_t n_keys,
                   double *out);

/* Nonzero if |got - want| <= 1e-6 * want + 1e-12 (float rounding of the
 * weights and the reduction stay far inside). */
int qkr_close(float got, double want);

#endif
