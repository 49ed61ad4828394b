/*
 * pkm_prompt.c - the pass-key prompts of the bench model and its
 * calibration excerpts (pkm_prompt.h).
 */
#include "pkm_prompt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char NEEDLE_FMT[] = " The pass key is %s. Remember it. ";
static const char QUESTION[] = "\nWhat is the pass key? The pass key is ";
_Static_assert(sizeof QUESTION - 1 == PKM_QUESTION_LEN, "question length");

uint64_t pkm_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int pkm_needle_prompt(const unsigned char *text, size_t text_len,
                      uint32_t len, double depth, uint64_t *rng,
                      unsigned char *out, char key[PKM_KEY_DIGITS + 1])
{
    char needle[64];
    snprintf(key, PKM_KEY_DIGITS + 1, "%05u",
             (unsigned)(pkm_splitmix(rng) % 100000u));
    snprintf(needle, sizeof needle, NEEDLE_FMT, key);
    const size_t nl = strlen(needle), ql = strlen(QUESTION);
    if (len < nl + ql + 8 || text_len < (size_t)len + 2) return -1;
    const size_t hay = len - nl - ql;
    const size_t start = (size_t)(pkm_splitmix(rng) % (text_len - hay - 1));
    const size_t pos = (size_t)floor(depth * (double)hay + 0.5);
    memcpy(out, text + start, pos);
    memcpy(out + pos, needle, nl);
    memcpy(out + pos + nl, text + start + pos, hay - pos);
    memcpy(out + hay + nl, QUESTION, ql);
    return 0;
}

uint64_t pkm_calibration_rng(uint64_t seed)
{
    return seed * 0x9E3779B97F4A7C15ull + 5u;
}

size_t pkm_calibration_offset(size_t text_len, uint32_t len, uint64_t *rng)
{
    return (size_t)(pkm_splitmix(rng) % (text_len - len - 1));
}
