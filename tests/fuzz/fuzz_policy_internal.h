/*
 * fuzz_policy_internal.h - what the files of the policy fuzz driver share
 * (fuzz_policy_driver.c: the input, the run and its checks, the observe,
 * evict and reset operations; fuzz_policy_create.c: the creates of every
 * surface; fuzz_policy_queries.c: introspection, NULL instances and the
 * pure functions; fuzz_policy_prefill.c: the prefill operation): the
 * context of a run, the input reader, and the checks that abort with a
 * finding.
 */
#ifndef PB_TESTS_FUZZ_POLICY_INTERNAL_H
#define PB_TESTS_FUZZ_POLICY_INTERNAL_H

#include "fuzz_policy_driver.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counting_allocator.h"
#include "fp_env.h"
#include "prefill_reference.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"

#define FZ_MEM_LIMIT ((size_t)1 << 20)
#define FZ_MAX_STEPS 1024u
#define FZ_MAX_WORK ((uint64_t)1 << 22)
#define FZ_SENTINEL 0xA5A5A5A5u
#define FZ_PREFILL_MAX_LEN 48u
/* tests/prefill/prefill_reference.c pools by visiting every kernel slot,
 * so it cannot follow a reference-scope prefill with a kernel of billions
 * (the library's pooling is O(len) whatever the kernel). */
#define FZ_MODEL_MAX_KERNEL 4097u

/* The input: bytes not read yet. A missing byte reads as 0. */
typedef struct fz_reader {
    const uint8_t *p;
    size_t n;
} fz_reader;

typedef struct fz_ctx {
    fz_reader rd;
    fz_surface surface;
    const pb_kvcache_vtable *vt; /* the compatible or family vtable */
    int tova;        /* vt is pb_kvcache_tova: its own capacity check */
    pb_kvcache *pol;
    pb_kvcache_options options; /* as resolved at create */
    int fresh; /* no observe, evict or prefill since create or reset */
    int full_check; /* compare every window score at the next check */
    int model_lost; /* the model cannot follow: the program ends */
    ref_policy ref;
    counting_allocator ca;
    int counted;            /* pol was allocated through ca */
    size_t calls_at_create; /* ca.alloc_calls right after create */
    size_t mem;             /* memory_bytes, fixed at create */
    size_t capacity;
    uint32_t effective;
    size_t buf_len; /* entries in each buffer below; > any held count + 1 */
    size_t alloc_len; /* their real length: also >= any prefill prompt */
    uint32_t *pos_e, *pos_before, *vic_e, *vic_r;
    unsigned char *observed_before; /* last scorer: the model's flags */
    float *attn;
    uint64_t work;
} fz_ctx;

/* What the program was doing, for the message of a finding. The fuzzers are
 * single-threaded, so file-scope state is fine here. */
extern const char *fz_op;
extern size_t fz_step;

/* Print a finding (file, line, the step and operation, what failed) and
 * abort. */
void fz_fail(const char *file, int line, const char *what);
void fz_fail_eq(const char *file, int line, const char *what,
                unsigned long long a, unsigned long long b);

#define FZ_CHECK(cond)                                   \
    do {                                                 \
        if (!(cond)) fz_fail(__FILE__, __LINE__, #cond); \
    } while (0)

/* An equality whose two sides are worth printing (statuses, counts). */
#define FZ_CHECK_EQ(a, b)                                                   \
    do {                                                                    \
        const unsigned long long a_ = (unsigned long long)(a);              \
        const unsigned long long b_ = (unsigned long long)(b);              \
        if (a_ != b_) fz_fail_eq(__FILE__, __LINE__, #a " == " #b, a_, b_); \
    } while (0)

/* Reading the input (fuzz_policy_driver.c). */
uint8_t fz_rd_u8(fz_reader *r);
uint32_t fz_rd_u32(fz_reader *r);
uint32_t fz_wild_u32(fz_reader *r);
float fz_good_weight(fz_reader *r);
float fz_bad_weight(fz_reader *r);

/* The run (fuzz_policy_driver.c). */
uint32_t fz_last_pos(const fz_ctx *c);
void fz_observe(fz_ctx *c, uint32_t pos, const float *attn, size_t len);
uint32_t fz_pick_budget(fz_ctx *c);
int fz_trace(void);

/* Creates (fuzz_policy_create.c): 1 with c->pol and c->ref made, 0 when
 * the input's create was (correctly) refused. */
int fz_create_native(fz_ctx *c);
int fz_create_compat(fz_ctx *c);
int fz_create_scorers(fz_ctx *c);
int fz_create_family(fz_ctx *c);
/* After a refused create or the destroy: nothing allocated, nothing
 * leaked (when the counting allocator was used). */
void fz_check_nothing_left(const fz_ctx *c, int counted);

/* The other operations (fuzz_policy_queries.c, fuzz_policy_prefill.c). */
void fz_op_query(fz_ctx *c);
void fz_op_prefill(fz_ctx *c);

#endif /* PB_TESTS_FUZZ_POLICY_INTERNAL_H */
