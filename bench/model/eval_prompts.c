/*
 * eval_prompts.c - the built-in pass-key prompts and the prompt-file reader
 * and writer of model_eval (see eval_prompts.h).
 */
#include "eval_prompts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkm_io.h"
#include "pkm_prompt.h"

void eval_prompts_free(eval_prompt_set *s)
{
    for (uint32_t i = 0; s->p && i < s->n; i++) free(s->p[i].text);
    free(s->p);
    s->p = NULL;
    s->n = 0;
}

uint32_t eval_prompt_total(const eval_prompt *p)
{
    uint32_t n = p->q_end[p->n_q - 1];
    for (uint32_t j = 0; j < p->n_q; j++) n += p->ans_len[j];
    return n;
}

void eval_prompt_find_key(eval_prompt *p)
{
    p->key_pos = UINT32_MAX;
    for (uint32_t i = 0; i + p->ans_len[0] <= p->ctx_len; i++)
        if (!memcmp(p->text + i, p->answer[0], p->ans_len[0])) {
            p->key_pos = i;
            return;
        }
}

int eval_needles(eval_prompt_set *s, const unsigned char *text,
                 size_t text_len, uint32_t len, uint32_t n, uint64_t seed,
                 uint64_t *rng_out, char *err, size_t errlen)
{
    s->p = calloc(n ? n : 1, sizeof *s->p);
    s->n = 0;
    if (!s->p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint64_t rng = seed * 0x100000001B3ull + 17;
    *rng_out = rng;
    for (uint32_t i = 0; i < n; i++) {
        eval_prompt *p = &s->p[i];
        char key[PKM_KEY_DIGITS + 1];
        p->text = malloc(len);
        if (!p->text) {
            snprintf(err, errlen, "out of memory");
            eval_prompts_free(s);
            return -1;
        }
        s->n = i + 1;
        const double depth = (double)(i % EVAL_N_DEPTHS) / (EVAL_N_DEPTHS - 1);
        if (pkm_needle_prompt(text, text_len, len, depth, &rng, p->text,
                              key) != 0) {
            snprintf(err, errlen, "needle prompts of %u bytes do not fit", len);
            eval_prompts_free(s);
            return -1;
        }
        p->len = p->q_end[0] = len;
        p->ctx_len = len - PKM_QUESTION_LEN;
        p->n_q = 1;
        p->ans_len[0] = PKM_KEY_DIGITS;
        memcpy(p->answer[0], key, PKM_KEY_DIGITS);
        p->depth = (int)(i % EVAL_N_DEPTHS);
        eval_prompt_find_key(p);
        *rng_out = rng;
    }
    return 0;
}

/* Unescapes field [b, e) into out (capacity cap); returns its length or -1. */
static long unescape(const char *b, const char *e, unsigned char *out,
                     size_t cap)
{
    size_t n = 0;
    for (const char *c = b; c < e; c++) {
        unsigned char v = (unsigned char)*c;
        if (v == '\\') {
            if (++c >= e) return -1;
            if (*c == 'n') v = '\n';
            else if (*c == 't') v = '\t';
            else if (*c == '\\') v = '\\';
            else return -1;
        }
        if (n >= cap) return -1;
        out[n++] = v;
    }
    return (long)n;
}

int eval_prompts_read(eval_prompt_set *s, const char *path,
                      uint32_t max_total, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    size_t flen = 0;
    char *buf = (char *)pkm_read_file(path, &flen);
    if (!buf) {
        snprintf(err, errlen, "cannot read prompts file %s", path);
        return -1;
    }
    uint32_t lines = 1;
    for (size_t i = 0; i < flen; i++) lines += buf[i] == '\n';
    s->p = calloc(lines, sizeof *s->p);
    unsigned char *tmp = malloc((size_t)max_total + 1);
    int rc = -1;
    if (!s->p || !tmp) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    uint32_t line = 0;
    for (char *c = buf; c < buf + flen;) {
        char *eol = memchr(c, '\n', (size_t)(buf + flen - c));
        if (!eol) eol = buf + flen;
        line++;
        char *e = eol > c && eol[-1] == '\r' ? eol - 1 : eol;
        if (e == c || *c == '#') {
            c = eol + 1;
            continue;
        }
        /* field f is [fb[f], fb[f + 1] - 1); a tenth field is too many */
        const char *fb[2 * EVAL_MAX_Q + 2];
        uint32_t nf = 0;
        for (const char *t = c; nf <= 2 * EVAL_MAX_Q + 1;) {
            fb[nf++] = t;
            const char *tb = memchr(t, '\t', (size_t)(e - t));
            if (!tb) break;
            t = tb + 1;
        }
        if (nf < 3 || nf % 2 == 0 || nf > 2 * EVAL_MAX_Q + 1) {
            snprintf(err, errlen, "%s:%u: want tab-separated fields context, "
                     "question, answer (then up to %d more question, answer "
                     "pairs)", path, line, EVAL_MAX_Q - 1);
            goto out;
        }
        fb[nf] = e + 1;
        eval_prompt *p = &s->p[s->n];
        p->n_q = (nf - 1) / 2;
        long used = 0, total = 0;
        int bad_field = 0;
        for (uint32_t f = 0; f < nf && !bad_field; f++) {
            const char *fb0 = fb[f], *fe = fb[f + 1] - 1;
            const int is_answer = f > 0 && f % 2 == 0;
            const long n = is_answer
                ? unescape(fb0, fe, p->answer[f / 2 - 1], EVAL_MAX_ANSWER)
                : unescape(fb0, fe, tmp + used, max_total - (size_t)used);
            bad_field = n < 1 || total + n > (long)max_total;
            total += n;
            if (bad_field) break;
            if (is_answer) {
                p->ans_len[f / 2 - 1] = (uint32_t)n;
            } else {
                used += n;
                if (f == 0) p->ctx_len = (uint32_t)n;
                else p->q_end[f / 2] = (uint32_t)used;
            }
        }
        if (bad_field) {
            snprintf(err, errlen, "%s:%u: a field is empty, has a bad escape, "
                     "or context, questions and answers exceed %u bytes "
                     "(an answer at most %d)", path, line, max_total,
                     EVAL_MAX_ANSWER);
            goto out;
        }
        p->text = malloc((size_t)used);
        if (!p->text) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        memcpy(p->text, tmp, (size_t)used);
        p->len = p->q_end[0];
        p->depth = -1;
        eval_prompt_find_key(p);
        s->n++;
        c = eol + 1;
    }
    if (s->n == 0) {
        snprintf(err, errlen, "%s holds no prompt", path);
        goto out;
    }
    rc = 0;
out:
    free(buf);
    free(tmp);
    if (rc != 0) eval_prompts_free(s);
    return rc;
}

/* Writes n bytes with the escapes the reader undoes. */
static void escaped(FILE *f, const unsigned char *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (b[i] == '\n') fputs("\\n", f);
        else if (b[i] == '\t') fputs("\\t", f);
        else if (b[i] == '\\') fputs("\\\\", f);
        else fputc(b[i], f);
    }
}

int eval_prompts_write(const eval_prompt_set *s, const char *path,
                       const char *comment)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "# %s\n", comment);
    for (uint32_t i = 0; i < s->n; i++) {
        const eval_prompt *p = &s->p[i];
        escaped(f, p->text, p->ctx_len);
        for (uint32_t j = 0; j < p->n_q; j++) {
            const uint32_t b = j ? p->q_end[j - 1] : p->ctx_len;
            fputc('\t', f);
            escaped(f, p->text + b, p->q_end[j] - b);
            fputc('\t', f);
            escaped(f, p->answer[j], p->ans_len[j]);
        }
        fputc('\n', f);
    }
    const int failed = ferror(f);
    return fclose(f) == 0 && !failed ? 0 : -1;
}
