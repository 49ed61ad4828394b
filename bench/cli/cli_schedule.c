/*
 * cli_schedule.c - the schedule flags of `pyramidkv plan` and `pyramidkv
 * bench`: collection, the kinds they apply to, and exact decimal
 * conversions (gamma to thousandths, profile weights to integers by one
 * common power of ten, taper's beta to the double Python's float() gives).
 */
#include "cli_schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct flag_info {
    const char *name;
    size_t offset;
    unsigned kinds; /* bit k: read by kind k */
} flag_info;

#define K(kind) (1u << (kind))
#define KVF (K(PB_SCHEDULE_KVFACTORY) | K(PB_SCHEDULE_KVFACTORY_BALANCED))
#define FLAG(field, kinds)                                                     \
    {"--" #field, offsetof(pb_cli_schedule_flags, field), kinds}
static const flag_info FLAGS[] = {
    FLAG(ratio, K(PB_SCHEDULE_ARITHMETIC) | K(PB_SCHEDULE_CURVE) |
                    K(PB_SCHEDULE_GEOMETRIC)),
    FLAG(window, KVF | K(PB_SCHEDULE_CAKE)),
    FLAG(beta, KVF | K(PB_SCHEDULE_TAPER)),
    {"--prompt-len", offsetof(pb_cli_schedule_flags, prompt_len),
     KVF | K(PB_SCHEDULE_CAKE)},
    FLAG(sinks, K(PB_SCHEDULE_TAPER)),
    FLAG(gamma, K(PB_SCHEDULE_CURVE)),
    FLAG(weights, K(PB_SCHEDULE_PROFILE) | K(PB_SCHEDULE_CAKE)),
    {"--min-share", offsetof(pb_cli_schedule_flags, min_share),
     K(PB_SCHEDULE_PROFILE)},
};
#undef FLAG
#undef KVF
#undef K
#define N_FLAGS (sizeof FLAGS / sizeof FLAGS[0])

static const char **slot_of(pb_cli_schedule_flags *f, size_t offset) {
    return (const char **)(void *)((char *)f + offset);
}

static const char *text_of(const pb_cli_schedule_flags *f, size_t offset) {
    return *(const char *const *)(const void *)((const char *)f + offset);
}

int pb_cli_schedule_flag(pb_cli_walk *w, pb_cli_schedule_flags *f) {
    const char **dst = NULL;
    if (strcmp(w->flag, "--schedule") == 0) {
        dst = &f->schedule;
    } else {
        for (size_t i = 0; i < N_FLAGS; ++i)
            if (strcmp(w->flag, FLAGS[i].name) == 0)
                dst = slot_of(f, FLAGS[i].offset);
    }
    if (dst == NULL) return 0;
    if (pb_cli_walk_value(w, dst) != 0) return PB_CLI_USAGE;
    return 1;
}

int pb_cli_schedule_kinds(const char *cmd, const pb_cli_schedule_flags *f,
                          uint32_t *kinds, size_t *n) {
    *n = 0;
    if (f->schedule == NULL) {
        kinds[(*n)++] = PB_SCHEDULE_ARITHMETIC;
        return 0;
    }
    const char *p = f->schedule;
    for (;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        uint32_t k = 0;
        if (*n == PB_CLI_MAX_SCHEDULES || pb_cli_lookup_schedule(p, len, &k))
            goto bad;
        for (size_t i = 0; i < *n; ++i)
            if (kinds[i] == k)
                return pb_cli_usage_error(cmd, "--schedule: '%.*s' given "
                                          "twice", (int)(len > 40 ? 40 : len),
                                          p);
        kinds[(*n)++] = k;
        if (comma == NULL) return 0;
        p = comma + 1;
        continue;
    bad:
        return pb_cli_usage_error(cmd, "--schedule: '%.*s' is not %s (at most "
                                  "%u)", (int)(len > 40 ? 40 : len), p,
                                  pb_cli_schedule_list, PB_CLI_MAX_SCHEDULES);
    }
}

int pb_cli_schedule_check_used(const char *cmd,
                               const pb_cli_schedule_flags *f,
                               const uint32_t *kinds, size_t n) {
    for (size_t i = 0; i < N_FLAGS; ++i) {
        if (text_of(f, FLAGS[i].offset) == NULL) continue;
        unsigned used = 0;
        for (size_t k = 0; k < n; ++k)
            used |= (FLAGS[i].kinds >> kinds[k]) & 1u;
        if (!used)
            return pb_cli_usage_error(
                cmd, "%s does not apply to --schedule %s (see --help)",
                FLAGS[i].name, f->schedule ? f->schedule : "arithmetic");
    }
    return 0;
}

/* A non-negative decimal "digits[.digits]": *ipart, the fraction digits
 * as an integer *frac and their count *places. -1 if malformed. */
static int parse_decimal(const char *s, size_t len, uint64_t *ipart,
                         uint64_t *frac, unsigned *places) {
    size_t i = 0;
    uint64_t v = 0;
    if (len == 0) return -1;
    for (; i < len && s[i] != '.'; ++i) {
        if (s[i] < '0' || s[i] > '9' || i >= 12) return -1;
        v = v * 10u + (uint64_t)(s[i] - '0');
    }
    if (i == 0) return -1;
    *ipart = v;
    *frac = 0;
    *places = 0;
    if (i == len) return 0;
    ++i; /* '.' */
    if (i == len) return -1;
    for (; i < len; ++i) {
        if (s[i] < '0' || s[i] > '9' || *places >= 9u) return -1;
        *frac = *frac * 10u + (uint64_t)(s[i] - '0');
        ++*places;
    }
    return 0;
}

static uint64_t pow10u(unsigned n) {
    uint64_t v = 1;
    while (n-- > 0u) v *= 10u;
    return v;
}

static int parse_gamma(const char *cmd, const char *text, uint32_t *milli) {
    uint64_t ip, fr;
    unsigned places;
    if (parse_decimal(text, strlen(text), &ip, &fr, &places) != 0 ||
        places > 3u || ip > 1000u)
        goto bad;
    const uint64_t v = ip * 1000u + fr * pow10u(3u - places);
    if (v < 1u || v > 1000000u) goto bad;
    *milli = (uint32_t)v;
    return 0;
bad:
    return pb_cli_usage_error(cmd,
                              "--gamma: '%s' is not a decimal in 0.001 .. "
                              "1000 with at most three decimals",
                              text);
}

static int parse_taper_beta(const char *cmd, const char *text, double *out) {
    uint64_t ip, fr;
    unsigned places;
    if (parse_decimal(text, strlen(text), &ip, &fr, &places) != 0 || ip < 1u)
        return pb_cli_usage_error(cmd,
                                  "--beta: '%s' is not a decimal >= 1 (taper)",
                                  text);
    *out = strtod(text, NULL); /* correctly rounded, as Python's float() */
    return 0;
}

/* Every weight scaled by 10^d, d the most decimals any of them has, so the
 * proportions are exact. */
static int parse_weights(const char *cmd, const char *text, uint32_t layers,
                         uint32_t *out) {
    unsigned most = 0;
    uint32_t n = 0;
    for (int pass = 0; pass < 2; ++pass) {
        const char *p = text;
        n = 0;
        for (;;) {
            const char *comma = strchr(p, ',');
            const size_t len = comma ? (size_t)(comma - p) : strlen(p);
            uint64_t ip, fr;
            unsigned places;
            if (parse_decimal(p, len, &ip, &fr, &places) != 0)
                return pb_cli_usage_error(
                    cmd, "--weights: '%.*s' is not a non-negative decimal "
                    "(at most 9 decimals)", (int)(len > 40 ? 40 : len), p);
            if (pass == 0) {
                if (places > most) most = places;
            } else {
                if (n == layers)
                    return pb_cli_usage_error(
                        cmd, "--weights: more than --layers (%u) values",
                        layers);
                const uint64_t scale = pow10u(most);
                if (ip > UINT32_MAX / scale)
                    goto too_big;
                const uint64_t v = ip * scale + fr * pow10u(most - places);
                if (v > UINT32_MAX) goto too_big;
                out[n] = (uint32_t)v;
            }
            ++n;
            if (comma == NULL) break;
            p = comma + 1;
        }
    }
    if (n != layers)
        return pb_cli_usage_error(cmd, "--weights: %u values for %u layers", n,
                                  layers);
    return 0;
too_big:
    return pb_cli_usage_error(cmd,
                              "--weights: scaled by 10^%u to integers, a "
                              "weight exceeds 4294967295; give fewer "
                              "decimals or smaller values",
                              most);
}

int pb_cli_schedule_build(const char *cmd, const pb_cli_schedule_flags *f,
                          uint32_t kind, uint32_t budget, uint32_t layers,
                          uint32_t *weights, pb_schedule *out) {
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    s.kind = kind;
    s.budget = budget;
    s.num_layers = layers;
    const int kvf = kind == PB_SCHEDULE_KVFACTORY ||
                    kind == PB_SCHEDULE_KVFACTORY_BALANCED;
    const int windowed = kvf || kind == PB_SCHEDULE_CAKE;
    if (f->ratio && (kind == PB_SCHEDULE_ARITHMETIC ||
                     kind == PB_SCHEDULE_CURVE ||
                     kind == PB_SCHEDULE_GEOMETRIC) &&
        pb_cli_parse_u32(cmd, "--ratio", f->ratio, 1u, UINT32_MAX, &s.ratio))
        return PB_CLI_USAGE;
    if (kvf && f->beta &&
        pb_cli_parse_u32(cmd, "--beta", f->beta, 1u, UINT32_MAX, &s.beta))
        return PB_CLI_USAGE;
    if (windowed) {
        if (f->window &&
            pb_cli_parse_u32(cmd, "--window", f->window, 0u, UINT32_MAX,
                             &s.window))
            return PB_CLI_USAGE;
        if (f->prompt_len &&
            pb_cli_parse_u32(cmd, "--prompt-len", f->prompt_len, 1u,
                             UINT32_MAX, &s.prompt_len))
            return PB_CLI_USAGE;
        if (s.window >= budget)
            return pb_cli_usage_error(
                cmd, "--window: %u is not below %s--budget (%u)",
                s.window, kvf ? "the KV size " : "", budget);
    }
    if (kind == PB_SCHEDULE_TAPER) {
        if (f->beta && parse_taper_beta(cmd, f->beta, &s.taper_beta))
            return PB_CLI_USAGE;
        if (f->sinks && pb_cli_parse_u32(cmd, "--sinks", f->sinks, 0u,
                                         UINT32_MAX - 1u, &s.sinks))
            return PB_CLI_USAGE;
    }
    if (kind == PB_SCHEDULE_CURVE && f->gamma &&
        parse_gamma(cmd, f->gamma, &s.gamma_milli))
        return PB_CLI_USAGE;
    if (kind == PB_SCHEDULE_PROFILE || kind == PB_SCHEDULE_CAKE) {
        if (f->weights == NULL)
            return pb_cli_usage_error(
                cmd, "--weights is required for the %s schedule%s",
                pb_schedule_kind_name(kind),
                kind == PB_SCHEDULE_CAKE
                    ? " (the layers' CAKE preferences, e.g. from "
                      "pb_cake_layer_preference or pyramidkv.cake_weights)"
                    : "");
        if (parse_weights(cmd, f->weights, layers, weights)) return PB_CLI_USAGE;
        s.weights = weights;
    }
    if (kind == PB_SCHEDULE_PROFILE) {
        if (f->min_share &&
            pb_cli_parse_u32(cmd, "--min-share", f->min_share, 0u, budget,
                             &s.min_share))
            return PB_CLI_USAGE;
    }
    *out = s;
    return 0;
}

int pb_cli_schedule_arrays(const char *cmd, uint32_t layers,
                           uint32_t **shares, uint32_t **weights) {
    *shares = malloc((size_t)layers * sizeof **shares);
    *weights = malloc((size_t)layers * sizeof **weights);
    if (*shares != NULL && *weights != NULL) return 0;
    free(*shares);
    free(*weights);
    *shares = *weights = NULL;
    fprintf(stderr, "pyramidkv %s: out of memory\n", cmd);
    return 1;
}

void pb_cli_schedule_describe(const pb_schedule *s, char *buf, size_t len) {
    const char *name = pb_schedule_kind_name(s->kind);
    switch (s->kind) {
    case PB_SCHEDULE_ARITHMETIC:
    case PB_SCHEDULE_GEOMETRIC:
        snprintf(buf, len, "%s B=%u ratio=%u", name, s->budget, s->ratio);
        break;
    case PB_SCHEDULE_CURVE:
        snprintf(buf, len, "curve B=%u ratio=%u gamma=%u.%03u", s->budget,
                 s->ratio, s->gamma_milli / 1000u, s->gamma_milli % 1000u);
        break;
    case PB_SCHEDULE_KVFACTORY:
    case PB_SCHEDULE_KVFACTORY_BALANCED:
        if (s->prompt_len != 0u)
            snprintf(buf, len, "%s C=%u window=%u beta=%u prompt=%u", name,
                     s->budget, s->window, s->beta, s->prompt_len);
        else
            snprintf(buf, len, "%s C=%u window=%u beta=%u", name, s->budget,
                     s->window, s->beta);
        break;
    case PB_SCHEDULE_TAPER: {
        /* The shortest text that reads back as the same double. */
        char beta[32];
        for (int digits = 1; digits <= 17; ++digits) {
            snprintf(beta, sizeof beta, "%.*g", digits, s->taper_beta);
            if (strtod(beta, NULL) == s->taper_beta) break;
        }
        snprintf(buf, len, "taper B=%u sinks=%u beta=%s", s->budget, s->sinks,
                 beta);
        break;
    }
    case PB_SCHEDULE_PROFILE:
        snprintf(buf, len, "profile B=%u min-share=%u", s->budget,
                 s->min_share);
        break;
    case PB_SCHEDULE_CAKE:
        if (s->prompt_len != 0u)
            snprintf(buf, len, "cake B=%u window=%u prompt=%u", s->budget,
                     s->window, s->prompt_len);
        else
            snprintf(buf, len, "cake B=%u window=%u", s->budget, s->window);
        break;
    default:
        snprintf(buf, len, "%s B=%u", name ? name : "?", s->budget);
        break;
    }
}
