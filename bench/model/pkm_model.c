/*
 * pkm_model.c - loads the weights file of docs/model.md and runs the
 * decoder one token at a time against per-(layer, KV head) K/V slots.
 * The arithmetic follows bench/model/net.py (class Model) exactly:
 * RMSNorm, rotary embeddings on pairs (i, i + head_dim/2) with the query
 * pre-scaled by 1/sqrt(head_dim), grouped-query attention (query head h
 * reads KV head h / (n_heads / n_kv_heads)), SwiGLU, untied output.
 * Dot products sum eight float lanes, then the lanes in double; the
 * attention output accumulates in float.
 */
#include "pkm_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PKM_HEADER_BYTES 64u

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static float rdf(const unsigned char *p)
{
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static size_t weight_count(const pkm_config *c)
{
    const size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim,
                 kvd = (size_t)c->n_kv_heads * c->head_dim, f = c->ffn_dim;
    const size_t per_layer = d + qd * d + 2 * kvd * d + d * qd + d + 3 * f * d;
    return (size_t)c->vocab * d + c->n_layers * per_layer + d +
           (size_t)c->vocab * d;
}

int pkm_model_load(pkm_model *m, const char *path, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return -1;
    }
    unsigned char h[PKM_HEADER_BYTES];
    if (fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, "PKVM", 4) != 0 ||
        rd32(h + 4) != 1u) {
        snprintf(err, errlen, "%s: not a version-1 PKVM weights file", path);
        fclose(f);
        return -1;
    }
    pkm_config *c = &m->c;
    uint32_t *const shape[] = {&c->vocab, &c->dim, &c->n_layers, &c->n_heads,
                               &c->n_kv_heads, &c->head_dim, &c->ffn_dim,
                               &c->max_ctx}; /* the header's order */
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++)
        *shape[i] = rd32(h + 8 + 4 * i);
    c->rope_theta = rdf(h + 40);
    c->norm_eps = rdf(h + 44);
    c->train_step = rd64(h + 48);
    c->train_tokens = rd64(h + 56);
    if (c->vocab == 0 || c->vocab > 65536 || c->dim == 0 || c->dim > 8192 ||
        c->n_layers == 0 || c->n_layers > 256 || c->n_kv_heads == 0 ||
        c->n_heads == 0 || c->n_heads % c->n_kv_heads != 0 ||
        c->n_heads > 256 || c->head_dim == 0 || c->head_dim % 2 != 0 ||
        c->head_dim > 1024 || c->ffn_dim == 0 || c->ffn_dim > 65536 ||
        c->max_ctx == 0 || c->max_ctx > (1u << 20) ||
        !(c->rope_theta > 0.0f) || !(c->norm_eps > 0.0f)) {
        snprintf(err, errlen, "%s: implausible header", path);
        fclose(f);
        return -1;
    }
    const size_t nw = weight_count(c);
    m->blob = malloc(nw * sizeof(float));
    unsigned char *raw = malloc(nw * 4);
    if (!m->blob || !raw) {
        snprintf(err, errlen, "out of memory");
        free(raw);
        fclose(f);
        pkm_model_free(m);
        return -1;
    }
    const size_t got = fread(raw, 4, nw, f);
    const int extra = fgetc(f);
    fclose(f);
    if (got != nw || extra != EOF) {
        snprintf(err, errlen, "%s: size does not match the header", path);
        free(raw);
        pkm_model_free(m);
        return -1;
    }
    for (size_t i = 0; i < nw; i++) m->blob[i] = rdf(raw + 4 * i);
    free(raw);

    const size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim,
                 kvd = (size_t)c->n_kv_heads * c->head_dim, fd = c->ffn_dim;
    const float *p = m->blob;
    m->layers = calloc(c->n_layers, sizeof *m->layers);
    m->rope_len = 4 * c->max_ctx;
    const size_t half = c->head_dim / 2;
    const size_t rope = (size_t)m->rope_len * half;
    m->rope_cos = malloc(2 * rope * sizeof(float));
    /* the step's scratch vectors, in one block */
    const size_t sizes[] = {d, d, qd, kvd, kvd, qd, fd, fd,
                            (size_t)m->rope_len + 1};
    float **const vec[] = {&m->x, &m->hx, &m->q, &m->k, &m->v, &m->o,
                           &m->h1, &m->h3, &m->scores};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += sizes[i];
    m->scratch = malloc(total * sizeof(float));
    if (!m->layers || !m->rope_cos || !m->scratch) {
        snprintf(err, errlen, "out of memory");
        pkm_model_free(m);
        return -1;
    }
    m->rope_sin = m->rope_cos + rope;
    total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *vec[i] = m->scratch + total;
        total += sizes[i];
    }
    m->emb = p;
    p += (size_t)c->vocab * d;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        pkm_layer *L = &m->layers[l];
        L->attn_norm = p; p += d;
        L->wq = p; p += qd * d;
        L->wk = p; p += kvd * d;
        L->wv = p; p += kvd * d;
        L->wo = p; p += d * qd;
        L->ffn_norm = p; p += d;
        L->w1 = p; p += fd * d;
        L->w3 = p; p += fd * d;
        L->w2 = p; p += d * fd;
    }
    m->norm = p; p += d;
    m->out = p;
    /* as train.rope_tables: float64 angles, rounded once to float */
    for (uint32_t t = 0; t < m->rope_len; t++) {
        for (size_t i = 0; i < half; i++) {
            const double inv =
                1.0 / pow((double)c->rope_theta,
                          (double)(2 * i) / (double)c->head_dim);
            const double a = (double)t * inv;
            m->rope_cos[t * half + i] = (float)cos(a);
            m->rope_sin[t * half + i] = (float)sin(a);
        }
    }
    return 0;
}

void pkm_model_free(pkm_model *m)
{
    free(m->blob);
    free(m->layers);
    free(m->rope_cos); /* rope_sin is its second half */
    free(m->scratch);
    memset(m, 0, sizeof *m);
}

int pkm_slot_init(pkm_slot *s, uint32_t cap, uint32_t head_dim)
{
    s->cap = cap;
    s->n = 0;
    s->pos = malloc((size_t)cap * sizeof *s->pos);
    s->k = malloc((size_t)cap * head_dim * sizeof(float));
    s->v = malloc((size_t)cap * head_dim * sizeof(float));
    if (!s->pos || !s->k || !s->v) {
        pkm_slot_free(s);
        return -1;
    }
    return 0;
}

void pkm_slot_free(pkm_slot *s)
{
    free(s->row);
    free(s->stage);
    free(s->pos);
    free(s->k);
    free(s->v);
    memset(s, 0, sizeof *s);
}

pkm_slot *pkm_slots_new(size_t n, uint32_t cap, uint32_t head_dim)
{
    pkm_slot *s = calloc(n, sizeof *s);
    for (size_t i = 0; s && i < n; i++)
        if (pkm_slot_init(&s[i], cap, head_dim) != 0) {
            pkm_slots_free(s, n);
            return NULL;
        }
    return s;
}

void pkm_slots_free(pkm_slot *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++) pkm_slot_free(&s[i]);
    free(s);
}

/* sum_i a[i] b[i]: eight float lanes (so the compiler vectorises), summed
 * in double at the end; the order is fixed, so the result is the same on
 * every run. */
static float dot(const float *a, const float *b, size_t n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    double s = 0.0;
    for (size_t j = 0; j < 8; j++) s += (double)acc[j];
    for (; i < n; i++) s += (double)a[i] * (double)b[i];
    return (float)s;
}

/* y[r] = sum_c W[r][c] x[c], W row-major [rows][cols] */
static void matvec(const float *W, const float *x, size_t rows, size_t cols,
                   float *y)
{
    for (size_t r = 0; r < rows; r++) y[r] = dot(W + r * cols, x, cols);
}

static void rmsnorm(const float *x, const float *w, size_t n, float eps,
                    float *y)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    const float r = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    for (size_t i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

static void rope(float *x, const float *cs, const float *sn, size_t half)
{
    for (size_t i = 0; i < half; i++) {
        const float a = x[i], b = x[i + half];
        x[i] = a * cs[i] - b * sn[i];
        x[i + half] = a * sn[i] + b * cs[i];
    }
}

/* Row i of a slot's keys (base s->k, off 0) or values (s->v, off hd):
 * contiguous, or through the pooled view's rows with the new token, the
 * last, in the stage. */
static const float *held_row(const pkm_slot *s, const float *base,
                             uint32_t i, size_t hd, size_t off)
{
    if (!s->row) return base + (size_t)i * hd;
    if (i + 1 == s->n) return s->stage + off;
    return base + (size_t)s->row[i] * hd;
}

int pkm_model_step(pkm_model *m, pkm_slot *slots, uint32_t tok, uint32_t pos,
                   float *attn, size_t attn_stride, float *logits)
{
    const pkm_config *c = &m->c;
    const size_t d = c->dim, hd = c->head_dim, half = hd / 2,
                 qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd,
                 fd = c->ffn_dim, g = c->n_heads / c->n_kv_heads;
    if (pos >= m->rope_len || tok >= c->vocab) return -1;
    for (size_t s = 0; s < (size_t)c->n_layers * c->n_kv_heads; s++)
        if (slots[s].n >= slots[s].cap) return -1;
    const float *cs = m->rope_cos + (size_t)pos * half;
    const float *sn = m->rope_sin + (size_t)pos * half;
    const float qscale = (float)(1.0 / sqrt((double)hd));
    memcpy(m->x, m->emb + (size_t)tok * d, d * sizeof(float));

    for (uint32_t l = 0; l < c->n_layers; l++) {
        const pkm_layer *L = &m->layers[l];
        pkm_slot *ls = slots + (size_t)l * c->n_kv_heads;
        rmsnorm(m->x, L->attn_norm, d, c->norm_eps, m->hx);
        matvec(L->wq, m->hx, qd, d, m->q);
        matvec(L->wk, m->hx, kvd, d, m->k);
        matvec(L->wv, m->hx, kvd, d, m->v);
        for (size_t h = 0; h < c->n_heads; h++) {
            float *qh = m->q + h * hd;
            for (size_t i = 0; i < hd; i++) qh[i] *= qscale;
            rope(qh, cs, sn, half);
        }
        if (m->q_out)
            memcpy(m->q_out + (size_t)l * qd, m->q, qd * sizeof(float));
        for (size_t kv = 0; kv < c->n_kv_heads; kv++) {
            pkm_slot *s = &ls[kv];
            float *kr = s->row ? s->stage : s->k + (size_t)s->n * hd;
            memcpy(kr, m->k + kv * hd, hd * sizeof(float));
            rope(kr, cs, sn, half);
            memcpy(s->row ? s->stage + hd : s->v + (size_t)s->n * hd,
                   m->v + kv * hd, hd * sizeof(float));
            s->pos[s->n] = pos;
            s->n++;
        }
        for (size_t h = 0; h < c->n_heads; h++) {
            const pkm_slot *s = &ls[h / g];
            const float *qh = m->q + h * hd;
            float mx = -INFINITY;
            for (uint32_t i = 0; i < s->n; i++) {
                m->scores[i] = dot(qh, held_row(s, s->k, i, hd, 0), hd);
                if (m->scores[i] > mx) mx = m->scores[i];
            }
            double z = 0.0;
            for (uint32_t i = 0; i < s->n; i++) {
                m->scores[i] = expf(m->scores[i] - mx);
                z += m->scores[i];
            }
            const float inv = (float)(1.0 / z);
            float *oh = m->o + h * hd;
            for (size_t j = 0; j < hd; j++) oh[j] = 0.0f;
            float *dst = attn ? attn + ((size_t)l * c->n_heads + h) * attn_stride
                              : NULL;
            for (uint32_t i = 0; i < s->n; i++) {
                const float p = m->scores[i] * inv;
                if (dst) dst[i] = p;
                const float *vr = held_row(s, s->v, i, hd, hd);
                for (size_t j = 0; j < hd; j++) oh[j] += p * vr[j];
            }
        }
        matvec(L->wo, m->o, d, qd, m->hx);
        for (size_t i = 0; i < d; i++) m->x[i] += m->hx[i];
        rmsnorm(m->x, L->ffn_norm, d, c->norm_eps, m->hx);
        matvec(L->w1, m->hx, fd, d, m->h1);
        matvec(L->w3, m->hx, fd, d, m->h3);
        for (size_t i = 0; i < fd; i++) {
            const float a = m->h1[i];
            m->h1[i] = a / (1.0f + expf(-a)) * m->h3[i];
        }
        matvec(L->w2, m->h1, d, fd, m->hx);
        for (size_t i = 0; i < d; i++) m->x[i] += m->hx[i];
    }
    if (logits) {
        rmsnorm(m->x, m->norm, d, c->norm_eps, m->hx);
        matvec(m->out, m->hx, c->vocab, d, logits);
    }
    return 0;
}
