/*
 * eval_prompts.c - the built-in pass-key prompts and the prompt-file reader
 * of model_eval (see eval_prompts.h).
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

/* The answer's first occurrence in the context, or UINT32_MAX. */
static uint32_t find_key(const eval_prompt *p)
{
    if (p->ans_len > p->ctx_len) return UINT32_MAX;
    for (uint32_t i = 0; i + p->ans_len <= p->ctx_len; i++)
        if (!memcmp(p->text + i, p->answer, p->ans_len)) return i;
    return UINT32_MAX;
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
        p->len = len;
        p->ctx_len = len - PKM_QUESTION_LEN;
        p->ans_len = 5;
        memcpy(p->answer, key, 5);
        p->depth = (int)(i % EVAL_N_DEPTHS);
        p->key_pos = find_key(p);
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
        char *t1 = memchr(c, '\t', (size_t)(e - c));
        char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(e - t1 - 1)) : NULL;
        if (!t1 || !t2 || memchr(t2 + 1, '\t', (size_t)(e - t2 - 1))) {
            snprintf(err, errlen, "%s:%u: want 3 tab-separated fields "
                     "(context, question, answer)", path, line);
            goto out;
        }
        eval_prompt *p = &s->p[s->n];
        const long cl = unescape(c, t1, tmp, max_total);
        const long ql = cl < 0 ? -1 : unescape(t1 + 1, t2, tmp + cl,
                                               max_total - (size_t)cl);
        const long al = unescape(t2 + 1, e, p->answer, EVAL_MAX_ANSWER);
        if (cl < 1 || ql < 1 || al < 1 || (uint64_t)(cl + ql + al) > max_total) {
            snprintf(err, errlen, "%s:%u: a field is empty, has a bad escape, "
                     "or context + question + answer exceeds %u bytes (answer "
                     "at most %d)", path, line, max_total, EVAL_MAX_ANSWER);
            goto out;
        }
        p->text = malloc((size_t)(cl + ql));
        if (!p->text) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        memcpy(p->text, tmp, (size_t)(cl + ql));
        p->ctx_len = (uint32_t)cl;
        p->len = (uint32_t)(cl + ql);
        p->ans_len = (uint32_t)al;
        p->depth = -1;
        p->key_pos = find_key(p);
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
