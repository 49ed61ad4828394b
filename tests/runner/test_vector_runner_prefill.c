/*
 * test_vector_runner_prefill.c - the golden vector runner's prefill step
 * (bench/cli/vector_runner.c), on documents held in memory
 * (runner_harness.h): docs/prefill.md's first worked vector passes; a wrong
 * expectation fails and names the case and step; malformed, hostile,
 * truncated and mutated prefill steps are reported, never crash.
 */
#include "runner_harness.h"
#include "test_main.h"

/* ------------------------------------------------------------------------ */
/* The prefill step.                                                        */

/* The rows of docs/prefill.md's first worked vector, in 64ths: row 6 =
 * [10,1,0,1,5,6,41,0], row 7 = [10,0,1,0,4,6,20,23] over positions 0..7.
 * Consistent scope, budget 4, recent 2, max pool 3: window scores
 * [20,1,1,1,9,12,20,0], pooled [20,20,1,9,12,20,20,20]; 6 and 7 are
 * protected, p2, p3, p4 and then p0 (the lower of the 20s) go: kept
 * {1,5,6,7}. */
#define PF_ROWS                                                               \
    "[[0.15625,0.015625,0,0.015625,0.078125,0.09375,0.640625,0],"             \
    "[0.15625,0,0.015625,0,0.0625,0.09375,0.3125,0.359375]]"
#define PF_PARAMS "'params':{'budget':4,'recentWindow':2,'obsWindow':8,'poolKernel':3}"
#define PF_HEAD                                                               \
    "{'policy':'kv-cache/pyramidkv','version':1,'cases':[{'name':'p',"        \
    PF_PARAMS ",'steps':["
#define PF_STEP "{'call':'prefill','args':[4,8," PF_ROWS "],'expect':[1,5,6,7]}"

static void prefill_step_passes(void **state) {
    (void)state;
    outcome o;
    /* On the compatible surface (no options) the step calls the native
     * function on the vtable's instance, with a caller workspace. */
    run_doc(PF_HEAD PF_STEP ",{'call':'keptPositions','expect':[1,5,6,7]},"
            "{'call':'windowScoreOf','args':[5],'expect':0.1875}" DOC_TAIL,
            &o);
    assert_int_equal(o.rc, 0);
    assert_int_equal(o.totals.passed, 1);
    assert_int_equal(o.totals.failed, 0);
    assert_int_equal(o.totals.steps_prefill, 1);
    assert_string_equal(o.text, "");

    /* Native surface, the create-time reservation, the reference scope
     * (kept {0,1,6,7}: the prefix scores [20,1,1,1,9,12] max-pooled within
     * the prefix give [20,20,1,9,12,12]) and an expectation left out. */
    run_doc("{'policy':'kv-cache/pyramidkv','version':1,'cases':["
            "{'name':'reserved'," PF_PARAMS ",'options':{'prefillMaxLen':8},"
            "'steps':[" PF_STEP "]},"
            "{'name':'reference'," PF_PARAMS ",'options':{'prefillScope':"
            "'reference'},'steps':[{'call':'prefill','args':[4,8," PF_ROWS
            "],'expect':[0,1,6,7]}]},"
            "{'name':'no expect'," PF_PARAMS ",'steps':[{'call':'prefill',"
            "'args':[4,8," PF_ROWS "]},{'call':'keptCount','expect':4}]},"
            "{'name':'null expect'," PF_PARAMS ",'steps':[{'call':'prefill',"
            "'args':[4,8," PF_ROWS "],'expect':null}]}]}",
            &o);
    assert_int_equal(o.totals.passed, 4);
    assert_int_equal(o.totals.failed, 0);
    assert_int_equal(o.totals.steps_prefill, 4);

    /* Refusals are statuses the step can expect, and leave {0}. */
    run_doc(PF_HEAD
            "{'call':'prefill','args':[4,8,[]],'expectStatus':'PB_ERR_PARAM'},"
            "{'call':'prefill','args':[4,0,[[]]],'expectStatus':'PB_ERR_PARAM'},"
            "{'call':'prefill','args':[4,1,[[0.5],[0.5]]],"
            "'expectStatus':'PB_ERR_PARAM'},"
            "{'call':'prefill','args':[4,2,[[1,'Infinity']]],"
            "'expectStatus':'PB_ERR_WEIGHT'},"
            "{'call':'keptPositions','expect':[0]}," PF_STEP ","
            "{'call':'prefill','args':[4,8," PF_ROWS "],"
            "'expectStatus':'PB_ERR_NOT_FRESH'}" DOC_TAIL,
            &o);
    assert_int_equal(o.totals.passed, 1);
    assert_int_equal(o.totals.failed, 0);
    assert_int_equal(o.totals.steps_prefill, 6);
    assert_string_equal(o.text, "");
}

static void wrong_prefill(void **state) {
    (void)state;
    outcome o;
    /* A wrong kept list names the case, the step, the call and both
     * lists. */
    run_doc(PF_HEAD "{'call':'keptCount','expect':1},"
            "{'call':'prefill','args':[4,8," PF_ROWS "],'expect':[0,5,6,7]}"
            DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "doc.json: case \"p\": FAILED: step 1 (prefill): "
                         "prefill(ask 4, len 8, 2 rows): expected kept "
                         "[0, 5, 6, 7], got [1, 5, 6, 7]");
    assert_int_equal(pb_vector_exit_status(&o.totals), 1);

    /* Too few or too many expected. */
    run_doc(PF_HEAD "{'call':'prefill','args':[4,8," PF_ROWS "],'expect':[]}"
                DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "step 0 (prefill): prefill(ask 4, len 8, 2 rows): "
                         "expected kept [], got [1, 5, 6, 7]");
    run_doc(PF_HEAD "{'call':'prefill','args':[4,8," PF_ROWS "],"
            "'expect':[1,5,6,7,8]}" DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "expected kept [1, 5, 6, 7, 8], got [1, 5, 6, 7]");

    /* A wrong status, both ways. */
    run_doc(PF_HEAD "{'call':'prefill','args':[4,8," PF_ROWS "],"
            "'expectStatus':'PB_ERR_PARAM'}" DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"p\": FAILED: step 0 (prefill): expected status "
                         "PB_ERR_PARAM, got PB_OK");
    run_doc(PF_HEAD "{'call':'onDecodeStep','args':[1,null]},"
            "{'call':'prefill','args':[4,8," PF_ROWS "],'expect':[1,5,6,7]}"
            DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "step 1 (prefill): expected status PB_OK, got "
                         "PB_ERR_NOT_FRESH");

    /* The reservation is used when prefillMaxLen is set: one position too
     * few is a refusal the step reports. */
    run_doc("{'policy':'kv-cache/pyramidkv','version':1,'cases':[{'name':'r',"
            PF_PARAMS ",'options':{'prefillMaxLen':7},'steps':[" PF_STEP "]}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"r\": FAILED: step 0 (prefill): expected status "
                         "PB_OK, got PB_ERR_WORKSPACE");

    /* A later step checks the state the prefill left. */
    run_doc(PF_HEAD PF_STEP ",{'call':'windowScoreOf','args':[5],'expect':0.25}"
                DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "step 1 (windowScoreOf): windowScoreOf(5): expected "
                         "0.25, got 0.1875");
}

/* Each malformed prefill step fails its case with a message naming the
 * step; none crashes or reaches the library. */
static void malformed_prefill(void **state) {
    (void)state;
    static const char *const steps[] = {
        "{'call':'prefill'}",
        "{'call':'prefill','args':null}",
        "{'call':'prefill','args':5}",
        "{'call':'prefill','args':[4,8]}",
        "{'call':'prefill','args':[4,8,[],1]}",
        "{'call':'prefill','args':[-4,8,[]]}",
        "{'call':'prefill','args':[4.5,8,[]]}",
        "{'call':'prefill','args':['4',8,[]]}",
        "{'call':'prefill','args':[4,-8,[]]}",
        "{'call':'prefill','args':[4,4294967296,[]]}",
        "{'call':'prefill','args':[4,null,[]]}",
        "{'call':'prefill','args':[4,2,null]}",
        "{'call':'prefill','args':[4,2,{}]}",
        "{'call':'prefill','args':[4,2,[1,0]]}",
        "{'call':'prefill','args':[4,2,[[1,0],5]]}",
        "{'call':'prefill','args':[4,2,[[1]]]}",
        "{'call':'prefill','args':[4,2,[[1,0,0]]]}",
        "{'call':'prefill','args':[4,2,[[1,0],[]]]}",
        "{'call':'prefill','args':[4,2,[[1,{}]]]}",
        "{'call':'prefill','args':[4,2,[[1,'nan']]]}",
        "{'call':'prefill','args':[4,2,[[1,null]]]}",
        "{'call':'prefill','args':[4,2,[[1,[0]]]]}",
        "{'call':'prefill','args':[4,0,[[0]]]}",
        "{'call':'prefill','args':[4,2,[[1,0]]],'expect':5}",
        "{'call':'prefill','args':[4,2,[[1,0]]],'expect':[0,-1]}",
        "{'call':'prefill','args':[4,2,[[1,0]]],'expect':['0']}",
        "{'call':'prefill','args':[4,2,[]],'expectStatus':'PB_ERR_PARAM',"
        "'expect':[0]}",
        "{'call':'prefill','args':[4,2,[[1,0]]],'expectStatus':'PB_ERR_NOPE'}",
        "{'call':'prefill','args':[4,2,[[1,0]]],'tolerance':0}",
        "{'call':'prefill','args':[4,2,[[1,0]]],'spare':0}",
        "{'call':'Prefill','args':[4,2,[[1,0]]]}",
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; ++i) {
        char doc[1024];
        snprintf(doc, sizeof doc,
                 "{'policy':'kv-cache/snapkv','version':1,'cases':[{'name':'m',"
                 "'params':{'budget':4,'recentWindow':1},'steps':[%s]}]}",
                 steps[i]);
        outcome o;
        run_doc(doc, &o);
        if (o.rc != 0 || o.totals.failed != 1u || o.totals.passed != 0u ||
            o.totals.steps_prefill != 0u || strstr(o.text, "step 0") == NULL ||
            strstr(o.text, "malformed") == NULL) {
            print_error("step %zu (%s): rc %d, %zu passed, %zu failed, %zu "
                        "prefill calls; report:\n%s\n",
                        i, steps[i], o.rc, o.totals.passed, o.totals.failed,
                        o.totals.steps_prefill, o.text);
            fail();
        }
    }

    /* The messages say what is wrong. */
    outcome o;
    run_doc(PF_HEAD "{'call':'prefill','args':[4,3,[[1,0,0],[1,0]]]}" DOC_TAIL,
            &o);
    expect_in_report(&o, "step 0 (prefill): malformed: row 1 has 2 weights, "
                         "len is 3");
    run_doc(PF_HEAD "{'call':'prefill','args':[4,1,[[1,0,0]]]}" DOC_TAIL, &o);
    expect_in_report(&o, "malformed: row 0 has more than 1 weights, len is 1");
    run_doc(PF_HEAD "{'call':'prefill','args':[4,2,[[1,0],[0,true]]]}" DOC_TAIL,
            &o);
    expect_in_report(&o, "malformed: row 1, weight 1 must be a number");
}

/* Sizes the runner will not allocate are reported before anything is
 * allocated; products that overflow cannot be formed from a document. */
static void hostile_prefill_sizes(void **state) {
    (void)state;
    outcome o;
    /* No rows but the largest len: the workspace alone would be ~40 GB. */
    run_doc(PF_HEAD "{'call':'prefill','args':[4,4294967295,[]],"
            "'expectStatus':'PB_ERR_PARAM'}" DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"p\": FAILED: step 0 (prefill): the step "
                         "(0 rows x len 4294967295) would need ");
    expect_in_report(&o, "above the runner's limit of 268435456");
    assert_int_equal(o.totals.steps_prefill, 0);

    /* The limit given to the runner applies to the step too. With the
     * limit set to the instance's own size (whatever the engine needs), a
     * one-row step of len = that many positions needs more: 4 bytes per
     * position for the row, 8 for the outputs and about 10 for the
     * workspace. */
    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.budget = 4;
    p.recent_window = 1;
    size_t limit = 0;
    assert_int_equal(pb_kvcache_pyramidkv_size(&p, NULL, &limit), PB_OK);
    const size_t n = limit;
    const size_t cap = 2u * n + 512u;
    char *doc = malloc(cap);
    assert_non_null(doc);
    size_t at = (size_t)snprintf(doc, cap,
                                 "{\"policy\":\"kv-cache/snapkv\",\"version\":1,"
                                 "\"cases\":[{\"name\":\"big\",\"params\":{"
                                 "\"budget\":4,\"recentWindow\":1},\"steps\":["
                                 "{\"call\":\"prefill\",\"args\":[4,%zu,[[",
                                 n);
    for (size_t i = 0; i < n; ++i)
        at += (size_t)snprintf(doc + at, cap - at, i ? ",0" : "1");
    at += (size_t)snprintf(doc + at, cap - at,
                           "]]],\"expect\":[1,2,3,%zu]}]}]}", n - 1u);
    assert_true(at < cap);
    run_raw(doc, at, limit, &o);
    expect_one_failed_case(&o);
    char needle[128];
    snprintf(needle, sizeof needle,
             "step 0 (prefill): the step (1 rows x len %zu) would need ", n);
    expect_in_report(&o, needle);
    snprintf(needle, sizeof needle, "above the runner's limit of %zu", limit);
    expect_in_report(&o, needle);
    assert_int_equal(o.totals.steps_prefill, 0);
    /* With the default limit the same step runs. Consistent scope, the one
     * row admits n-1 (protected, recent 1) and gives position 0 a score of
     * 1; max pooling with kernel 7 lifts 1..3 to it. Share 4: n-4 of
     * 0..n-2 go, the pooled zeros 4..n-2 first, then the lowest of the
     * pooled ones, 0 (equal scores evict the lower position). Kept
     * {1,2,3,n-1}. */
    run_raw(doc, at, 0, &o);
    if (o.totals.passed != 1u) {
        print_error("report:\n%s\n", o.text);
        fail();
    }
    assert_int_equal(o.totals.steps_prefill, 1);
    free(doc);
}

/* Every strict prefix of a prefill document is unreadable; every
 * single-byte mutation is handled (ASan/UBSan builds watch for memory
 * errors), with the fuzz target's 1 MiB limit. */
static void truncated_and_mutated_prefill(void **state) {
    (void)state;
    char *doc = json("{'policy':'kv-cache/pyramidkv','version':1,'cases':[{"
                     "'name':'p'," PF_PARAMS ",'options':{'pool':'avg'},"
                     "'steps':[{'call':'prefill','args':[4,8," PF_ROWS "],"
                     "'expect':[4,5,6,7]},{'call':'keptCount','expect':4}]}]}");
    const size_t len = strlen(doc);
    outcome o;
    run_raw(doc, len, 1u << 20, &o);
    assert_int_equal(o.totals.passed, 1);
    static const char subst[] = {'0', '9', '-', '"', '[', ']', '}', ',', ' ',
                                 'e', '\x01'};
    expect_truncations_and_mutations(doc, 1u << 20, subst, sizeof subst,
                                     1u << 20);
    free(doc);
}

PB_TEST_MAIN(cmocka_unit_test(prefill_step_passes),
             cmocka_unit_test(wrong_prefill),
             cmocka_unit_test(malformed_prefill),
             cmocka_unit_test(hostile_prefill_sizes),
             cmocka_unit_test(truncated_and_mutated_prefill))
