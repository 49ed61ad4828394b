/*
 * prefill_reference.h - the paper's prefill selection (KVCache-Factory
 * pyramidkv_utils.py, SnapKV's update_kv) transcribed with plain loops from
 * the rules of docs/spec.md section 7.3, as the oracle of the reference-scope differential
 * test and of the benchmark. It shares no code with src/.
 *
 * It also holds the small helpers the prefill tests share: a seeded random
 * attention block (drawn with test_rng.h) and the decode-step feed that
 * defines the consistent scope.
 */
#ifndef PB_TESTS_PREFILL_REFERENCE_H
#define PB_TESTS_PREFILL_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"
#include "test_rng.h"

/* The paper's selection for one (layer, head): attn is rows x len row-major,
 * W = rows, share the layer's share (already min(ask, effective)), kernel
 * the odd pooling width, pool a pb_pool. Sets keep[p] to 1 for every kept
 * position of 0 .. len-1 and 0 otherwise; returns the kept count.
 *
 * In words: a prompt with len <= share is kept whole. Otherwise
 * s[p] = sum over the W rows (double, row order) of attn[row][p] for
 * p < len - W; pooled[p] is the max (ignoring out-of-range neighbours) or the
 * in-range sum divided by kernel of s over [p - kernel/2, p + kernel/2]
 * within the prefix; the max(share - W, 0) prefix positions with the highest
 * pooled score are kept, the lower position first among equals; the W window
 * positions are always kept. Needs len * (8 + 8 + sizeof(size_t)) bytes of
 * malloc; returns (size_t)-1 if malloc fails. */
size_t pfref_select(const float *attn, size_t rows, size_t len, size_t share,
                    uint32_t kernel, uint32_t pool, unsigned char *keep);

/* Feeds the rows into a reference-model instance as the decode steps the
 * prefill documentation defines: positions 1 .. len-rows-1 admitted without
 * observation, then for every row j with q_j = len - rows + j >= 1 the step
 * (q_j, attn[j][0 .. q_j-1]). The instance must be fresh and able to hold
 * len positions. Returns the first status that is not PB_OK, or PB_OK. */
pb_status pfref_feed_reference(ref_policy *r, const float *attn, size_t rows,
                               size_t len);

/* The same feed into a library instance through pb_kvcache_observe. */
pb_status pfref_feed_library(pb_kvcache *policy, const float *attn,
                             size_t rows, size_t len);


/* Fills a rows x len block with softmax-like rows: row j (position
 * q = len - rows + j) has positive weights on p <= q drawn with 24 random
 * bits each and normalised to sum about 1, and zeros for p > q (causal).
 * With 24-bit draws, equal window scores are vanishingly rare (tie-free in
 * practice; the selections break ties identically anyway). */
void pfref_random_block(pbt_rng *g, float *attn, size_t rows, size_t len);

#endif /* PB_TESTS_PREFILL_REFERENCE_H */
