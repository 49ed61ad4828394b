/*
 * pkm_io.c - file reading, the reference-logits reader and the full-cache
 * prefill with window-row capture (see pkm_io.h).
 */
#include "pkm_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned char *pkm_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap + 1);
    while (buf) {
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        unsigned char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    const int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

int pkm_ref_load(pkm_ref *r, const char *path)
{
    memset(r, 0, sizeof *r);
    size_t n = 0;
    r->raw = pkm_read_file(path, &n);
    if (!r->raw || n < 12 || memcmp(r->raw, "PKVR", 4) != 0 ||
        rd32(r->raw + 4) != 1u)
        goto bad;
    r->count = rd32(r->raw + 8);
    if (r->count == 0 || r->count > 64) goto bad;
    r->prompts = calloc(r->count, sizeof *r->prompts);
    r->floats = malloc(n);
    if (!r->prompts || !r->floats) goto bad;
    size_t off = 12, fo = 0;
    for (uint32_t i = 0; i < r->count; i++) {
        if (off + 4 > n) goto bad;
        const uint32_t len = rd32(r->raw + off);
        off += 4;
        if (len == 0 || len > 4096 || off + len + (size_t)len * 1024 > n)
            goto bad;
        r->prompts[i].len = len;
        r->prompts[i].bytes = r->raw + off;
        off += len;
        float *lg = r->floats + fo;
        for (size_t j = 0; j < (size_t)len * 256; j++) {
            const uint32_t u = rd32(r->raw + off + 4 * j);
            memcpy(&lg[j], &u, sizeof u);
        }
        r->prompts[i].logits = lg;
        off += (size_t)len * 1024;
        fo += (size_t)len * 256;
    }
    if (off != n) goto bad;
    return 0;
bad:
    pkm_ref_free(r);
    return -1;
}

void pkm_ref_free(pkm_ref *r)
{
    free(r->prompts);
    free(r->raw);
    free(r->floats);
    memset(r, 0, sizeof *r);
}

int pkm_prefill_full(pkm_model *m, pkm_slot *full, const unsigned char *tok,
                     uint32_t len, float *rows, uint32_t n_rows, float *logits,
                     float *step_attn)
{
    const pkm_config *c = &m->c;
    const size_t n_slots = (size_t)c->n_layers * c->n_kv_heads;
    const size_t stride = m->rope_len;
    if (n_rows > len) return -1;
    for (size_t s = 0; s < n_slots; s++) {
        if (full[s].cap < len) return -1;
        full[s].n = 0;
    }
    if (rows)
        memset(rows, 0,
               (size_t)c->n_layers * c->n_heads * n_rows * len * sizeof(float));
    for (uint32_t t = 0; t < len; t++) {
        const int want_row = rows && t >= len - n_rows;
        if (pkm_model_step(m, full, tok[t], t, want_row ? step_attn : NULL,
                           stride, t + 1 == len ? logits : NULL) != 0)
            return -1;
        if (!want_row) continue;
        const uint32_t j = t - (len - n_rows);
        for (size_t lh = 0; lh < (size_t)c->n_layers * c->n_heads; lh++)
            memcpy(rows + (lh * n_rows + j) * len, step_attn + lh * stride,
                   (size_t)(t + 1) * sizeof(float));
    }
    return 0;
}
