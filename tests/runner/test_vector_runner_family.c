/*
 * test_vector_runner_family.c - the golden vector runner on the rest of the
 * policybook family (kv-cache/h2o, scissorhands, tova, streaming-llm,
 * sliding-window), on documents held in memory: a good document passes and
 * counts every new call; a wrong expectation in sinkCount, scoreOf, votesOf
 * and lastAttentionOf fails and names the case, step and values; each
 * family takes only its own params keys and score call; the native surface
 * of a family case; a hostile budget is refused before allocating.
 *
 * Documents are written with single quotes (runner_harness.h).
 */
#include "runner_harness.h"
#include "test_main.h"

/* H2O, budget 2, recent 1: steps [1] and [.5, .5] give p0 1.5, p1 .5, p2 0;
 * evict(2) drops p1 (p2 protected). */
#define H2O_HEAD                                                              \
    "{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'h',"              \
    "'params':{'budget':2,'recentWindow':1},'steps':["                         \
    "{'call':'onDecodeStep','args':[1,[1]]},"                                 \
    "{'call':'onDecodeStep','args':[2,[0.5,0.5]]},"

static void good_documents_pass(void **state) {
    (void)state;
    outcome o;
    run_doc(H2O_HEAD "{'call':'scoreOf','args':[0],'expect':1.5},"
                     "{'call':'scoreOf','args':[2],'expect':0},"
                     "{'call':'scoreOf','args':[7],'expect':-1},"
                     "{'call':'sinkCount','expect':0},"
                     "{'call':'evict','args':[2],'expect':[1]},"
                     "{'call':'keptPositions','expect':[0,2]}" DOC_TAIL,
            &o);
    expect_counts(&o, 1, 0);
    assert_int_equal(o.totals.steps_score, 3);
    assert_int_equal(o.totals.steps_sink_count, 1);

    /* Scissorhands: share .5, p0's .75 votes. */
    run_doc("{'policy':'kv-cache/scissorhands','version':1,'cases':[{'name':'s',"
            "'params':{'budget':3,'recentWindow':1},'steps':["
            "{'call':'onDecodeStep','args':[1,[1]]},"
            "{'call':'onDecodeStep','args':[2,[0.75,0.25]]},"
            "{'call':'votesOf','args':[0],'expect':1},"
            "{'call':'votesOf','args':[1],'expect':0},"
            "{'call':'votesOf','args':[5],'expect':-1}]}]}",
            &o);
    expect_counts(&o, 1, 0);
    assert_int_equal(o.totals.steps_votes, 3);

    /* TOVA: the record is the latest weight; p2 unobserved. */
    run_doc("{'policy':'kv-cache/tova','version':1,'cases':[{'name':'t',"
            "'params':{'budget':3},'steps':["
            "{'call':'onDecodeStep','args':[1,[1]]},"
            "{'call':'onDecodeStep','args':[2,[0.25,0.75]]},"
            "{'call':'lastAttentionOf','args':[0],'expect':0.25},"
            "{'call':'lastAttentionOf','args':[2],'expect':-1}]}]}",
            &o);
    expect_counts(&o, 1, 0);
    assert_int_equal(o.totals.steps_last_attention, 2);

    /* StreamingLLM with 2 sinks and the sliding window: the oldest
     * non-sink goes. */
    run_doc("{'policy':'kv-cache/streaming-llm','version':1,'cases':[{'name':'l',"
            "'params':{'budget':3,'sinks':2},'steps':["
            "{'call':'onDecodeStep','args':[1,null]},"
            "{'call':'onDecodeStep','args':[2,null]},"
            "{'call':'onDecodeStep','args':[3,null]},"
            "{'call':'sinkCount','expect':2},"
            "{'call':'evict','args':[3],'expect':[2]}]}]}",
            &o);
    expect_counts(&o, 1, 0);
    run_doc("{'policy':'kv-cache/sliding-window','version':1,'cases':[{'name':'w',"
            "'params':{'budget':1},'steps':["
            "{'call':'onDecodeStep','args':[1,null]},"
            "{'call':'evict','args':[1],'expect':[0]},"
            "{'call':'sinkCount','expect':0}]}]}",
            &o);
    expect_counts(&o, 1, 0);
}

static void wrong_expectations(void **state) {
    (void)state;
    outcome o;
    run_doc(H2O_HEAD "{'call':'scoreOf','args':[0],'expect':1.25}" DOC_TAIL, &o);
    expect_counts(&o, 0, 1);
    expect_in_report(&o, "case \"h\": FAILED: step 2 (scoreOf): scoreOf(0): "
                         "expected 1.25, got 1.5 (compared exactly)");
    run_doc(H2O_HEAD "{'call':'scoreOf','args':[1],'expect':-1}" DOC_TAIL, &o);
    expect_counts(&o, 0, 1);
    expect_in_report(&o, "scoreOf(1): expected -1, got 0.5");
    run_doc(H2O_HEAD "{'call':'scoreOf','args':[0],'expect':1.25,"
                     "'tolerance':0.125}" DOC_TAIL,
            &o);
    expect_in_report(&o, "expected 1.25 within 0.125, got 1.5");
    run_doc(H2O_HEAD "{'call':'scoreOf','args':[0],'expect':1.25,"
                     "'tolerance':0.25}" DOC_TAIL,
            &o);
    expect_counts(&o, 1, 0);
    run_doc(H2O_HEAD "{'call':'sinkCount','expect':1}" DOC_TAIL, &o);
    expect_in_report(&o, "step 2 (sinkCount): expected 1, got 0");

    run_doc("{'policy':'kv-cache/scissorhands','version':1,'cases':[{'name':'s',"
            "'params':{'budget':3,'recentWindow':1},'steps':["
            "{'call':'onDecodeStep','args':[1,[1]]},"
            "{'call':'votesOf','args':[0],'expect':1}]}]}",
            &o);
    expect_counts(&o, 0, 1);
    expect_in_report(&o, "step 1 (votesOf): votesOf(0): expected 1, got 0");

    run_doc("{'policy':'kv-cache/tova','version':1,'cases':[{'name':'t',"
            "'params':{'budget':3},'steps':["
            "{'call':'onDecodeStep','args':[1,[0.5]]},"
            "{'call':'lastAttentionOf','args':[0],'expect':-1}]}]}",
            &o);
    expect_counts(&o, 0, 1);
    expect_in_report(&o, "step 1 (lastAttentionOf): lastAttentionOf(0): "
                         "expected -1, got 0.5");

    run_doc("{'policy':'kv-cache/streaming-llm','version':1,'cases':[{'name':'l',"
            "'params':{'budget':3,'sinks':2},'steps':["
            "{'call':'onDecodeStep','args':[1,null]},"
            "{'call':'sinkCount','expect':1}]}]}",
            &o);
    expect_in_report(&o, "step 1 (sinkCount): expected 1, got 2");
}

static void malformed_family_cases(void **state) {
    (void)state;
    static const struct {
        const char *doc, *needle;
    } bad[] = {
        {"{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'x',"
         "'params':{'budget':4,'obsWindow':2}}]}",
         "unknown key \"obsWindow\" in \"params\""},
        {"{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'x',"
         "'params':{'budget':4,'sinks':2}}]}",
         "unknown key \"sinks\" in \"params\""},
        {"{'policy':'kv-cache/tova','version':1,'cases':[{'name':'x',"
         "'params':{'budget':4,'recentWindow':1}}]}",
         "unknown key \"recentWindow\" in \"params\""},
        {"{'policy':'kv-cache/sliding-window','version':1,'cases':[{'name':'x',"
         "'params':{'budget':4,'sinks':1}}]}",
         "unknown key \"sinks\" in \"params\""},
        {"{'policy':'kv-cache/streaming-llm','version':1,'cases':[{'name':'x',"
         "'params':{'budget':'4'}}]}",
         "params.budget must be an integer"},
        {"{'policy':'kv-cache/streaming-llm','version':1,'cases':[{'name':'x',"
         "'params':{'budget':4,'sinks':-1}}]}",
         "params.sinks must be an integer"},
        {"{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'x',"
         "'steps':[{'call':'votesOf','args':[0],'expect':0}]}]}",
         "unknown call (the calls are onDecodeStep, evict, effectiveBudget, "
         "windowScoreOf, keptCount, keptPositions, capacity, reset, prefill, "
         "sinkCount, scoreOf)"},
        {"{'policy':'kv-cache/tova','version':1,'cases':[{'name':'x',"
         "'steps':[{'call':'scoreOf','args':[0],'expect':0}]}]}",
         "sinkCount, lastAttentionOf)"},
        {"{'policy':'kv-cache/scissorhands','version':1,'cases':[{'name':'x',"
         "'steps':[{'call':'votesOf','args':[0],'expect':0.5}]}]}",
         "\"expect\" must be a vote count"},
        {"{'policy':'kv-cache/scissorhands','version':1,'cases':[{'name':'x',"
         "'steps':[{'call':'votesOf','args':[0],'expect':0,'tolerance':1}]}]}",
         "this call takes no \"tolerance\""},
        {"{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'x',"
         "'steps':[{'call':'scoreOf','expect':0}]}]}",
         "\"args\" is missing"},
        {"{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'x',"
         "'steps':[{'call':'scoreOf','args':[0]}]}]}",
         "\"expect\" must be a number"},
        {"{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'x',"
         "'steps':[{'call':'scoreOf','args':[0],'expect':0,"
         "'expectStatus':'PB_OK'}]}]}",
         "this call takes no \"expectStatus\""},
        {"{'policy':'kv-cache/tova','version':1,'cases':[{'name':'x',"
         "'steps':[{'call':'sinkCount','expect':-1}]}]}",
         "\"expect\" must be an integer"},
        {"{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'x',"
         "'params':{'budget':4,'recentWindow':4},'expectCreateError':false}]}",
         "create returned NULL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        outcome o;
        run_doc(bad[i].doc, &o);
        if (o.rc != 0 || o.totals.failed != 1u) {
            print_error("document %zu: rc %d, %zu failed; report:\n%s\n", i,
                        o.rc, o.totals.failed, o.text);
            fail();
        }
        expect_in_report(&o, bad[i].needle);
    }
}

/* A family case on the native surface is pb_kvcache_create with the config
 * its vtable means; the refusal statuses are the native ones. */
static void native_surface(void **state) {
    (void)state;
    outcome o;
    run_doc("{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'n',"
            "'surface':'native','params':{'budget':2,'recentWindow':1},"
            "'steps':[{'call':'onDecodeStep','args':[1,[1]]},"
            "{'call':'onDecodeStep','args':[2,[0.5]],'expectStatus':'PB_ERR_LENGTH'},"
            "{'call':'onDecodeStep','args':[2,[0.5,0.5]]},"
            "{'call':'scoreOf','args':[0],'expect':1.5},"
            "{'call':'effectiveBudget','expect':4294967295},"
            "{'call':'capacity','expect':3},"
            "{'call':'evict','args':[2],'expect':[1]}]},"
            "{'name':'refused','params':{'budget':4,'recentWindow':4},"
            "'expectCreateError':'PB_ERR_PARAM'},"
            "{'name':'refused too','params':{'budget':0},"
            "'expectCreateError':true}]}",
            &o);
    expect_counts(&o, 3, 0);
}

static void hostile_budget(void **state) {
    (void)state;
    static const char *const docs[] = {
        "{'policy':'kv-cache/h2o','version':1,'cases':[{'name':'huge',"
        "'params':{'budget':4294967294,'recentWindow':1}}]}",
        "{'policy':'kv-cache/tova','version':1,'cases':[{'name':'huge',"
        "'params':{'budget':4000000000}}]}",
        "{'policy':'kv-cache/sliding-window','version':1,'cases':[{'name':'huge',"
        "'params':{'budget':1000000}}]}",
    };
    for (size_t i = 0; i < 3; ++i) {
        outcome o;
        run_doc_limit(docs[i], (size_t)1 << 20, &o);
        expect_counts(&o, 0, 1);
        expect_in_report(&o, "above the runner's limit");
    }
}

PB_TEST_MAIN(cmocka_unit_test(good_documents_pass),
             cmocka_unit_test(wrong_expectations),
             cmocka_unit_test(malformed_family_cases),
             cmocka_unit_test(native_surface), cmocka_unit_test(hostile_budget))
