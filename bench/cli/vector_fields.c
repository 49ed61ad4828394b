/*
 * vector_fields.c - the golden vector runner's small shared pieces: status
 * names (from the table that makes the enum), the truncating message
 * buffer, case failures, and typed access to JSON fields. Every field is
 * checked for its type and range before use, and unknown or repeated keys
 * are refused, so a typo never falls back to a default silently.
 *
 * Owns no step and no family; vector_runner_internal.h maps the runner's
 * files.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_runner_internal.h"

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

const char *pb__vr_status_name(pb_status s) {
    for (size_t i = 0; i < sizeof status_names / sizeof status_names[0]; ++i)
        if (status_names[i].value == s) return status_names[i].name;
    return "an unknown status";
}

/* ------------------------------------------------------------------------ */
/* A message buffer that truncates instead of overflowing.                  */

void pb__vr_msg_add(msgbuf *m, const char *fmt, ...) {
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
const char *pb__vr_shortest(double d, char *buf, size_t size) {
    for (int prec = 1; prec <= 17; ++prec) {
        snprintf(buf, size, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    return buf;
}

void pb__vr_msg_add_u32_list(msgbuf *m, const uint32_t *v, size_t n) {
    pb__vr_msg_add(m, "[");
    for (size_t i = 0; i < n && i < VR_MAX_LISTED; ++i)
        pb__vr_msg_add(m, i ? ", %lu" : "%lu", (unsigned long)v[i]);
    if (n > VR_MAX_LISTED) pb__vr_msg_add(m, ", ... (%zu in all)", n);
    pb__vr_msg_add(m, "]");
}

/* Adds "[want...], got [got...]" to m: the tail of an "expected"
 * message. */
void pb__vr_msg_add_expected_got(msgbuf *m, const uint32_t *want,
                                 size_t n_want, const uint32_t *got,
                                 size_t n_got) {
    pb__vr_msg_add_u32_list(m, want, n_want);
    pb__vr_msg_add(m, ", got ");
    pb__vr_msg_add_u32_list(m, got, n_got);
}

/* ------------------------------------------------------------------------ */
/* Failures.                                                                */

/* Records the first failure of the case, after `prefix`; returns -1 so
 * callers can `return pb__vr_fail(...)`. */
int pb__vr_vfail(case_state *c, const char *prefix, const char *fmt,
                 va_list ap) {
    if (c->failed) return -1;
    c->failed = 1;
    pb__vr_msg_add(&c->msg, "%s", prefix);
    const size_t room = sizeof c->msg.text - c->msg.len;
    const int n = vsnprintf(c->msg.text + c->msg.len, room, fmt, ap);
    if (n >= 0)
        c->msg.len = (size_t)n < room ? c->msg.len + (size_t)n
                                      : sizeof c->msg.text - 1u;
    return -1;
}

int pb__vr_fail(case_state *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pb__vr_vfail(c, "", fmt, ap);
    va_end(ap);
    return -1;
}

/* Copies a case name for messages: control characters and quotes become
 * '?', so a hostile name cannot forge report lines. */
void pb__vr_set_case_name(case_state *c, const cJSON *name, size_t index) {
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

int pb__vr_get_u32(const cJSON *item, uint32_t *out) {
    if (!cJSON_IsNumber(item) || !is_uint_double(item->valuedouble, 4294967295.0))
        return 0;
    *out = (uint32_t)item->valuedouble;
    return 1;
}

/* A uint64: a JSON integer up to 2^53 (larger ones are not exact in JSON
 * parsers that use doubles) or a string of decimal digits. */
int pb__vr_get_u64(const cJSON *item, uint64_t *out) {
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
int pb__vr_get_u32_list(const cJSON *item, uint32_t **out, size_t *n) {
    if (!cJSON_IsArray(item)) return 0;
    const int size = cJSON_GetArraySize(item);
    if (size < 0) return 0;
    uint32_t *v = malloc(((size_t)size + 1u) * sizeof *v);
    if (v == NULL) return 0;
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, item) {
        if (i >= (size_t)size || !pb__vr_get_u32(e, &v[i])) {
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
int pb__vr_get_status(const cJSON *item, pb_status *out) {
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
int pb__vr_check_keys(case_state *c, const cJSON *obj, const char *what,
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
            pb__vr_fail(c, "malformed: unknown key \"%s\" in %s", key, what);
            return 0;
        }
        if (seen & (UINT32_C(1) << k)) {
            pb__vr_fail(c, "malformed: key \"%s\" repeated in %s", allowed[k], what);
            return 0;
        }
        seen |= UINT32_C(1) << k;
    }
    return 1;
}


/* An optional object `what` of the case: -1 when absent (NULL: nothing to
 * read), 1 when an object with only keys of `allowed`, 0 with the case
 * failed otherwise. */
int pb__vr_object_keys(case_state *c, const cJSON *obj, const char *what,
                       const char *const *allowed) {
    if (obj == NULL) return -1;
    if (!cJSON_IsObject(obj)) {
        pb__vr_fail(c, "malformed: %s must be an object", what);
        return 0;
    }
    return pb__vr_check_keys(c, obj, what, allowed);
}

/* Reads each of the n keys names[i] present in obj into *fields[i]; 0 with
 * the case failed ("prefix.name must be an integer") at the first that is
 * not an integer 0..4294967295. */
int pb__vr_read_u32s(case_state *c, const cJSON *obj, const char *prefix,
                     const char *const *names, uint32_t *const *fields,
                     size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, names[i]);
        if (v != NULL && !pb__vr_get_u32(v, fields[i])) {
            pb__vr_fail(c, "malformed: %s.%s must be an integer 0..4294967295",
                        prefix, names[i]);
            return 0;
        }
    }
    return 1;
}

/* A named enum option ("max"/"avg", "consistent"/"reference") or its raw
 * number, so a vector can also pin the refusal of an unknown value. */
int pb__vr_get_named(const cJSON *v, const char *n0, const char *n1,
                     uint32_t *out) {
    if (cJSON_IsString(v) && v->valuestring != NULL) {
        if (strcmp(v->valuestring, n0) == 0) *out = 0u;
        else if (strcmp(v->valuestring, n1) == 0) *out = 1u;
        else return 0;
        return 1;
    }
    return pb__vr_get_u32(v, out);
}


/* One attention weight: a number, or "NaN", "Infinity", "-Infinity" (JSON
 * has no literal for them; they exist to pin the rejection of bad
 * weights). */
int pb__vr_get_weight(const cJSON *e, float *out) {
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
