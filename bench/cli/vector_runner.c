/*
 * vector_runner.c - parses golden vector documents with cJSON and replays
 * every case against libpyramidkv (see vector_runner.h and docs/vectors.md
 * for the schema).
 *
 * It owns the schema checks and the replay; it does not own the library's
 * semantics, which it only calls. Every field is checked for its type and
 * range before use, unknown or repeated keys are refused (a typo must not
 * silently fall back to a default), and a case stops at its first failing
 * step, because later steps depend on the state the failed one left.
 */
#include "vector_runner.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"

/* Documents above this size are refused rather than read. */
#define VR_MAX_FILE_BYTES ((size_t)64u << 20)
/* Lists longer than this are shortened with "..." in messages. */
#define VR_MAX_LISTED 48u
/* Case names are shortened to this many bytes in messages. */
#define VR_MAX_NAME 120u

/* ------------------------------------------------------------------------ */
/* Status names, from the same table as the enum.                           */

typedef struct status_name {
    const char *name;
    pb_status value;
} status_name;

static const status_name status_names[] = {
#define VR_STATUS_ENTRY(name, value, message) {#name, name},
    PB_STATUS_MAP(VR_STATUS_ENTRY)
#undef VR_STATUS_ENTRY
};

static const char *name_of_status(pb_status s) {
    for (size_t i = 0; i < sizeof status_names / sizeof status_names[0]; ++i)
        if (status_names[i].value == s) return status_names[i].name;
    return "an unknown status";
}

/* ------------------------------------------------------------------------ */
/* A message buffer that truncates instead of overflowing.                  */

typedef struct msgbuf {
    char text[3072];
    size_t len;
} msgbuf;

static void msg_add(msgbuf *m, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void msg_add(msgbuf *m, const char *fmt, ...) {
    const size_t room = sizeof m->text - m->len;
    if (room <= 1u) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(m->text + m->len, room, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    m->len = (size_t)n < room ? m->len + (size_t)n : sizeof m->text - 1u;
}

/* Formats d with the fewest significant digits that read back as the same
 * double, so 0.1 prints as 0.1 and not 0.10000000000000001. */
static const char *shortest(double d, char *buf, size_t size) {
    for (int prec = 1; prec <= 17; ++prec) {
        snprintf(buf, size, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    return buf;
}

static void msg_add_u32_list(msgbuf *m, const uint32_t *v, size_t n) {
    msg_add(m, "[");
    for (size_t i = 0; i < n && i < VR_MAX_LISTED; ++i)
        msg_add(m, i ? ", %lu" : "%lu", (unsigned long)v[i]);
    if (n > VR_MAX_LISTED) msg_add(m, ", ... (%zu in all)", n);
    msg_add(m, "]");
}

/* ------------------------------------------------------------------------ */
/* The state of one run and of one case.                                    */

typedef enum policy_kind { POLICY_PYRAMIDKV, POLICY_SNAPKV, POLICY_BUDGET } policy_kind;

typedef struct run_state {
    FILE *report;
    int verbose;
    size_t max_bytes;
    const char *label;
    pb_vector_totals *totals;
} run_state;

typedef struct case_state {
    run_state *run;
    char name[VR_MAX_NAME + 8u];
    int failed;
    msgbuf msg;
} case_state;

/* Records the first failure of the case, after `prefix`; returns -1 so
 * callers can `return fail(...)`. */
static int vfail(case_state *c, const char *prefix, const char *fmt,
                 va_list ap) {
    if (c->failed) return -1;
    c->failed = 1;
    msg_add(&c->msg, "%s", prefix);
    const size_t room = sizeof c->msg.text - c->msg.len;
    const int n = vsnprintf(c->msg.text + c->msg.len, room, fmt, ap);
    if (n >= 0)
        c->msg.len = (size_t)n < room ? c->msg.len + (size_t)n
                                      : sizeof c->msg.text - 1u;
    return -1;
}

static int fail(case_state *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int fail(case_state *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(c, "", fmt, ap);
    va_end(ap);
    return -1;
}

/* Copies a case name for messages: control characters and quotes become
 * '?', so a hostile name cannot forge report lines. */
static void set_case_name(case_state *c, const cJSON *name, size_t index) {
    if (!cJSON_IsString(name) || name->valuestring == NULL) {
        snprintf(c->name, sizeof c->name, "#%zu", index);
        return;
    }
    const unsigned char *s = (const unsigned char *)name->valuestring;
    size_t i = 0;
    for (; s[i] != '\0' && i < VR_MAX_NAME; ++i)
        c->name[i] = (s[i] < 0x20u || s[i] == 0x7fu || s[i] == '"')
                         ? '?'
                         : (char)s[i];
    c->name[i] = '\0';
    if (s[i] != '\0') memcpy(c->name + i, "...", 4);
}

/* ------------------------------------------------------------------------ */
/* Typed field access.                                                      */

static int is_uint_double(double d, double max) {
    return isfinite(d) && d >= 0.0 && d <= max && floor(d) == d;
}

static int get_u32(const cJSON *item, uint32_t *out) {
    if (!cJSON_IsNumber(item) || !is_uint_double(item->valuedouble, 4294967295.0))
        return 0;
    *out = (uint32_t)item->valuedouble;
    return 1;
}

/* A uint64: a JSON integer up to 2^53 (larger ones are not exact in JSON
 * parsers that use doubles) or a string of decimal digits. */
static int get_u64(const cJSON *item, uint64_t *out) {
    if (cJSON_IsNumber(item)) {
        if (!is_uint_double(item->valuedouble, 9007199254740992.0)) return 0;
        *out = (uint64_t)item->valuedouble;
        return 1;
    }
    if (!cJSON_IsString(item) || item->valuestring == NULL) return 0;
    const char *s = item->valuestring;
    if (*s == '\0') return 0;
    uint64_t v = 0;
    for (; *s; ++s) {
        if (*s < '0' || *s > '9') return 0;
        const uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10u) return 0;
        v = v * 10u + d;
    }
    *out = v;
    return 1;
}

/* A list of uint32 values into a new malloc'd array (at least one slot). */
static int get_u32_list(const cJSON *item, uint32_t **out, size_t *n) {
    if (!cJSON_IsArray(item)) return 0;
    const int size = cJSON_GetArraySize(item);
    if (size < 0) return 0;
    uint32_t *v = malloc(((size_t)size + 1u) * sizeof *v);
    if (v == NULL) return 0;
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, item) {
        if (i >= (size_t)size || !get_u32(e, &v[i])) {
            free(v);
            return 0;
        }
        ++i;
    }
    *out = v;
    *n = i;
    return 1;
}

/* A status name such as "PB_ERR_PARAM". */
static int get_status(const cJSON *item, pb_status *out) {
    if (!cJSON_IsString(item) || item->valuestring == NULL) return 0;
    for (size_t i = 0; i < sizeof status_names / sizeof status_names[0]; ++i) {
        if (strcmp(item->valuestring, status_names[i].name) == 0) {
            *out = status_names[i].value;
            return 1;
        }
    }
    return 0;
}

/* Checks that every key of `obj` is in `allowed` (NULL-terminated, at most
 * 32 names) and appears once. Returns 0 and fails the case otherwise. */
static int check_keys(case_state *c, const cJSON *obj, const char *what,
                      const char *const *allowed) {
    uint32_t seen = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, obj) {
        size_t k = 0;
        while (allowed[k] != NULL &&
               (e->string == NULL || strcmp(allowed[k], e->string) != 0))
            ++k;
        if (allowed[k] == NULL) {
            char key[64];
            snprintf(key, sizeof key, "%s", e->string ? e->string : "");
            for (char *p = key; *p; ++p)
                if ((unsigned char)*p < 0x20u || *p == '"') *p = '?';
            fail(c, "malformed: unknown key \"%s\" in %s", key, what);
            return 0;
        }
        if (seen & (UINT32_C(1) << k)) {
            fail(c, "malformed: key \"%s\" repeated in %s", allowed[k], what);
            return 0;
        }
        seen |= UINT32_C(1) << k;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* The allocation cases ("kv-cache/pyramid-budget").                        */

static const char *const budget_case_keys[] = {
    "name", "why", "budget", "numLayers", "pyramidRatio", "layer", "expect",
    "expectTotal", NULL};

static int run_budget_case(case_state *c, const cJSON *cs) {
    if (!check_keys(c, cs, "the case", budget_case_keys)) return -1;
    uint32_t b, l, r, layer = 0;
    if (!get_u32(cJSON_GetObjectItemCaseSensitive(cs, "budget"), &b))
        return fail(c, "malformed: \"budget\" must be an integer 0..4294967295");
    if (!get_u32(cJSON_GetObjectItemCaseSensitive(cs, "numLayers"), &l))
        return fail(c, "malformed: \"numLayers\" must be an integer 0..4294967295");
    if (!get_u32(cJSON_GetObjectItemCaseSensitive(cs, "pyramidRatio"), &r))
        return fail(c, "malformed: \"pyramidRatio\" must be an integer 0..4294967295");
    const cJSON *jlayer = cJSON_GetObjectItemCaseSensitive(cs, "layer");
    const cJSON *jexpect = cJSON_GetObjectItemCaseSensitive(cs, "expect");
    const cJSON *jtotal = cJSON_GetObjectItemCaseSensitive(cs, "expectTotal");
    uint64_t expect_total = 0;
    if (jtotal != NULL && !get_u64(jtotal, &expect_total))
        return fail(c, "malformed: \"expectTotal\" must be an integer (a decimal "
                       "string above 2^53)");

    if (jlayer != NULL) {
        uint32_t want;
        if (!get_u32(jlayer, &layer))
            return fail(c, "malformed: \"layer\" must be an integer 0..4294967295");
        if (!get_u32(jexpect, &want))
            return fail(c, "malformed: with \"layer\", \"expect\" must be one "
                           "integer 0..4294967295");
        c->run->totals->budget_layers += 1u;
        const uint32_t got = pb_kvcache_pyramid_budget(b, layer, l, r);
        if (got != want)
            return fail(c, "pb_kvcache_pyramid_budget(%lu, layer %lu, %lu layers, "
                           "ratio %lu): expected %lu, got %lu",
                        (unsigned long)b, (unsigned long)layer, (unsigned long)l,
                        (unsigned long)r, (unsigned long)want, (unsigned long)got);
    } else {
        uint32_t *want = NULL, *got = NULL;
        size_t n = 0;
        if (!get_u32_list(jexpect, &want, &n))
            return fail(c, "malformed: \"expect\" must be a list of integers "
                           "0..4294967295 (or give \"layer\")");
        if (n != l) {
            free(want);
            return fail(c, "malformed: \"expect\" lists %zu shares for %lu layers",
                        n, (unsigned long)l);
        }
        got = malloc((n + 1u) * sizeof *got);
        if (got == NULL) {
            free(want);
            return fail(c, "out of memory");
        }
        int bad = 0;
        uint64_t sum = 0;
        for (size_t k = 0; k < n; ++k) {
            got[k] = pb_kvcache_pyramid_budget(b, (uint32_t)k, l, r);
            bad |= got[k] != want[k];
            sum += want[k];
        }
        c->run->totals->budget_layers += n;
        if (bad) {
            fail(c, "pb_kvcache_pyramid_budget(%lu, k, %lu layers, ratio %lu) "
                    "for every layer k: expected ",
                 (unsigned long)b, (unsigned long)l, (unsigned long)r);
            msg_add_u32_list(&c->msg, want, n);
            msg_add(&c->msg, ", got ");
            msg_add_u32_list(&c->msg, got, n);
        }
        /* The all-layers call must agree with the per-layer one, and refuse
         * exactly where no share is defined. */
        if (!c->failed) {
            const pb_status want_st = (l == 0u || r == 0u) ? PB_ERR_PARAM : PB_OK;
            const pb_status st = pb_kvcache_pyramid_budgets(b, l, r, got, n);
            if (st != want_st) {
                fail(c, "pb_kvcache_pyramid_budgets: expected %s, got %s",
                     name_of_status(want_st), name_of_status(st));
            } else if (st == PB_OK && memcmp(got, want, n * sizeof *got) != 0) {
                fail(c, "pb_kvcache_pyramid_budgets: expected ");
                msg_add_u32_list(&c->msg, want, n);
                msg_add(&c->msg, ", got ");
                msg_add_u32_list(&c->msg, got, n);
            }
        }
        /* The total is by definition the sum of the shares. */
        if (!c->failed) {
            const uint64_t total = pb_kvcache_pyramid_total(b, l, r);
            if (total != sum)
                fail(c, "pb_kvcache_pyramid_total: expected %llu (the sum of "
                        "\"expect\"), got %llu",
                     (unsigned long long)sum, (unsigned long long)total);
            else if (jtotal != NULL && expect_total != sum)
                fail(c, "\"expectTotal\" %llu is not the sum of \"expect\", %llu",
                     (unsigned long long)expect_total, (unsigned long long)sum);
        }
        free(want);
        free(got);
        if (c->failed) return -1;
    }
    if (jtotal != NULL) {
        const uint64_t total = pb_kvcache_pyramid_total(b, l, r);
        if (total != expect_total)
            return fail(c, "pb_kvcache_pyramid_total(%lu, %lu layers, ratio %lu): "
                           "expected %llu, got %llu",
                        (unsigned long)b, (unsigned long)l, (unsigned long)r,
                        (unsigned long long)expect_total,
                        (unsigned long long)total);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The policy cases ("kv-cache/pyramidkv", "kv-cache/snapkv").              */

static const char *const policy_case_keys[] = {
    "name", "why", "seed", "params", "options", "surface", "expectCreateError",
    "steps", NULL};
static const char *const pyramidkv_param_keys[] = {
    "budget", "layer", "numLayers", "pyramidRatio", "recentWindow",
    "obsWindow", "poolKernel", NULL};
static const char *const snapkv_param_keys[] = {
    "budget", "recentWindow", "obsWindow", "poolKernel", NULL};
static const char *const option_keys[] = {
    "capacity", "pool", "prefillScope", "prefillMaxLen", NULL};
static const char *const step_keys[] = {
    "call", "args", "expect", "expectStatus", "tolerance", "why", NULL};

typedef struct policy_case {
    pb_kvcache *kv;
    const pb_kvcache_vtable *vt; /* NULL on the native surface */
    size_t step;                 /* index of the step being run */
    const char *call;            /* its call name */
    uint32_t prefill_max_len;    /* options.prefillMaxLen: nonzero means a
                                    prefill step uses the create-time
                                    reservation instead of a workspace */
} policy_case;

/* Reads params in the policy's key set onto the defaults. SnapKV params map
 * onto one layer (layer 0 of 1, ratio at its default), which is what SnapKV
 * is. */
static int parse_params(case_state *c, policy_kind kind, const cJSON *jp,
                        pb_kvcache_pyramidkv_params *p) {
    const pb_kvcache_pyramidkv_params d = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    *p = d;
    if (jp == NULL) return 1;
    if (!cJSON_IsObject(jp)) {
        fail(c, "malformed: \"params\" must be an object");
        return 0;
    }
    const char *const *keys =
        kind == POLICY_SNAPKV ? snapkv_param_keys : pyramidkv_param_keys;
    if (!check_keys(c, jp, "\"params\"", keys)) return 0;
    uint32_t *const fields[] = {&p->budget, &p->layer, &p->num_layers,
                                &p->pyramid_ratio, &p->recent_window,
                                &p->obs_window, &p->pool_kernel};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(jp, pyramidkv_param_keys[i]);
        if (v != NULL && !get_u32(v, fields[i])) {
            fail(c, "malformed: params.%s must be an integer 0..4294967295",
                 pyramidkv_param_keys[i]);
            return 0;
        }
    }
    return 1;
}

/* A named enum option ("max"/"avg", "consistent"/"reference") or its raw
 * number, so a vector can also pin the refusal of an unknown value. */
static int get_named(const cJSON *v, const char *n0, const char *n1,
                     uint32_t *out) {
    if (cJSON_IsString(v) && v->valuestring != NULL) {
        if (strcmp(v->valuestring, n0) == 0) *out = 0u;
        else if (strcmp(v->valuestring, n1) == 0) *out = 1u;
        else return 0;
        return 1;
    }
    return get_u32(v, out);
}

static int parse_options(case_state *c, const cJSON *jo, pb_kvcache_options *o) {
    const pb_kvcache_options d = PB_KVCACHE_OPTIONS_DEFAULT;
    *o = d;
    if (jo == NULL) return 1;
    if (!cJSON_IsObject(jo)) {
        fail(c, "malformed: \"options\" must be an object");
        return 0;
    }
    if (!check_keys(c, jo, "\"options\"", option_keys)) return 0;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(jo, "capacity")) != NULL &&
        !get_u32(v, &o->capacity)) {
        fail(c, "malformed: options.capacity must be an integer 0..4294967295");
        return 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(jo, "pool")) != NULL &&
        !get_named(v, "max", "avg", &o->pool)) {
        fail(c, "malformed: options.pool must be \"max\", \"avg\" or an integer");
        return 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(jo, "prefillScope")) != NULL &&
        !get_named(v, "consistent", "reference", &o->prefill_scope)) {
        fail(c, "malformed: options.prefillScope must be \"consistent\", "
                "\"reference\" or an integer");
        return 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(jo, "prefillMaxLen")) != NULL &&
        !get_u32(v, &o->prefill_max_len)) {
        fail(c, "malformed: options.prefillMaxLen must be an integer 0..4294967295");
        return 0;
    }
    return 1;
}

/* Fails the step, naming it ("step 3 (evict): ..."). */
static int step_fail(case_state *c, const policy_case *pc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int step_fail(case_state *c, const policy_case *pc, const char *fmt, ...) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "step %zu (%s): ", pc->step, pc->call);
    va_list ap;
    va_start(ap, fmt);
    vfail(c, prefix, fmt, ap);
    va_end(ap);
    return -1;
}

/* The step's "args" as a list of want_min .. want_max items (an absent or
 * null "args" counts as []). */
static const cJSON *step_args(case_state *c, const policy_case *pc,
                              const cJSON *step, int want_min, int want_max) {
    static const cJSON empty = {0};
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(step, "args");
    if (a == NULL || cJSON_IsNull(a)) {
        if (want_min == 0) return &empty;
        step_fail(c, pc, "malformed: \"args\" is missing");
        return NULL;
    }
    const int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (n < want_min || n > want_max) {
        if (want_max > want_min)
            step_fail(c, pc, "malformed: \"args\" must be a list of %d or %d items",
                      want_min, want_max);
        else
            step_fail(c, pc, "malformed: \"args\" must be a list of %d items",
                      want_min);
        return NULL;
    }
    return a;
}

/* The optional "expectStatus" (default PB_OK); *given tells whether it was
 * there. */
static int step_status(case_state *c, const policy_case *pc, const cJSON *step,
                       pb_status *st, int *given) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(step, "expectStatus");
    *st = PB_OK;
    *given = j != NULL;
    if (j != NULL && !get_status(j, st)) {
        step_fail(c, pc, "malformed: \"expectStatus\" must be a status name such "
                         "as \"PB_ERR_PARAM\"");
        return 0;
    }
    return 1;
}

/* Refuses fields a call does not take. */
static int step_refuse(case_state *c, const policy_case *pc, const cJSON *step,
                       const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(step, key);
    if (j == NULL || (strcmp(key, "expect") == 0 && cJSON_IsNull(j))) return 1;
    step_fail(c, pc, "malformed: this call takes no \"%s\"", key);
    return 0;
}

static int check_status(case_state *c, const policy_case *pc, pb_status want,
                        pb_status got) {
    if (want == got) return 1;
    step_fail(c, pc, "expected status %s, got %s (%s)", name_of_status(want),
              name_of_status(got), pb_status_str(got));
    return 0;
}

/* One attention weight: a number, or "NaN", "Infinity", "-Infinity" (JSON
 * has no literal for them; they exist to pin the rejection of bad
 * weights). */
static int get_weight(const cJSON *e, float *out) {
    if (cJSON_IsNumber(e)) {
        /* Conversion follows IEEE 754 (Annex F): rounds to nearest, and a
         * value beyond the float range becomes an infinity. */
        *out = (float)e->valuedouble;
        return 1;
    }
    if (!cJSON_IsString(e) || e->valuestring == NULL) return 0;
    if (strcmp(e->valuestring, "NaN") == 0) *out = NAN;
    else if (strcmp(e->valuestring, "Infinity") == 0) *out = INFINITY;
    else if (strcmp(e->valuestring, "-Infinity") == 0) *out = -INFINITY;
    else return 0;
    return 1;
}

static int step_decode(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!step_refuse(c, pc, step, "expect") || !step_refuse(c, pc, step, "tolerance") ||
        !step_status(c, pc, step, &want, &given))
        return -1;
    const cJSON *a = step_args(c, pc, step, 2, 2);
    if (a == NULL) return -1;
    uint32_t pos;
    if (!get_u32(a->child, &pos))
        return step_fail(c, pc, "malformed: the position must be an integer "
                                "0..4294967295");
    const cJSON *jw = a->child->next;
    float *w = NULL;
    size_t n = 0;
    if (!cJSON_IsNull(jw)) {
        if (!cJSON_IsArray(jw))
            return step_fail(c, pc, "malformed: the weights must be a list or "
                                    "null");
        const int size = cJSON_GetArraySize(jw);
        w = malloc(((size_t)(size > 0 ? size : 0) + 1u) * sizeof *w);
        if (w == NULL) return step_fail(c, pc, "out of memory");
        const cJSON *e;
        cJSON_ArrayForEach(e, jw) {
            if (n >= (size_t)size || !get_weight(e, &w[n])) {
                free(w);
                return step_fail(c, pc, "malformed: weight %zu must be a number, "
                                        "\"NaN\", \"Infinity\" or \"-Infinity\"",
                                 n);
            }
            ++n;
        }
    }
    c->run->totals->steps_decode += 1u;
    int ok = 1;
    if (pc->vt != NULL && !given) {
        pc->vt->on_decode_step(pc->kv, pos, w, n);
    } else {
        ok = check_status(c, pc, want, pb_kvcache_observe(pc->kv, pos, w, n));
    }
    free(w);
    return ok ? 0 : -1;
}

static int step_evict(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!step_refuse(c, pc, step, "tolerance") ||
        !step_status(c, pc, step, &want, &given))
        return -1;
    const cJSON *a = step_args(c, pc, step, 1, 2);
    if (a == NULL) return -1;
    uint32_t budget, cap = UINT32_MAX;
    if (!get_u32(a->child, &budget))
        return step_fail(c, pc, "malformed: the budget must be an integer "
                                "0..4294967295");
    if (a->child->next != NULL && !get_u32(a->child->next, &cap))
        return step_fail(c, pc, "malformed: the victims capacity must be an "
                                "integer 0..4294967295");
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(step, "expect");
    uint32_t *expect = NULL;
    size_t n_expect = 0;
    if (want == PB_OK) {
        if (!get_u32_list(je, &expect, &n_expect))
            return step_fail(c, pc, "malformed: \"expect\" must be the list of "
                                    "victims");
    } else if (je != NULL) {
        return step_fail(c, pc, "malformed: a failing evict takes no "
                                "\"expect\"");
    }

    /* No evict drops more than what is held, so a capacity above the held
     * count behaves as the held count. */
    const size_t held = pb_kvcache_kept_count(pc->kv);
    const size_t room = cap < held ? cap : held;
    uint32_t *victims = malloc((room + 1u) * sizeof *victims);
    if (victims == NULL) {
        free(expect);
        return step_fail(c, pc, "out of memory");
    }
    c->run->totals->steps_evict += 1u;
    size_t n = 0;
    int ok = 1;
    if (pc->vt != NULL && !given) {
        n = pc->vt->evict(pc->kv, budget, victims, room);
    } else {
        ok = check_status(c, pc, want,
                          pb_kvcache_evict(pc->kv, budget, victims, room, &n));
    }
    if (ok && want == PB_OK) {
        if (n > room) {
            step_fail(c, pc, "evict(%lu) reported %zu victims, more than the "
                             "capacity %zu",
                      (unsigned long)budget, n, room);
            ok = 0;
        } else if (n != n_expect ||
                   (n && memcmp(victims, expect, n * sizeof *victims) != 0)) {
            step_fail(c, pc, "evict(%lu): expected ", (unsigned long)budget);
            msg_add_u32_list(&c->msg, expect, n_expect);
            msg_add(&c->msg, ", got ");
            msg_add_u32_list(&c->msg, victims, n);
            ok = 0;
        }
    }
    free(victims);
    free(expect);
    return ok ? 0 : -1;
}

/* effectiveBudget, keptCount and capacity: an integer read back. */
static int step_count(case_state *c, policy_case *pc, const cJSON *step,
                      uint64_t got, size_t *counter) {
    if (!step_refuse(c, pc, step, "expectStatus") ||
        !step_refuse(c, pc, step, "tolerance") ||
        step_args(c, pc, step, 0, 0) == NULL)
        return -1;
    uint64_t want;
    if (!get_u64(cJSON_GetObjectItemCaseSensitive(step, "expect"), &want))
        return step_fail(c, pc, "malformed: \"expect\" must be an integer");
    *counter += 1u;
    if (got != want)
        return step_fail(c, pc, "expected %llu, got %llu",
                         (unsigned long long)want, (unsigned long long)got);
    return 0;
}

static int step_kept_positions(case_state *c, policy_case *pc, const cJSON *step) {
    if (!step_refuse(c, pc, step, "expectStatus") ||
        !step_refuse(c, pc, step, "tolerance") ||
        step_args(c, pc, step, 0, 0) == NULL)
        return -1;
    uint32_t *expect = NULL;
    size_t n_expect = 0;
    if (!get_u32_list(cJSON_GetObjectItemCaseSensitive(step, "expect"), &expect,
                      &n_expect))
        return step_fail(c, pc, "malformed: \"expect\" must be a list of "
                                "positions");
    const size_t held = pb_kvcache_kept_count(pc->kv);
    uint32_t *got = malloc((held + 1u) * sizeof *got);
    if (got == NULL) {
        free(expect);
        return step_fail(c, pc, "out of memory");
    }
    c->run->totals->steps_kept_positions += 1u;
    size_t n = 0;
    int ok = 1;
    const pb_status st = pb_kvcache_kept_positions(pc->kv, got, held, &n);
    if (st != PB_OK) {
        step_fail(c, pc, "pb_kvcache_kept_positions returned %s",
                  name_of_status(st));
        ok = 0;
    } else if (n > held) {
        step_fail(c, pc, "pb_kvcache_kept_positions reported %zu positions, "
                         "more than the %zu held",
                  n, held);
        ok = 0;
    } else if (n != n_expect ||
               (n && memcmp(got, expect, n * sizeof *got) != 0)) {
        step_fail(c, pc, "expected ");
        msg_add_u32_list(&c->msg, expect, n_expect);
        msg_add(&c->msg, ", got ");
        msg_add_u32_list(&c->msg, got, n);
        ok = 0;
    }
    free(got);
    free(expect);
    return ok ? 0 : -1;
}

static int step_window_score(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!step_status(c, pc, step, &want, &given)) return -1;
    (void)given;
    const cJSON *a = step_args(c, pc, step, 1, 1);
    if (a == NULL) return -1;
    uint32_t pos;
    if (!get_u32(a->child, &pos))
        return step_fail(c, pc, "malformed: the position must be an integer "
                                "0..4294967295");
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(step, "expect");
    const cJSON *jt = cJSON_GetObjectItemCaseSensitive(step, "tolerance");
    double tolerance = 0.0;
    if (want == PB_OK) {
        if (!cJSON_IsNumber(je) || !isfinite(je->valuedouble))
            return step_fail(c, pc, "malformed: \"expect\" must be a number");
        if (jt != NULL && (!cJSON_IsNumber(jt) || !isfinite(jt->valuedouble) ||
                           jt->valuedouble < 0.0))
            return step_fail(c, pc, "malformed: \"tolerance\" must be a number "
                                    ">= 0");
        if (jt != NULL) tolerance = jt->valuedouble;
    } else if (je != NULL || jt != NULL) {
        return step_fail(c, pc, "malformed: a failing windowScoreOf takes no "
                                "\"expect\" or \"tolerance\"");
    }
    c->run->totals->steps_window += 1u;
    double score = 0.0;
    if (!check_status(c, pc, want, pb_kvcache_window_score(pc->kv, pos, &score)))
        return -1;
    if (want != PB_OK) return 0;
    const double expect = je->valuedouble;
    const int equal = jt == NULL ? score == expect
                                 : fabs(score - expect) <= tolerance;
    if (!equal) {
        char e[32], g[32], t[32];
        if (jt == NULL)
            return step_fail(c, pc, "windowScoreOf(%lu): expected %s, got %s "
                                    "(compared exactly)",
                             (unsigned long)pos, shortest(expect, e, sizeof e),
                             shortest(score, g, sizeof g));
        return step_fail(c, pc, "windowScoreOf(%lu): expected %s within %s, got %s",
                         (unsigned long)pos, shortest(expect, e, sizeof e),
                         shortest(tolerance, t, sizeof t),
                         shortest(score, g, sizeof g));
    }
    return 0;
}

/* acc += n; 0 (and acc saturated) when the sum does not fit in size_t. */
static int add_bytes(size_t *acc, size_t n) {
    if (n > SIZE_MAX - *acc) {
        *acc = SIZE_MAX;
        return 0;
    }
    *acc += n;
    return 1;
}

/* Whether `row` is a list of exactly `len` weights. Counts only up to
 * len + 1 items, so a hostile row costs no more than a well-formed one;
 * *bad_weight is the index of the first item that is not a weight, or
 * SIZE_MAX. */
static int row_is_weights(const cJSON *row, size_t len, size_t *count,
                          size_t *bad_weight) {
    *count = 0;
    *bad_weight = SIZE_MAX;
    if (!cJSON_IsArray(row)) return 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, row) {
        float w;
        if (*count == len) {
            *count += 1u;
            return 0;
        }
        if (!get_weight(e, &w)) {
            *bad_weight = *count;
            return 0;
        }
        *count += 1u;
    }
    return *count == len;
}

/* Whether kept[0 .. n_kept-1] (ascending, below len) and
 * victims[0 .. len-n_kept-1] are together exactly 0 .. len-1. */
static int partition_of_prompt(const uint32_t *kept, size_t n_kept,
                               const uint32_t *victims, size_t len) {
    const size_t n_victims = len - n_kept;
    size_t i = 0, j = 0;
    for (size_t p = 0; p < len; ++p) {
        if (i < n_kept && kept[i] == p) ++i;
        else if (j < n_victims && victims[j] == p) ++j;
        else return 0;
    }
    return i == n_kept && j == n_victims;
}

/* prefill [ask, len, [[row 0], [row 1], ...]]: pb_kvcache_prefill on the
 * case's instance (docs/prefill.md, "Golden vectors"). There is no vtable
 * door for it, so it always calls the native function, as introspection
 * does. The workspace is exactly pb_kvcache_prefill_workspace_size bytes
 * (so a sanitizer build catches any access past the size the query
 * promised), or NULL when the case set options.prefillMaxLen. Besides
 * "expect", a successful call must write survivors and victims that
 * partition the prompt and leave exactly the survivors held. */
static int step_prefill(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!step_refuse(c, pc, step, "tolerance") ||
        !step_status(c, pc, step, &want, &given))
        return -1;
    (void)given;
    const cJSON *a = step_args(c, pc, step, 3, 3);
    if (a == NULL) return -1;
    uint32_t ask, len32;
    if (!get_u32(a->child, &ask))
        return step_fail(c, pc, "malformed: the ask (args[0]) must be an integer "
                                "0..4294967295");
    if (!get_u32(a->child->next, &len32))
        return step_fail(c, pc, "malformed: len (args[1]) must be an integer "
                                "0..4294967295");
    const size_t len = len32;
    const cJSON *jrows = a->child->next->next;
    if (!cJSON_IsArray(jrows))
        return step_fail(c, pc, "malformed: the rows (args[2]) must be a list of "
                                "rows, each a list of len weights");
    /* Every row is checked before anything is allocated: a malformed step
     * is reported as such, whatever its size. */
    size_t rows = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, jrows) {
        size_t count, bad;
        if (!row_is_weights(row, len, &count, &bad)) {
            if (!cJSON_IsArray(row))
                return step_fail(c, pc, "malformed: row %zu must be a list of "
                                        "len = %zu weights",
                                 rows, len);
            if (bad != SIZE_MAX)
                return step_fail(c, pc, "malformed: row %zu, weight %zu must be "
                                        "a number, \"NaN\", \"Infinity\" or "
                                        "\"-Infinity\"",
                                 rows, bad);
            return step_fail(c, pc, "malformed: row %zu has %s%zu weights, len "
                                    "is %zu (every row is len weights long)",
                             rows, count > len ? "more than " : "",
                             count > len ? len : count, len);
        }
        ++rows;
    }
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(step, "expect");
    if (cJSON_IsNull(je)) je = NULL;
    if (want != PB_OK && je != NULL)
        return step_fail(c, pc, "malformed: a failing prefill takes no "
                                "\"expect\"");
    uint32_t *expect = NULL;
    size_t n_expect = 0;
    if (je != NULL && !get_u32_list(je, &expect, &n_expect))
        return step_fail(c, pc, "malformed: \"expect\" must be the list of kept "
                                "positions");

    /* What the step needs: the rows x len block, the workspace and the two
     * output arrays (len entries each, so no count can overflow them). It
     * is held to the same limit as an instance. */
    size_t ws_bytes = 0, need = 0;
    int fits = len == 0u || rows <= SIZE_MAX / len;
    const size_t cells = fits ? rows * len : SIZE_MAX;
    fits = fits && cells <= SIZE_MAX / sizeof(float) &&
           add_bytes(&need, cells * sizeof(float));
    if (pc->prefill_max_len == 0u) {
        const pb_status wst = pb_kvcache_prefill_workspace_size(pc->kv, len,
                                                                &ws_bytes);
        if (wst != PB_OK) {
            free(expect);
            return step_fail(c, pc, "pb_kvcache_prefill_workspace_size(len %zu) "
                                    "returned %s",
                             len, name_of_status(wst));
        }
        fits = fits && add_bytes(&need, ws_bytes);
    }
    fits = fits && len < SIZE_MAX / (2u * sizeof(uint32_t)) &&
           add_bytes(&need, 2u * (len + 1u) * sizeof(uint32_t));
    if (!fits || need > c->run->max_bytes) {
        free(expect);
        if (!fits)
            return step_fail(c, pc, "the step (%zu rows x len %zu) would need "
                                    "more memory than size_t can count, above "
                                    "the runner's limit of %zu bytes",
                             rows, len, c->run->max_bytes);
        return step_fail(c, pc, "the step (%zu rows x len %zu) would need %zu "
                                "bytes for the rows, the workspace and the "
                                "outputs, above the runner's limit of %zu",
                         rows, len, need, c->run->max_bytes);
    }

    /* A non-NULL block even for rows == 0, so the call sees the row count
     * and not a missing pointer. The workspace is allocated at exactly the
     * queried size. */
    float *attn = malloc(cells ? cells * sizeof *attn : 1u);
    void *ws = pc->prefill_max_len ? NULL : malloc(ws_bytes ? ws_bytes : 1u);
    uint32_t *kept = malloc((len + 1u) * sizeof *kept);
    uint32_t *victims = malloc((len + 1u) * sizeof *victims);
    int ok = attn != NULL && (ws != NULL || pc->prefill_max_len) &&
             kept != NULL && victims != NULL;
    if (!ok) step_fail(c, pc, "out of memory");
    if (ok) {
        size_t at = 0;
        cJSON_ArrayForEach(row, jrows) {
            const cJSON *e;
            cJSON_ArrayForEach(e, row) {
                float w = 0.0f;
                (void)get_weight(e, &w); /* checked above */
                attn[at++] = w;
            }
        }
        c->run->totals->steps_prefill += 1u;
        size_t n_kept = SIZE_MAX;
        const pb_status st =
            pb_kvcache_prefill(pc->kv, attn, rows, len, ask, ws, ws_bytes, kept,
                               len, victims, len, &n_kept);
        ok = check_status(c, pc, want, st);
        if (ok && st == PB_OK) {
            if (n_kept == SIZE_MAX) {
                step_fail(c, pc, "prefill returned PB_OK without setting the "
                                 "survivor count");
                ok = 0;
            } else if (n_kept > len) {
                step_fail(c, pc, "prefill reported %zu survivors of a %zu-position "
                                 "prompt",
                          n_kept, len);
                ok = 0;
            } else if (expect != NULL &&
                       (n_kept != n_expect ||
                        (n_kept && memcmp(kept, expect, n_kept * sizeof *kept)))) {
                step_fail(c, pc, "prefill(ask %lu, len %zu, %zu rows): expected "
                                 "kept ",
                          (unsigned long)ask, len, rows);
                msg_add_u32_list(&c->msg, expect, n_expect);
                msg_add(&c->msg, ", got ");
                msg_add_u32_list(&c->msg, kept, n_kept);
                ok = 0;
            } else {
                int ascending = 1;
                for (size_t i = 0; i < n_kept && ascending; ++i)
                    ascending = kept[i] < len && (i == 0u || kept[i - 1u] < kept[i]);
                if (!ascending || !partition_of_prompt(kept, n_kept, victims, len)) {
                    step_fail(c, pc, "the kept positions ");
                    msg_add_u32_list(&c->msg, kept, n_kept);
                    msg_add(&c->msg, " and the victims ");
                    msg_add_u32_list(&c->msg, victims, len - n_kept);
                    msg_add(&c->msg, " written are not two ascending lists "
                                     "that together make 0 .. %zu",
                            len ? len - 1u : 0u);
                    ok = 0;
                }
            }
            /* The survivors written are the survivors held. The victims
             * array is free again and has room for len positions. */
            size_t n_held = 0;
            const pb_status kst =
                ok ? pb_kvcache_kept_positions(pc->kv, victims, len, &n_held)
                   : PB_OK;
            if (ok && (kst != PB_OK || n_held != n_kept ||
                       (n_kept && memcmp(victims, kept, n_kept * sizeof *kept)))) {
                step_fail(c, pc, "after prefill wrote kept ");
                msg_add_u32_list(&c->msg, kept, n_kept);
                if (kst != PB_OK)
                    msg_add(&c->msg, ", pb_kvcache_kept_positions returned %s",
                            name_of_status(kst));
                else {
                    msg_add(&c->msg, ", the instance holds ");
                    msg_add_u32_list(&c->msg, victims, n_held);
                }
                ok = 0;
            }
        }
    }
    free(attn);
    free(ws);
    free(kept);
    free(victims);
    free(expect);
    return ok ? 0 : -1;
}

static int step_reset(case_state *c, policy_case *pc, const cJSON *step) {
    pb_status want;
    int given;
    if (!step_refuse(c, pc, step, "expect") || !step_refuse(c, pc, step, "tolerance") ||
        !step_status(c, pc, step, &want, &given) ||
        step_args(c, pc, step, 0, 0) == NULL)
        return -1;
    (void)given;
    c->run->totals->steps_reset += 1u;
    return check_status(c, pc, want, pb_kvcache_reset(pc->kv)) ? 0 : -1;
}

static int run_step(case_state *c, policy_case *pc, const cJSON *step) {
    if (!cJSON_IsObject(step))
        return fail(c, "step %zu: malformed: a step must be an object", pc->step);
    const cJSON *call = cJSON_GetObjectItemCaseSensitive(step, "call");
    if (!cJSON_IsString(call) || call->valuestring == NULL)
        return fail(c, "step %zu: malformed: \"call\" must be a string", pc->step);
    static const char *const calls[] = {
        "onDecodeStep", "evict", "effectiveBudget", "windowScoreOf", "keptCount",
        "keptPositions", "capacity", "reset", "prefill", NULL};
    size_t k = 0;
    while (calls[k] != NULL && strcmp(calls[k], call->valuestring) != 0) ++k;
    if (calls[k] == NULL)
        return fail(c, "step %zu: malformed: unknown call (the calls are "
                       "onDecodeStep, evict, effectiveBudget, windowScoreOf, "
                       "keptCount, keptPositions, capacity, reset, prefill)",
                    pc->step);
    pc->call = calls[k];
    char what[64];
    snprintf(what, sizeof what, "step %zu (%s)", pc->step, pc->call);
    if (!check_keys(c, step, what, step_keys)) return -1;
    pb_vector_totals *t = c->run->totals;
    switch (k) {
    case 0: return step_decode(c, pc, step);
    case 1: return step_evict(c, pc, step);
    case 2:
        return step_count(c, pc, step, pb_kvcache_effective_budget(pc->kv),
                          &t->steps_effective);
    case 3: return step_window_score(c, pc, step);
    case 4:
        return step_count(c, pc, step, pb_kvcache_kept_count(pc->kv),
                          &t->steps_kept_count);
    case 5: return step_kept_positions(c, pc, step);
    case 6:
        return step_count(c, pc, step, pb_kvcache_capacity(pc->kv),
                          &t->steps_capacity);
    case 7: return step_reset(c, pc, step);
    default: return step_prefill(c, pc, step);
    }
}

static int run_policy_case(case_state *c, policy_kind kind, const cJSON *cs) {
    if (!check_keys(c, cs, "the case", policy_case_keys)) return -1;
    pb_kvcache_pyramidkv_params p;
    pb_kvcache_options o;
    const cJSON *jopt = cJSON_GetObjectItemCaseSensitive(cs, "options");
    if (!parse_params(c, kind, cJSON_GetObjectItemCaseSensitive(cs, "params"), &p) ||
        !parse_options(c, jopt, &o))
        return -1;
    const cJSON *jseed = cJSON_GetObjectItemCaseSensitive(cs, "seed");
    uint64_t seed;
    if (jseed != NULL && !get_u64(jseed, &seed))
        return fail(c, "malformed: \"seed\" must be an integer (it is not read: "
                       "the policy is deterministic)");

    /* Which surface: the compatible vtable unless the case needs the
     * native create (options, an exact create status) or asks for it. */
    const cJSON *jerr = cJSON_GetObjectItemCaseSensitive(cs, "expectCreateError");
    int expect_refusal = 0, exact_status = 0;
    pb_status want_create = PB_OK;
    if (jerr != NULL) {
        if (cJSON_IsBool(jerr)) {
            expect_refusal = cJSON_IsTrue(jerr);
        } else if (get_status(jerr, &want_create)) {
            exact_status = 1;
            expect_refusal = want_create != PB_OK;
        } else {
            return fail(c, "malformed: \"expectCreateError\" must be true, false "
                           "or a status name");
        }
    }
    int native = jopt != NULL || exact_status;
    const cJSON *jsurf = cJSON_GetObjectItemCaseSensitive(cs, "surface");
    if (jsurf != NULL) {
        if (!cJSON_IsString(jsurf) || jsurf->valuestring == NULL ||
            (strcmp(jsurf->valuestring, "native") != 0 &&
             strcmp(jsurf->valuestring, "compatible") != 0))
            return fail(c, "malformed: \"surface\" must be \"native\" or "
                           "\"compatible\"");
        if (strcmp(jsurf->valuestring, "native") == 0) native = 1;
        else if (native)
            return fail(c, "malformed: \"options\" and a status in "
                           "\"expectCreateError\" need the native surface");
    }
    const cJSON *jsteps = cJSON_GetObjectItemCaseSensitive(cs, "steps");
    if (jsteps != NULL && !cJSON_IsArray(jsteps))
        return fail(c, "malformed: \"steps\" must be a list");
    if (expect_refusal && jsteps != NULL && jsteps->child != NULL)
        return fail(c, "malformed: a case whose create is refused has no steps");

    /* Keep hostile or mistaken params from allocating without bound. */
    size_t bytes = 0;
    if (pb_kvcache_pyramidkv_size(&p, &o, &bytes) == PB_OK &&
        bytes > c->run->max_bytes)
        return fail(c, "the instance would need %zu bytes, above the runner's "
                       "limit of %zu",
                    bytes, c->run->max_bytes);

    policy_case pc = {NULL, NULL, 0, "", o.prefill_max_len};
    pb_status st = PB_OK;
    if (native) {
        st = pb_kvcache_pyramidkv_create(&p, &o, NULL, &pc.kv);
        if (st == PB_OK && pc.kv == NULL)
            return fail(c, "create returned PB_OK and no instance");
    } else {
        pc.vt = kind == POLICY_SNAPKV ? &pb_kvcache_snapkv : &pb_kvcache_pyramidkv;
        if (kind == POLICY_SNAPKV) {
            const pb_kvcache_snapkv_params sp = {p.budget, p.recent_window,
                                                 p.obs_window, p.pool_kernel};
            pc.kv = pc.vt->create(&sp, NULL, NULL);
        } else {
            pc.kv = pc.vt->create(&p, NULL, NULL);
        }
    }
    if (expect_refusal) {
        if (pc.kv != NULL) {
            if (pc.vt) pc.vt->destroy(pc.kv);
            else pb_kvcache_destroy(pc.kv);
            return fail(c, "expected create to be refused%s%s, it succeeded",
                        exact_status ? " with " : "",
                        exact_status ? name_of_status(want_create) : "");
        }
        if (exact_status && st != want_create)
            return fail(c, "create: expected %s, got %s", name_of_status(want_create),
                        name_of_status(st));
        return 0;
    }
    if (pc.kv == NULL) {
        if (native)
            return fail(c, "create refused the params: %s (%s)", name_of_status(st),
                        pb_status_str(st));
        return fail(c, "create returned NULL (params refused or out of memory)");
    }

    int rc = 0;
    if (jsteps != NULL) {
        const cJSON *step;
        cJSON_ArrayForEach(step, jsteps) {
            if (run_step(c, &pc, step) != 0) {
                rc = -1;
                break;
            }
            ++pc.step;
        }
    }
    if (pc.vt) pc.vt->destroy(pc.kv);
    else pb_kvcache_destroy(pc.kv);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Documents.                                                               */

static void report_doc_error(const run_state *rs, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void report_doc_error(const run_state *rs, const char *fmt, ...) {
    rs->totals->unreadable += 1u;
    if (rs->report == NULL) return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(rs->report, "%s: error: %s\n", rs->label, text);
}

static int run_parsed(run_state *rs, const cJSON *doc) {
    static const char *const top_keys[] = {"policy", "version", "cases",
                                           "description", NULL};
    if (!cJSON_IsObject(doc)) {
        report_doc_error(rs, "the document is not a JSON object");
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, doc) {
        size_t k = 0;
        while (top_keys[k] && (e->string == NULL || strcmp(top_keys[k], e->string)))
            ++k;
        if (top_keys[k] == NULL) {
            report_doc_error(rs, "unknown top-level key (the keys are policy, "
                                 "version, cases, description)");
            return -1;
        }
    }
    const cJSON *jpol = cJSON_GetObjectItemCaseSensitive(doc, "policy");
    policy_kind kind;
    if (!cJSON_IsString(jpol) || jpol->valuestring == NULL) {
        report_doc_error(rs, "\"policy\" must be a string");
        return -1;
    } else if (strcmp(jpol->valuestring, "kv-cache/pyramidkv") == 0) {
        kind = POLICY_PYRAMIDKV;
    } else if (strcmp(jpol->valuestring, "kv-cache/snapkv") == 0) {
        kind = POLICY_SNAPKV;
    } else if (strcmp(jpol->valuestring, "kv-cache/pyramid-budget") == 0) {
        kind = POLICY_BUDGET;
    } else {
        report_doc_error(rs, "unknown policy (expected kv-cache/pyramidkv, "
                             "kv-cache/snapkv or kv-cache/pyramid-budget)");
        return -1;
    }
    const cJSON *jver = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (!cJSON_IsNumber(jver) || jver->valuedouble != 1.0) {
        report_doc_error(rs, "\"version\" must be 1");
        return -1;
    }
    const cJSON *jcases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
    if (!cJSON_IsArray(jcases)) {
        report_doc_error(rs, "\"cases\" must be a list");
        return -1;
    }
    rs->totals->documents += 1u;

    size_t index = 0;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, jcases) {
        case_state c;
        memset(&c, 0, sizeof c);
        c.run = rs;
        set_case_name(&c, cJSON_GetObjectItemCaseSensitive(cs, "name"), index);
        if (!cJSON_IsObject(cs))
            fail(&c, "malformed: a case must be an object");
        else if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cs, "name")))
            fail(&c, "malformed: \"name\" must be a string");
        else if (cJSON_GetObjectItemCaseSensitive(cs, "why") != NULL &&
                 !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cs, "why")))
            fail(&c, "malformed: \"why\" must be a string");
        else if (kind == POLICY_BUDGET)
            run_budget_case(&c, cs);
        else
            run_policy_case(&c, kind, cs);

        if (c.failed) {
            rs->totals->failed += 1u;
            if (rs->report)
                fprintf(rs->report, "%s: case \"%s\": FAILED: %s\n", rs->label,
                        c.name, c.msg.text);
        } else {
            rs->totals->passed += 1u;
            if (rs->report && rs->verbose)
                fprintf(rs->report, "%s: case \"%s\": ok\n", rs->label, c.name);
        }
        ++index;
    }
    return 0;
}

int pb_vector_run_document(const char *text, size_t len, const char *label,
                           const pb_vector_options *options,
                           pb_vector_totals *totals) {
    run_state rs;
    rs.report = options ? options->report : NULL;
    rs.verbose = options ? options->verbose : 0;
    rs.max_bytes = options && options->max_instance_bytes
                       ? options->max_instance_bytes
                       : PB_VECTOR_DEFAULT_MAX_BYTES;
    rs.label = label ? label : "<memory>";
    rs.totals = totals;
    if (text == NULL && len > 0u) {
        report_doc_error(&rs, "no document");
        return -1;
    }
    if (len > 0u && memchr(text, '\0', len) != NULL) {
        report_doc_error(&rs, "the document contains a NUL byte");
        return -1;
    }
    char *copy = malloc(len + 1u);
    if (copy == NULL) {
        report_doc_error(&rs, "out of memory reading the document");
        return -1;
    }
    if (len > 0u) memcpy(copy, text, len);
    copy[len] = '\0';
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithOpts(copy, &end, 1);
    if (doc == NULL) {
        const size_t at = end != NULL && end >= copy && end <= copy + len
                              ? (size_t)(end - copy)
                              : len;
        report_doc_error(&rs, "not valid JSON (at byte %zu of %zu)", at, len);
        free(copy);
        return -1;
    }
    const int rc = run_parsed(&rs, doc);
    cJSON_Delete(doc);
    free(copy);
    return rc;
}

int pb_vector_run_file(const char *path, const pb_vector_options *options,
                       pb_vector_totals *totals) {
    const int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    FILE *report = options ? options->report : NULL;
    if (f == NULL) {
        totals->unreadable += 1u;
        if (report) fprintf(report, "%s: error: cannot open the file\n", path);
        return -1;
    }
    size_t cap = 65536u, len = 0;
    char *buf = malloc(cap);
    int bad = buf == NULL;
    while (!bad) {
        if (len == cap) {
            if (cap >= VR_MAX_FILE_BYTES) {
                bad = 2;
                break;
            }
            char *grown = realloc(buf, cap * 2u);
            if (grown == NULL) {
                bad = 1;
                break;
            }
            buf = grown;
            cap *= 2u;
        }
        const size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0u) {
            if (ferror(f)) bad = 1;
            break;
        }
    }
    if (!is_stdin) fclose(f);
    if (bad) {
        free(buf);
        totals->unreadable += 1u;
        if (report)
            fprintf(report, "%s: error: %s\n", path,
                    bad == 2 ? "the file is larger than 64 MiB"
                             : "cannot read the file");
        return -1;
    }
    const int rc = pb_vector_run_document(buf, len, path, options, totals);
    free(buf);
    return rc;
}

void pb_vector_print_summary(FILE *out, const pb_vector_totals *totals) {
    fprintf(out, "%zu passed, %zu failed\n", totals->passed, totals->failed);
}

void pb_vector_print_step_counts(FILE *out, const pb_vector_totals *totals) {
    fprintf(out,
            "steps run: onDecodeStep %zu, evict %zu, effectiveBudget %zu, "
            "windowScoreOf %zu, keptCount %zu, keptPositions %zu, capacity %zu, "
            "reset %zu, prefill %zu; budget layers checked %zu\n",
            totals->steps_decode, totals->steps_evict, totals->steps_effective,
            totals->steps_window, totals->steps_kept_count,
            totals->steps_kept_positions, totals->steps_capacity,
            totals->steps_reset, totals->steps_prefill, totals->budget_layers);
}

int pb_vector_exit_status(const pb_vector_totals *totals) {
    return totals->failed == 0u && totals->unreadable == 0u ? 0 : 1;
}
