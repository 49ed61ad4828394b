/*
 * test_vector_runner.c - the golden vector runner (bench/cli/vector_runner.c)
 * checked on documents held in memory (runner_harness.h): a deliberately
 * wrong expectation in each step type fails and names the case and step;
 * malformed, truncated and wrongly typed documents are reported, never
 * crash; the summary line and the exit status are exact. The prefill step
 * has the same checks in test_vector_runner_prefill.c.
 */
#include "runner_harness.h"
#include "test_main.h"

/* ------------------------------------------------------------------------ */
/* A good document and one wrong expectation per step type.                 */

/* Scores after the two steps: p0 1 + .5 = 1.5, p1 .25, p2 0; capacity
 * max(2, 2) + 1 = 3; evict(2) drops the lowest of p0, p1: 1. */
#define BASE_HEAD                                                             \
    "{'policy':'kv-cache/snapkv','version':1,'cases':[{'name':'base',"        \
    "'params':{'budget':2,'recentWindow':1,'obsWindow':2,'poolKernel':1},"   \
    "'steps':["
#define STEP0 "{'call':'onDecodeStep','args':[1,[1]]},"
#define STEP1 "{'call':'onDecodeStep','args':[2,[0.5,0.25]]},"
#define STEP2 "{'call':'effectiveBudget','expect':2},"
#define STEP3 "{'call':'capacity','expect':3},"
#define STEP4 "{'call':'keptCount','expect':3},"
#define STEP5 "{'call':'windowScoreOf','args':[0],'expect':1.5},"
#define STEP6 "{'call':'keptPositions','expect':[0,1,2]},"
#define STEP7 "{'call':'evict','args':[2],'expect':[1]},"
#define STEP8 "{'call':'reset'}"

static void good_document_passes(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD STEP0 STEP1 STEP2 STEP3 STEP4 STEP5 STEP6 STEP7 STEP8
                DOC_TAIL,
            &o);
    assert_int_equal(o.rc, 0);
    assert_int_equal(o.totals.passed, 1);
    assert_int_equal(o.totals.failed, 0);
    assert_int_equal(o.totals.documents, 1);
    assert_int_equal(o.totals.unreadable, 0);
    assert_int_equal(o.totals.steps_decode, 2);
    assert_int_equal(o.totals.steps_evict, 1);
    assert_int_equal(o.totals.steps_effective, 1);
    assert_int_equal(o.totals.steps_window, 1);
    assert_int_equal(o.totals.steps_kept_count, 1);
    assert_int_equal(o.totals.steps_kept_positions, 1);
    assert_int_equal(o.totals.steps_capacity, 1);
    assert_int_equal(o.totals.steps_reset, 1);
    assert_string_equal(o.text, "");
    assert_int_equal(pb_vector_exit_status(&o.totals), 0);
}

static void wrong_effective_budget(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD STEP0 STEP1 "{'call':'effectiveBudget','expect':3}"
                DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "doc.json: case \"base\": FAILED: step 2 "
                         "(effectiveBudget): expected 3, got 2");
    assert_int_equal(pb_vector_exit_status(&o.totals), 1);
}

static void wrong_capacity(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD STEP0 STEP1 STEP2 "{'call':'capacity','expect':4}"
                DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"base\": FAILED: step 3 (capacity): "
                         "expected 4, got 3");
}

static void wrong_kept_count(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD STEP0 STEP1 STEP2 STEP3 "{'call':'keptCount','expect':2}"
                DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"base\": FAILED: step 4 (keptCount): "
                         "expected 2, got 3");
}

static void wrong_window_score(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD STEP0 STEP1 STEP2 STEP3 STEP4
            "{'call':'windowScoreOf','args':[0],'expect':1.25}" DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"base\": FAILED: step 5 (windowScoreOf): "
                         "windowScoreOf(0): expected 1.25, got 1.5 (compared "
                         "exactly)");

    /* A tolerance widens the comparison, and only by its amount. */
    run_doc(BASE_HEAD STEP0 STEP1
            "{'call':'windowScoreOf','args':[0],'expect':1.4,'tolerance':0.125}"
            DOC_TAIL,
            &o);
    assert_int_equal(o.totals.passed, 1);
    run_doc(BASE_HEAD STEP0 STEP1
            "{'call':'windowScoreOf','args':[0],'expect':1.4,'tolerance':0.05}"
            DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "expected 1.4 within 0.05, got 1.5");

    /* A position that is not held is a status, not a score. */
    run_doc(BASE_HEAD STEP0 "{'call':'windowScoreOf','args':[7],'expect':0}"
                DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "step 1 (windowScoreOf): expected status PB_OK, got "
                         "PB_ERR_NOT_HELD");
    run_doc(BASE_HEAD STEP0
            "{'call':'windowScoreOf','args':[7],'expectStatus':'PB_ERR_NOT_HELD'}"
            DOC_TAIL,
            &o);
    assert_int_equal(o.totals.passed, 1);
}

static void wrong_kept_positions(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD STEP0 STEP1 STEP2 STEP3 STEP4 STEP5
            "{'call':'keptPositions','expect':[0,1]}" DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"base\": FAILED: step 6 (keptPositions): "
                         "expected [0, 1], got [0, 1, 2]");
}

static void wrong_evict(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD STEP0 STEP1 STEP2 STEP3 STEP4 STEP5 STEP6
            "{'call':'evict','args':[2],'expect':[0]}" DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"base\": FAILED: step 7 (evict): evict(2): "
                         "expected [0], got [1]");

    /* Expecting nothing when something goes is a failure too. */
    run_doc(BASE_HEAD STEP0 STEP1 "{'call':'evict','args':[2],'expect':[]}"
                DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "step 2 (evict): evict(2): expected [], got [1]");

    /* On the compatible surface a too small victims buffer drops nothing. */
    run_doc(BASE_HEAD STEP0 STEP1 "{'call':'evict','args':[2,0],'expect':[1]}"
                DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "evict(2): expected [1], got []");

    /* The native function reports the same as a status. */
    run_doc(BASE_HEAD STEP0 STEP1
            "{'call':'evict','args':[2,0],'expectStatus':'PB_OK','expect':[1]}"
            DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "step 2 (evict): expected status PB_OK, got "
                         "PB_ERR_BUFFER");
}

static void wrong_decode_status(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD
            "{'call':'onDecodeStep','args':[1,[1]],'expectStatus':'PB_ERR_LENGTH'}"
            DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"base\": FAILED: step 0 (onDecodeStep): "
                         "expected status PB_ERR_LENGTH, got PB_OK");

    /* And the other way round: a bad step expected to succeed. */
    run_doc(BASE_HEAD
            "{'call':'onDecodeStep','args':[1,[1,1]],'expectStatus':'PB_OK'}"
            DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "step 0 (onDecodeStep): expected status PB_OK, got "
                         "PB_ERR_LENGTH");

    /* Special weights reach the library as NaN and infinities. */
    run_doc(BASE_HEAD
            "{'call':'onDecodeStep','args':[1,['NaN']],'expectStatus':'PB_ERR_WEIGHT'},"
            "{'call':'onDecodeStep','args':[1,['-Infinity']],'expectStatus':'PB_ERR_WEIGHT'},"
            "{'call':'onDecodeStep','args':[1,[1e39]],'expectStatus':'PB_ERR_WEIGHT'},"
            "{'call':'keptCount','expect':1}" DOC_TAIL,
            &o);
    assert_int_equal(o.totals.passed, 1);
}

static void wrong_reset_status(void **state) {
    (void)state;
    outcome o;
    run_doc(BASE_HEAD STEP0 STEP1 STEP2 STEP3 STEP4 STEP5 STEP6 STEP7
            "{'call':'reset','expectStatus':'PB_ERR_NULL'}" DOC_TAIL,
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"base\": FAILED: step 8 (reset): expected "
                         "status PB_ERR_NULL, got PB_OK");
}

/* A case stops at its first failure; the next case still runs. */
static void failure_stops_the_case_only(void **state) {
    (void)state;
    outcome o;
    run_doc("{'policy':'kv-cache/snapkv','version':1,'cases':["
            "{'name':'first','params':{'budget':4,'recentWindow':1},'steps':["
            "{'call':'keptCount','expect':9},{'call':'capacity','expect':99}]},"
            "{'name':'second','params':{'budget':4,'recentWindow':1},'steps':["
            "{'call':'capacity','expect':5}]}]}",
            &o);
    assert_int_equal(o.totals.passed, 1);
    assert_int_equal(o.totals.failed, 1);
    expect_in_report(&o, "case \"first\": FAILED: step 0 (keptCount): "
                         "expected 9, got 1");
    assert_null(strstr(o.text, "99"));
    assert_null(strstr(o.text, "second"));
}

static void create_expectations(void **state) {
    (void)state;
    outcome o;
    /* Valid params expected to be refused. */
    run_doc("{'policy':'kv-cache/pyramidkv','version':1,'cases':[{'name':'c',"
            "'params':{'budget':8,'recentWindow':1},'expectCreateError':true}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"c\": FAILED: expected create to be refused, "
                         "it succeeded");
    /* Refused params expected to work. */
    run_doc("{'policy':'kv-cache/pyramidkv','version':1,'cases':[{'name':'c',"
            "'params':{'budget':0},'steps':[]}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"c\": FAILED: create returned NULL");
    run_doc("{'policy':'kv-cache/snapkv','version':1,'cases':[{'name':'c',"
            "'params':{'budget':8,'poolKernel':2},'surface':'native'}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "create refused the params: PB_ERR_PARAM");
    /* The wrong status. */
    run_doc("{'policy':'kv-cache/pyramidkv','version':1,'cases':[{'name':'c',"
            "'params':{'budget':0},'expectCreateError':'PB_ERR_NOMEM'}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "create: expected PB_ERR_NOMEM, got PB_ERR_PARAM");
    /* And the right ones pass, on both surfaces and both policies. */
    run_doc("{'policy':'kv-cache/pyramidkv','version':1,'cases':["
            "{'name':'a','params':{'budget':0},'expectCreateError':'PB_ERR_PARAM'},"
            "{'name':'b','params':{'obsWindow':0},'expectCreateError':true},"
            "{'name':'c','params':{'budget':8,'recentWindow':3},"
            "'options':{'capacity':4},'expectCreateError':true}]}",
            &o);
    assert_int_equal(o.totals.passed, 3);
    assert_int_equal(o.totals.failed, 0);
}

static void budget_expectations(void **state) {
    (void)state;
    outcome o;
    run_doc("{'policy':'kv-cache/pyramid-budget','version':1,'cases':["
            "{'name':'ok','budget':100,'numLayers':4,'pyramidRatio':3,"
            "'expect':[150,116,83,50],'expectTotal':399},"
            "{'name':'one','budget':512,'layer':31,'numLayers':32,"
            "'pyramidRatio':4,'expect':204},"
            "{'name':'big','budget':3000000000,'numLayers':2,'pyramidRatio':4,"
            "'expect':[4294967295,1200000000],'expectTotal':'5494967295'}]}",
            &o);
    assert_int_equal(o.totals.passed, 3);
    assert_int_equal(o.totals.failed, 0);
    assert_int_equal(o.totals.budget_layers, 7);

    run_doc("{'policy':'kv-cache/pyramid-budget','version':1,'cases':["
            "{'name':'share','budget':100,'numLayers':4,'pyramidRatio':3,"
            "'expect':[150,117,83,50]}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"share\": FAILED: pb_kvcache_pyramid_budget(100, "
                         "k, 4 layers, ratio 3) for every layer k: expected "
                         "[150, 117, 83, 50], got [150, 116, 83, 50]");

    run_doc("{'policy':'kv-cache/pyramid-budget','version':1,'cases':["
            "{'name':'total','budget':100,'numLayers':4,'pyramidRatio':3,"
            "'expect':[150,116,83,50],'expectTotal':400}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "\"expectTotal\" 400 is not the sum of \"expect\", 399");

    run_doc("{'policy':'kv-cache/pyramid-budget','version':1,'cases':["
            "{'name':'layer','budget':512,'layer':0,'numLayers':32,"
            "'pyramidRatio':4,'expect':820,'expectTotal':16368}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "pb_kvcache_pyramid_budget(512, layer 0, 32 layers, "
                         "ratio 4): expected 820, got 819");

    run_doc("{'policy':'kv-cache/pyramid-budget','version':1,'cases':["
            "{'name':'layertotal','budget':512,'layer':0,'numLayers':32,"
            "'pyramidRatio':4,'expect':819,'expectTotal':16384}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "pb_kvcache_pyramid_total(512, 32 layers, ratio 4): "
                         "expected 16384, got 16368");
}

/* ------------------------------------------------------------------------ */
/* The summary line and the exit status.                                    */

static void summary_line_is_exact(void **state) {
    (void)state;
    pb_vector_totals t = PB_VECTOR_TOTALS_INIT;
    const pb_vector_options quiet = {NULL, 0, 0};
    char *good = json(BASE_HEAD STEP0 STEP1
                          "{'call':'evict','args':[2],'expect':[1]}" DOC_TAIL);
    char *bad = json(BASE_HEAD STEP0 "{'call':'keptCount','expect':7}" DOC_TAIL);
    assert_int_equal(pb_vector_run_document(good, strlen(good), "a", &quiet, &t), 0);
    assert_int_equal(pb_vector_run_document(good, strlen(good), "b", &quiet, &t), 0);
    assert_int_equal(pb_vector_run_document(bad, strlen(bad), "c", &quiet, &t), 0);
    assert_int_equal(pb_vector_run_document("{", 1, "d", &quiet, &t), -1);

    FILE *f = tmpfile();
    assert_non_null(f);
    pb_vector_print_summary(f, &t);
    rewind(f);
    char line[128] = {0};
    const size_t n = fread(line, 1, sizeof line - 1u, f);
    fclose(f);
    line[n] = '\0';
    assert_string_equal(line, "2 passed, 1 failed\n");
    assert_int_equal(t.documents, 3);
    assert_int_equal(t.unreadable, 1);
    assert_int_equal(pb_vector_exit_status(&t), 2); /* input error first */

    /* All passing but one unreadable document: an input error, 2. */
    pb_vector_totals u = PB_VECTOR_TOTALS_INIT;
    pb_vector_run_document(good, strlen(good), "a", &quiet, &u);
    assert_int_equal(pb_vector_exit_status(&u), 0);
    pb_vector_run_document("", 0, "empty", &quiet, &u);
    assert_int_equal(u.passed, 1);
    assert_int_equal(u.failed, 0);
    assert_int_equal(pb_vector_exit_status(&u), 2);

    /* No case at all: "0 passed, 0 failed". */
    pb_vector_totals z = PB_VECTOR_TOTALS_INIT;
    f = tmpfile();
    assert_non_null(f);
    pb_vector_print_summary(f, &z);
    rewind(f);
    const size_t m = fread(line, 1, sizeof line - 1u, f);
    fclose(f);
    line[m] = '\0';
    assert_string_equal(line, "0 passed, 0 failed\n");
    free(good);
    free(bad);
}

/* ------------------------------------------------------------------------ */
/* Bad documents: reported, never a crash.                                  */

static void unreadable_documents(void **state) {
    (void)state;
    static const char *const docs[] = {
        "",
        "   \n",
        "{",
        "[",
        "[]",
        "null",
        "1",
        "'cases'",
        "{}",
        "{'policy':'kv-cache/snapkv'}",
        "{'policy':'kv-cache/snapkv','version':2,'cases':[]}",
        "{'policy':'kv-cache/snapkv','version':'1','cases':[]}",
        "{'policy':'kv-cache/snapkv','version':1,'cases':{}}",
        "{'policy':'kv-cache/h3o','version':1,'cases':[]}",
        "{'policy':5,'version':1,'cases':[]}",
        "{'policy':'kv-cache/snapkv','version':1,'cases':[],'extra':1}",
        "{'policy':'kv-cache/snapkv','version':1,'cases':[]} trailing",
        "{'policy':'kv-cache/snapkv','version':1,'cases':[}",
        "{'policy':'kv-cache/snapkv','version':1e400,'cases':[]}",
        "{'policy':'kv-cache/snapkv' 'version':1,'cases':[]}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; ++i) {
        outcome o;
        run_doc(docs[i], &o);
        if (o.rc != -1 || o.totals.unreadable != 1u || o.totals.passed != 0u ||
            o.totals.failed != 0u) {
            print_error("document %zu (%s): rc %d, report:\n%s\n", i, docs[i],
                        o.rc, o.text);
            fail();
        }
        expect_in_report(&o, "doc.json: error: ");
    }

    /* A NUL byte inside, and a NULL pointer with a length. */
    outcome o;
    static const char with_nul[] = "{\"policy\":\0\"x\"}";
    run_raw(with_nul, sizeof with_nul - 1u, 0, &o);
    assert_int_equal(o.rc, -1);
    expect_in_report(&o, "NUL byte");
    run_raw(NULL, 5, 0, &o);
    assert_int_equal(o.rc, -1);

    /* Nesting far deeper than any parser should recurse. */
    const size_t depth = 100000;
    char *deep = malloc(2u * depth + 1u);
    assert_non_null(deep);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2u * depth] = '\0';
    run_raw(deep, 2u * depth, 0, &o);
    assert_int_equal(o.rc, -1);
    free(deep);
}

/* Each of these documents is readable but its only case is malformed: the
 * case fails with a message, nothing crashes. */
static void malformed_cases(void **state) {
    (void)state;
    static const char *const cases[] = {
        "5",
        "{'params':{}}",
        "{'name':7}",
        "{'name':'x','why':3}",
        "{'name':'x','params':'budget'}",
        "{'name':'x','params':{'budget':'5'}}",
        "{'name':'x','params':{'budget':-1}}",
        "{'name':'x','params':{'budget':1.5}}",
        "{'name':'x','params':{'budget':4294967296}}",
        "{'name':'x','params':{'budget':1e400}}",
        "{'name':'x','params':{'budget':true}}",
        "{'name':'x','params':{'budget':null}}",
        "{'name':'x','params':{'layer':0}}",
        "{'name':'x','params':{'budget':8,'budget':8}}",
        "{'name':'x','name':'y'}",
        "{'name':'x','bogus':1}",
        "{'name':'x','seed':-3}",
        "{'name':'x','options':{'capacity':-1}}",
        "{'name':'x','options':{'pool':'median'}}",
        "{'name':'x','options':{'spare':1}}",
        "{'name':'x','options':[]}",
        "{'name':'x','surface':'both'}",
        "{'name':'x','surface':'compatible','options':{}}",
        "{'name':'x','expectCreateError':5}",
        "{'name':'x','expectCreateError':'PB_ERR_BOGUS'}",
        "{'name':'x','params':{'budget':0},'expectCreateError':true,"
        "'steps':[{'call':'reset'}]}",
        "{'name':'x','params':{'budget':4294967294}}",
        "{'name':'x','params':{'budget':8,'recentWindow':1,'obsWindow':4294967295}}",
        "{'name':'x','steps':{}}",
        "{'name':'x','steps':[5]}",
        "{'name':'x','steps':[{}]}",
        "{'name':'x','steps':[{'call':7}]}",
        "{'name':'x','steps':[{'call':'prefill'}]}",
        "{'name':'x','steps':[{'call':'keptCount','expect':1,'spare':0}]}",
        "{'name':'x','steps':[{'call':'keptCount','expect':1,'expect':1}]}",
        "{'name':'x','steps':[{'call':'keptCount'}]}",
        "{'name':'x','steps':[{'call':'keptCount','expect':1.5}]}",
        "{'name':'x','steps':[{'call':'keptCount','expect':'1x'}]}",
        "{'name':'x','steps':[{'call':'keptCount','args':[1],'expect':1}]}",
        "{'name':'x','steps':[{'call':'keptCount','expect':1,'expectStatus':'PB_OK'}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep'}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':5}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':[1]}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':[1,[1],3]}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':[-1,[1]]}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':['1',[1]]}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':[1,0.5]}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':[1,[{}]]}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':[1,['nan']]}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':[1,[1]],'expect':[]}]}",
        "{'name':'x','steps':[{'call':'onDecodeStep','args':[1,[1]],'expectStatus':3}]}",
        "{'name':'x','steps':[{'call':'evict'}]}",
        "{'name':'x','steps':[{'call':'evict','args':[1]}]}",
        "{'name':'x','steps':[{'call':'evict','args':[1],'expect':5}]}",
        "{'name':'x','steps':[{'call':'evict','args':[1],'expect':[-1]}]}",
        "{'name':'x','steps':[{'call':'evict','args':[1,-2],'expect':[]}]}",
        "{'name':'x','steps':[{'call':'evict','args':[1,2,3],'expect':[]}]}",
        "{'name':'x','steps':[{'call':'evict','args':[1],'expect':[],"
        "'expectStatus':'PB_ERR_BUFFER'}]}",
        "{'name':'x','steps':[{'call':'evict','args':[1],'expect':[],'tolerance':1}]}",
        "{'name':'x','steps':[{'call':'windowScoreOf','args':[0]}]}",
        "{'name':'x','steps':[{'call':'windowScoreOf','args':[0],'expect':'0'}]}",
        "{'name':'x','steps':[{'call':'windowScoreOf','args':[0],'expect':1e400}]}",
        "{'name':'x','steps':[{'call':'windowScoreOf','args':[0],'expect':0,"
        "'tolerance':-1}]}",
        "{'name':'x','steps':[{'call':'windowScoreOf','args':[9],"
        "'expectStatus':'PB_ERR_NOT_HELD','expect':0}]}",
        "{'name':'x','steps':[{'call':'keptPositions','expect':[0,'1']}]}",
        "{'name':'x','steps':[{'call':'reset','expect':1}]}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        char doc[1024];
        snprintf(doc, sizeof doc,
                 "{'policy':'kv-cache/snapkv','version':1,'cases':[%s]}",
                 cases[i]);
        outcome o;
        run_doc(doc, &o);
        if (o.rc != 0 || o.totals.failed != 1u || o.totals.passed != 0u) {
            print_error("case %zu (%s): rc %d, %zu passed, %zu failed; report:\n%s\n",
                        i, cases[i], o.rc, o.totals.passed, o.totals.failed,
                        o.text);
            fail();
        }
        expect_in_report(&o, ": FAILED: ");
    }

    /* The same for the allocation schema. */
    static const char *const budget_cases[] = {
        "{'name':'b'}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'expect':[1]}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'expect':[1,1,1]}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'expect':'[1,1]'}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'expect':[1,-1]}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'layer':0,'expect':[1]}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'layer':-1,'expect':1}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'expect':[1,1],"
        "'expectTotal':'2x'}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'expect':[1,1],"
        "'expectTotal':1e300}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'expect':[1,1],"
        "'expectTotal':'99999999999999999999'}",
        "{'name':'b','budget':1,'numLayers':2,'pyramidRatio':1,'expect':[1,1],"
        "'steps':[]}",
        "{'name':'b','budget':'1','numLayers':2,'pyramidRatio':1,'expect':[1,1]}",
    };
    for (size_t i = 0; i < sizeof budget_cases / sizeof budget_cases[0]; ++i) {
        char doc[1024];
        snprintf(doc, sizeof doc,
                 "{'policy':'kv-cache/pyramid-budget','version':1,'cases':[%s]}",
                 budget_cases[i]);
        outcome o;
        run_doc(doc, &o);
        if (o.rc != 0 || o.totals.failed != 1u || o.totals.passed != 0u) {
            print_error("budget case %zu (%s): rc %d, report:\n%s\n", i,
                        budget_cases[i], o.rc, o.text);
            fail();
        }
    }
}

/* Every strict prefix of a good document is unreadable; every single-byte
 * mutation is handled (ASan/UBSan builds watch for memory errors). */
static void truncated_and_mutated_documents(void **state) {
    (void)state;
    char *doc = json(BASE_HEAD STEP0 STEP1 STEP2 STEP3 STEP4 STEP5 STEP6 STEP7
                         STEP8 DOC_TAIL);
    static const char subst[] = {'0', '9', '-', '"', '[', '}', ',', ' ', 'e', '\x01'};
    expect_truncations_and_mutations(doc, 0, subst, sizeof subst, 1u << 20);
    free(doc);
}

/* Hostile sizes: a long name is shortened in the report, a huge weight list
 * is just a wrong length, and an instance over the limit is not created. */
static void hostile_sizes(void **state) {
    (void)state;
    const size_t name_len = 5000, n_weights = 200000;
    const size_t cap = name_len + 12u * n_weights + 512u;
    char *doc = malloc(cap);
    assert_non_null(doc);
    size_t at = (size_t)snprintf(doc, cap,
                                 "{\"policy\":\"kv-cache/snapkv\",\"version\":1,"
                                 "\"cases\":[{\"name\":\"");
    memset(doc + at, 'n', name_len);
    at += name_len;
    at += (size_t)snprintf(doc + at, cap - at,
                           "\",\"params\":{\"budget\":4,\"recentWindow\":1},"
                           "\"steps\":[{\"call\":\"onDecodeStep\",\"args\":[1,[");
    for (size_t i = 0; i < n_weights; ++i)
        at += (size_t)snprintf(doc + at, cap - at, i ? ",0.5" : "0.5");
    at += (size_t)snprintf(doc + at, cap - at,
                           "]]},{\"call\":\"keptCount\",\"expect\":2}]}]}");
    outcome o;
    run_raw(doc, at, 0, &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "nnnn...\": FAILED: step 1 (keptCount): expected 2, got 1");
    assert_true(strlen(o.text) < 400u);
    free(doc);

    run_doc("{'policy':'kv-cache/pyramidkv','version':1,'cases':[{'name':'huge',"
            "'params':{'budget':4294967294,'recentWindow':1}}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "above the runner's limit");

    /* Control characters in names cannot forge report lines. */
    run_doc("{'policy':'kv-cache/snapkv','version':1,'cases':[{'name':'a\\nb\\'',"
            "'steps':[{'call':'keptCount','expect':0}]}]}",
            &o);
    expect_one_failed_case(&o);
    expect_in_report(&o, "case \"a?b?\": FAILED");
}

PB_TEST_MAIN(cmocka_unit_test(good_document_passes),
             cmocka_unit_test(wrong_effective_budget),
             cmocka_unit_test(wrong_capacity),
             cmocka_unit_test(wrong_kept_count),
             cmocka_unit_test(wrong_window_score),
             cmocka_unit_test(wrong_kept_positions),
             cmocka_unit_test(wrong_evict),
             cmocka_unit_test(wrong_decode_status),
             cmocka_unit_test(wrong_reset_status),
             cmocka_unit_test(failure_stops_the_case_only),
             cmocka_unit_test(create_expectations),
             cmocka_unit_test(budget_expectations),
             cmocka_unit_test(summary_line_is_exact),
             cmocka_unit_test(unreadable_documents),
             cmocka_unit_test(malformed_cases),
             cmocka_unit_test(truncated_and_mutated_documents),
             cmocka_unit_test(hostile_sizes))
