/*
 * pkm_model.h - the small byte-level Llama-style decoder of bench/model in
 * plain C: the weights file (docs/model.md), the per-(layer, KV head) K/V
 * slots, and a single-token forward step that appends the token's K/V to the
 * slots and reports its attention. Cache management with libpyramidkv lives
 * in pkm_cache.h; this file knows nothing about eviction.
 *
 * Single-threaded; all buffers are allocated at load / slot creation.
 */
#ifndef PKM_MODEL_H
#define PKM_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct pkm_config {
    uint32_t vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim;
    uint32_t max_ctx;
    float rope_theta, norm_eps;
    uint64_t train_step, train_tokens;
} pkm_config;

typedef struct pkm_layer {
    const float *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w1, *w3, *w2;
} pkm_layer;

typedef struct pkm_model {
    pkm_config c;
    float *blob; /* every weight, in file order */
    const float *emb, *norm, *out;
    pkm_layer *layers;
    uint32_t rope_len;  /* positions the rope tables cover */
    float *rope_cos;    /* [rope_len][head_dim/2] */
    float *rope_sin;
    /* scratch for one forward step, pointers into one block */
    float *x, *hx, *q, *k, *v, *o, *h1, *h3, *scores;
    float *scratch;
    /* NULL (the default), or [n_layers][n_heads][head_dim] that every step
     * fills with each layer's queries as its attention uses them (scaled
     * by 1/sqrt(head_dim), then rotated): for a caller that scores from
     * queries and keys (bench/examples/qk_model_loop.c). */
    float *q_out;
} pkm_model;

/* One KV head's cache in one layer: held positions in ascending order and
 * their keys (already rotated) and values, row i for pos[i]. With `row`
 * set, the slot is a view of its layer's pooled store (the pooled K/V
 * layout of a layer group, docs/guide.md): pos[i]'s K/V is row row[i] of
 * k and v, which the layer's heads share; a step writes the new token's
 * K/V to `stage` (K, then V) and attends to it there, and the runtime
 * moves it to the row the group gives it. */
typedef struct pkm_slot {
    uint32_t cap, n;
    uint32_t *pos;
    float *k, *v;  /* [cap][head_dim], or the layer's store [rows][head_dim] */
    uint32_t *row; /* NULL, or [cap]: the store row of each held position */
    float *stage;  /* with row: [2][head_dim] */
} pkm_slot;

/* Loads a weights file; returns 0 or -1 with a message in err. */
int pkm_model_load(pkm_model *m, const char *path, char *err, size_t errlen);
void pkm_model_free(pkm_model *m);

int pkm_slot_init(pkm_slot *s, uint32_t cap, uint32_t head_dim);
void pkm_slot_free(pkm_slot *s);

/* n slots of capacity cap, or NULL (nothing left allocated); freed, with
 * every slot, by pkm_slots_free (NULL is fine). */
pkm_slot *pkm_slots_new(size_t n, uint32_t cap, uint32_t head_dim);
void pkm_slots_free(pkm_slot *s, size_t n);

/* One forward step of token `tok` at position `pos` against the cache
 * slots[layer * n_kv_heads + kv] (each must have room for one more row).
 * The token's K/V is appended to every slot (so it attends to itself).
 * If attn is not NULL, attn[(layer * n_heads + h) * attn_stride + i] gets
 * query head h's softmax weight on slot row i (i < the slot's new n; the
 * token itself is the last row). If logits is not NULL it gets the vocab
 * logits. Returns 0, or -1 if a slot is full or pos is outside the rope
 * tables. */
int pkm_model_step(pkm_model *m, pkm_slot *slots, uint32_t tok, uint32_t pos,
                   float *attn, size_t attn_stride, float *logits);

#endif /* PKM_MODEL_H */
