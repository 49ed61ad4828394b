"""The training side of bench/model (train.py, tasks.py, export.py) where a
silent mistake would cost a training run: the position skips of
make_batch, its task draw, the model's position ids, the recipes' phases,
the end of a run, the snapshots, the text file and time limit of a run on
another machine and the weights file's reader. Run by ctest
(test_model_train_data); skipped without torch. No KJV text is needed: the
haystack here is a synthetic one."""
import os
import random
import subprocess
import sys

try:
    import pytest
except ImportError:
    if __name__ == "__main__":  # ctest: skipped, saying why
        print("skipped: python3-pytest is not installed")
        sys.exit(77)
    raise

torch = pytest.importorskip("torch", reason="python3-torch is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir,
                                          "bench", "model"))
sys.path.insert(0, MODEL_DIR)
import export  # noqa: E402
import grow  # noqa: E402
import tasks  # noqa: E402
import net  # noqa: E402
import recipes  # noqa: E402
import train  # noqa: E402

TEXT = b"".join(b"verse %d of a haystack that is only text.\n" % i
                for i in range(4000))
SMALL = dict(net.CONFIG_M2, dim=32, n_layers=2, ffn_dim=48, max_ctx=256)


def test_sample_tail_marks_the_first_question():
    rng = random.Random(3)
    for task in tasks.TASKS:
        for _ in range(20):
            seq, spans, tail = tasks.sample_tail(rng, TEXT, task, 384)
            assert len(seq) == 385
            assert seq[tail:tail + 1] == b"\n"  # every question starts so
            assert all(tail < a < e <= 385 for a, e in spans)
            # sample() draws the same sequence from the same state
    r1, r2 = random.Random(9), random.Random(9)
    assert tasks.sample(r1, TEXT, "multiq", 384) == \
        tasks.sample_tail(r2, TEXT, "multiq", 384)[:2]


def test_position_skips_keep_two_contiguous_pieces():
    """span > T: positions increase, jump once at a cut no later than the
    first question, stay below span; the bytes are what they were."""
    rng = random.Random(5)
    T, span = 384, 1024
    x, y, w, pos = train.make_batch(rng, TEXT, 64, T, 0.9, 8.0, tasks.TASKS,
                                    span)
    assert pos.shape == (64, T) and pos.dtype == torch.int64
    assert int(pos.max()) < span and bool((pos[:, 0] == 0).all())
    d = pos[:, 1:] - pos[:, :-1]
    assert bool((d >= 1).all())
    assert bool(((d > 1).sum(1) <= 1).all())
    assert int((d > 1).sum()) > 32  # most sequences do skip
    assert bool((y[:, :-1] == x[:, 1:]).all())
    for i in range(64):
        answers = (w[i] > 1).nonzero().flatten()
        if answers.numel() and bool((d[i] > 1).any()):
            # a task sequence that skips: the cut precedes its questions
            cut = int((d[i] > 1).nonzero()[0]) + 1
            assert 1 <= cut <= int(answers[0])
    # span == T and None: no position ids, the batch the old recipes drew
    r1, r2 = random.Random(1), random.Random(1)
    a = train.make_batch(r1, TEXT, 8, 128, 0.5, 8.0, tasks.TASKS, 128)
    b = train.make_batch(r2, TEXT, 8, 128, 0.5, 8.0, tasks.TASKS)
    assert a[3] is None and b[3] is None
    assert bool((a[0] == b[0]).all()) and bool((a[2] == b[2]).all())


def test_tasks_drawn_by_their_running_loss():
    """task_weights draws in proportion to the weights among the tasks that
    fit; drawn names each sequence's task; the running losses move toward
    each drawn task's answer loss, and only from adaptive_from on."""
    rng = random.Random(3)
    weights = {t: 0.01 for t in tasks.TASKS}
    weights["vartrack"] = 10.0
    drawn = []
    x, y, w, pos = train.make_batch(rng, TEXT, 200, 256, 0.5, 8.0, tasks.TASKS,
                                    None, weights, drawn)
    assert len(drawn) == 200
    n_task = sum(t is not None for t in drawn)
    assert 60 < n_task < 140
    assert "multiq" not in drawn  # does not fit 256
    assert drawn.count("vartrack") > 0.9 * n_task
    for i, t in enumerate(drawn):  # text rows carry no answer weight
        assert bool((w[i] > 1).any()) == (t is not None)
    r = recipes.RECIPES["m2"]
    assert recipes.task_weights(r, dict(phase=r["adaptive_from"] - 1)) is None
    assert recipes.task_weights(recipes.RECIPES["m1"], dict(phase=2)) is None
    cur = dict(phase=r["adaptive_from"])
    tw = recipes.task_weights(r, cur)
    assert set(tw) == set(recipes.phase_tasks(r, cur)) >= set(tasks.TASKS)
    assert len(set(tw.values())) == 1
    ce = torch.zeros(3, 8)
    wt = torch.ones(3, 8)
    ce[0, 2:4], wt[0, 2:4] = 5.0, 8.0   # a vartrack answer at loss 5
    ce[1, 5], wt[1, 5] = 0.0, 8.0       # a needle answer at loss 0
    recipes.update_task_ema(cur, ["vartrack", "needle", None], ce, wt)
    tw = recipes.task_weights(r, cur)
    assert tw["vartrack"] > tw["multikey"] > tw["needle"] > 0
    # nats an answer: the answer bytes' sum over the runs of answer bytes
    n0 = recipes.START_NATS
    assert cur["task_nats"]["vartrack"] == pytest.approx(
        n0 + recipes.TASK_EMA * (10.0 - n0))
    assert cur["task_nats"]["needle"] == pytest.approx(
        n0 * (1 - recipes.TASK_EMA))
    ce, wt = torch.zeros(1, 12), torch.ones(1, 12)
    ce[0, 0:2], wt[0, 0:2] = 1.0, 8.0   # two answers, as multiq's:
    ce[0, 5:8], wt[0, 5:8] = 2.0, 8.0   # 2 + 6 nats over 2 answers
    recipes.update_task_ema(cur, ["multiq"], ce, wt)
    assert cur["task_nats"]["multiq"] == pytest.approx(
        n0 + recipes.TASK_EMA * (4.0 - n0))


def test_letter_key_trains_from_its_phase():
    """The letter key is the needle's layout with LETTER_MIN to LETTER_MAX
    upper-case letters; a recipe draws it from letters_from on, never
    before, never in eval."""
    rng = random.Random(4)
    lengths = set()
    for _ in range(200):
        seq, spans = tasks.sample(rng, TEXT, tasks.LETTER_KEY, 256)
        (a, e), = spans
        key = seq[a:e - 1].decode()
        lengths.add(len(key))
        assert key.isalpha() and key.isupper()
        assert tasks.PASS_NEEDLE.format(k=key).encode() in seq
        assert seq[:a].endswith(tasks.PASS_Q.encode())
    assert lengths == set(range(tasks.LETTER_MIN, tasks.LETTER_MAX + 1))
    assert tasks.fits(tasks.LETTER_KEY, 256)
    assert tasks.LETTER_KEY not in tasks.TASKS
    for name in ("m1t", "m2"):
        r = recipes.RECIPES[name]
        lf = r["letters_from"]
        assert tasks.LETTER_KEY not in recipes.phase_tasks(r, dict(phase=lf - 1))
        cur = dict(phase=lf)
        assert tasks.LETTER_KEY in recipes.phase_tasks(r, cur)
        assert tasks.LETTER_KEY in recipes.task_weights(r, cur)
    assert recipes.phase_tasks(recipes.RECIPES["m1"], dict(phase=2)) is None


def test_repeat_trains_from_its_phase():
    """repeat says a string of one alphabet once and asks for it again; a
    recipe draws it from repeat_from on (m2 only), never in eval."""
    rng = random.Random(5)
    lengths, alphabets = set(), set()
    for _ in range(400):
        seq, spans = tasks.sample(rng, TEXT, tasks.REPEAT, 384)
        (a, e), = spans
        s = seq[a:e - 1].decode()
        lengths.add(len(s))
        alpha = [x for x in tasks.REPEAT_ALPHABETS if set(s) <= set(x)]
        assert len(alpha) == 1
        alphabets.add(alpha[0])
        assert tasks.TEXT_NEEDLE.format(k=s).encode() in seq
        assert seq[:a].endswith(tasks.TEXT_Q.encode()) and seq[e - 1:e] == b"."
    assert lengths == set(range(tasks.REPEAT_MIN, tasks.REPEAT_MAX + 1))
    assert alphabets == set(tasks.REPEAT_ALPHABETS)
    assert tasks.fits(tasks.REPEAT, 256) and tasks.REPEAT not in tasks.TASKS
    r = recipes.RECIPES["m2"]
    rf = r["repeat_from"]
    assert tasks.REPEAT not in recipes.phase_tasks(r, dict(phase=rf - 1))
    assert tasks.REPEAT in recipes.task_weights(r, dict(phase=rf))
    m1t = recipes.RECIPES["m1t"]
    assert tasks.REPEAT not in recipes.phase_tasks(m1t, dict(phase=10))


def test_position_ids_are_what_the_runtime_computes():
    """pos = 0..T-1 gives the logits of no pos; a shifted second piece gives
    the logits of the same bytes placed that far apart (rope is relative:
    shifting every position by one amount changes nothing)."""
    torch.manual_seed(0)
    m = net.Model(SMALL).eval()
    x = torch.randint(0, 256, (2, 40))
    with torch.no_grad():
        a = m(x)
        b = m(x, pos=torch.arange(40).expand(2, 40))
        assert torch.equal(a, b)
        c = m(x, pos=torch.arange(40).expand(2, 40) + 17)
        assert float((a - c).abs().max()) < 1e-4
        p = torch.arange(40)
        p[20:] += 60
        d = m(x, pos=p.expand(2, 40))
        assert torch.equal(a[:, :20], d[:, :20])
        assert float((a[:, 20:] - d[:, 20:]).abs().max()) > 1e-3


def test_phases_default_span_and_recipes_fit():
    assert recipes.phase_of((128, 4, 0.5, 0, 10)) == (128, 4, 0.5, 0, 10, 128)
    assert recipes.phase_of((128, 4, 0.5, 0, 10, 1024))[5] == 1024
    for name, r in recipes.RECIPES.items():
        for ph in r["phases"]:
            T, B, pn, lo, hi, span = recipes.phase_of(ph)
            assert T <= span <= r["config"]["max_ctx"], name
            assert lo <= hi, name
            if r["tasks"]:
                assert any(tasks.fits(t, T) for t in r["tasks"]), name
        if r["tasks"]:  # every task is trained at some phase
            assert all(any(tasks.fits(t, ph[0]) for ph in r["phases"])
                       for t in r["tasks"]), name
    m2 = net.CONFIG_M2
    assert m2["n_layers"] >= 12 and m2["n_kv_heads"] >= 4
    assert m2["n_heads"] == 4 * m2["n_kv_heads"] and m2["max_ctx"] >= 1024


def test_cool_down_waits_for_the_answers():
    """The last phase cools only once its answer loss is below answer_ok:
    a run whose copy has not formed keeps the cosine's rate and goes on."""
    r = dict(recipes.RECIPES["m1t"])
    last = len(r["phases"]) - 1
    ok = r["answer_ok"] / 2
    cur = dict(phase=last, phase_tokens=r["cool_start"] + 10 * r["cool_len"],
               answer_ema=ok)
    cosine = recipes.lr_at(r, 10_000, 3_000_000, cur)
    # adaptive phases judge by the worst task: none measured yet
    assert not recipes.cool_down_starts(r, cur) and not recipes.finished(r, cur)
    assert cosine > 5 * r["lr_min"]
    # one task not learnt holds the run back, whatever the mean
    cur["task_ema"] = {t: ok for t in r["tasks"]}
    cur["task_ema"]["vartrack"] = 1.5
    assert not recipes.cool_down_starts(r, cur)
    # the training-only tasks do not count
    cur["task_ema"].update(vartrack=ok, **{tasks.LETTER_KEY: 3.0,
                                           tasks.REPEAT: 3.0})
    assert recipes.answers_loss(r, cur) == ok
    # low nats a byte is not enough: each task's nats an answer must be
    # below done_nats too (none measured yet: a guess of five digits)
    assert not recipes.cool_down_starts(r, cur)
    done = r["done_nats"] / 2
    cur["task_nats"] = {t: done for t in r["tasks"]}
    cur["task_nats"]["multiq"] = 0.2
    assert recipes.answer_nats(r, cur) == 0.2
    assert not recipes.cool_down_starts(r, cur)
    cur["task_nats"].update(multiq=done, **{tasks.LETTER_KEY: 9.0,
                                            tasks.REPEAT: 9.0})
    assert recipes.answer_nats(r, cur) == done
    assert recipes.cool_down_starts(r, cur)
    cur["cool_from"] = cur["phase_tokens"]
    assert not recipes.cool_down_starts(r, cur)
    assert recipes.lr_at(r, 10_000, 3_000_000, cur) == pytest.approx(cosine)
    cur["phase_tokens"] += r["cool_len"] // 2
    half = recipes.lr_at(r, 10_000, 3_000_000, cur)
    assert r["lr_min"] < half < cosine and not recipes.finished(r, cur)
    cur["phase_tokens"] += r["cool_len"] // 2
    assert recipes.finished(r, cur)
    # the floor: floor_len tokens past the horizon cool the run whatever
    # its answers, down to lr_end
    assert "floor_len" in r and r["lr_end"] < r["lr_min"]
    bad = dict(cur, task_nats=dict(cur["task_nats"], vartrack=0.5))
    del bad["cool_from"]
    past = r["horizon"] + r["floor_len"]
    assert not recipes.cool_down_starts(r, bad, past - 1)
    assert recipes.cool_down_starts(r, bad, past) == (
        f"{r['floor_len']} tokens at the floor")
    bad["cool_from"] = bad["phase_tokens"]
    assert recipes.lr_at(r, 10_000, past, bad) == pytest.approx(r["lr_min"])
    bad["phase_tokens"] += r["cool_len"]
    assert recipes.lr_at(r, 10_000, past, bad) == pytest.approx(r["lr_end"])
    assert recipes.finished(r, bad)
    # m1 and m2 have no floor: their cool-down waits for the answers
    for name in ("m1", "m2"):
        assert "floor_len" not in recipes.RECIPES[name]
    # an earlier phase never cools, whatever its answer loss
    assert not recipes.cool_down_starts(r, dict(cur, phase=0, answer_ema=0.0))
    # before adaptive_from (and for m1) the mean over answer bytes decides
    m2 = recipes.RECIPES["m2"]
    assert m2["adaptive_from"] > 0
    assert recipes.answers_loss(m2, dict(cur, phase=0, answer_ema=0.7)) == 0.7
    m1 = recipes.RECIPES["m1"]
    assert recipes.answers_loss(m1, dict(phase=2, answer_ema=0.1)) == 0.1


def test_answers_loss_leaves_out_tasks_that_do_not_fit():
    """At 256 positions multiq does not fit: m1t's first phase ends on the
    other four."""
    r = recipes.RECIPES["m1t"]
    cur = dict(phase=0, answer_ema=2.0,
               task_ema={t: 0.05 for t in tasks.TASKS})
    cur["task_ema"]["multiq"] = 2.0
    assert r["phases"][0][0] == 256 and not tasks.fits("multiq", 256)
    assert recipes.answers_loss(r, cur) == 0.05


def test_weights_file_round_trip(tmp_path):
    torch.manual_seed(1)
    m = net.Model(SMALL).eval()
    f = str(tmp_path / "m.pkvm")
    export.write_weights(f, m, dict(step=12, tokens=3456))
    c, sd, step, tokens = export.read_weights(f)
    assert (step, tokens) == (12, 3456)
    assert net.same_shape(c, SMALL)
    for k, v in m.state_dict().items():
        assert torch.equal(sd[k], v), k
    raw = open(f, "rb").read()
    open(f, "wb").write(raw[:-4])
    with pytest.raises(ValueError):
        export.read_weights(f)
    open(f, "wb").write(b"PKVX" + raw[4:])
    with pytest.raises(ValueError):
        export.read_weights(f)


def test_snapshot_resumes_the_run(tmp_path):
    """A snapshot (what a run resumes from on another machine) gives back
    the weights exactly and the run's place in its recipe; the resumed
    run's fresh optimizer warms up again to the cosine's rate."""
    torch.manual_seed(2)
    m = net.Model(SMALL)
    r = recipes.RECIPES["m1t"]
    cur = dict(phase=1, phase_tokens=5000, answer_ema=0.3,
               task_ema={"needle": 0.01}, task_nats={"needle": 0.05})
    f = str(tmp_path / "resume.pt")
    train.save_snapshot(f, m, 7000, 9_000_000, 3600.0, cur, "m1t",
                        dict(init_step=2283, init_tokens=4675584))
    m2 = net.Model(SMALL)
    step, tokens, elapsed, cur2, meta = train.load_snapshot(f, m2, "m1t")
    assert (step, tokens, elapsed) == (7000, 9_000_000, 3600.0)
    assert cur2 == dict(cur, warm_from=7000)
    assert meta == dict(init_step=2283, init_tokens=4675584)
    for k, v in m.state_dict().items():
        assert torch.equal(m2.state_dict()[k], v), k
    assert os.path.getsize(f) < 1.2 * 4 * sum(p.numel() for p in m.parameters()) + 8192
    cosine = recipes.lr_at(r, 7000, 9_000_000, cur)
    assert recipes.lr_at(r, 7000, 9_000_000, cur2) == pytest.approx(cosine / recipes.WARMUP)
    half = 7000 + recipes.WARMUP // 2
    assert recipes.lr_at(r, half, 9_000_000, cur2) == pytest.approx(
        recipes.lr_at(r, half, 9_000_000, cur) * (recipes.WARMUP // 2 + 1) / recipes.WARMUP)
    done = 7000 + recipes.WARMUP
    assert recipes.lr_at(r, done, 9_000_000, cur2) == recipes.lr_at(r, done, 9_000_000, cur)
    # a run that never resumed warms up from step 0 only
    assert recipes.lr_at(r, 0, 0, dict(phase=0)) == r["lr_max"] / recipes.WARMUP
    with pytest.raises(ValueError):
        train.load_snapshot(f, m2, "m2")


def test_text_file_and_time_limit(tmp_path):
    """--text reads the text command's saved output as the command's own
    would be read (Revelation held out); --max-seconds ends the run with
    its snapshot written and says it stopped, not that it is done."""
    gen = [b"Ge%d:1 And the earth was %d days without form." % (i, i)
           for i in range(1, 200)]
    rev = [b"Re%d:1 And I saw a new heaven and a new earth %d." % (i, i)
           for i in range(1, 120)]
    dump = tmp_path / "kjv.txt"
    dump.write_bytes(b"\n".join(gen[:100] + rev + gen[100:]) + b"\n\n")
    text, held = train.load_kjv(str(dump))
    assert text == b"\n".join(g.partition(b" ")[2] for g in gen) + b"\n"
    assert held == b"\n".join(r.partition(b" ")[2] for r in rev) + b"\n"
    ck = tmp_path / "ck"
    proc = subprocess.run(
        [sys.executable, os.path.join(MODEL_DIR, "train.py"), "--model", "m1",
         "--text", str(dump), "--ckpt-dir", str(ck), "--max-seconds", "0",
         "--threads", "1"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    log = (ck / "train.log").read_text()
    assert "# stopped at --max-seconds, step 0 tokens 0" in log
    assert "# done" not in log
    step, tokens, _, cur, _ = train.load_snapshot(
        str(ck / "resume.pt"), net.Model(net.CONFIG_M1), "m1")
    assert (step, tokens, cur["phase"]) == (0, 0, 0)


def test_grow_keeps_what_the_model_computes():
    """A model grown to more layers, KV heads, query heads per KV head and
    positions gives the source's logits at step 0; its new query heads and
    layers add nothing (zero output weights) until training moves them;
    a shape that is not a growth is refused."""
    src = dict(net.CONFIG_M1, dim=32, n_layers=3, n_heads=4, n_kv_heads=2,
               head_dim=8, ffn_dim=48, max_ctx=64)
    dst = dict(src, n_layers=5, n_heads=12, n_kv_heads=3, max_ctx=128)
    torch.manual_seed(5)
    a = net.Model(src)
    with torch.no_grad():  # weights far from the init, as trained ones are
        for n, t in a.named_parameters():
            t.normal_(1.0 if n.endswith("norm.weight") else 0.0, 0.3)
    b = net.Model(dst)
    sd = grow.grow(a.state_dict(), src, dst)
    b.load_state_dict(sd)
    a.eval(), b.eval()
    x = torch.randint(0, 256, (2, 64))
    with torch.no_grad():
        la, lb = a(x), b(x)
    assert (la - lb).abs().max().item() <= 1e-4 * max(1.0, la.abs().max().item())
    assert grow.place(3, 5) == [0, 2, 4]
    hd = src["head_dim"]
    # layer 1 is new: both residual branches start at zero
    assert not sd["layers.1.wo.weight"].any() and not sd["layers.1.w2.weight"].any()
    # in a kept layer, KV head 1's query slots 4 and 5 are source heads 2
    # and 3; slots 6 and 7 and the new KV head's 8-11 write nothing
    wo, swo = sd["layers.2.wo.weight"], a.state_dict()["layers.1.wo.weight"]
    assert torch.equal(wo[:, 4 * hd:6 * hd], swo[:, 2 * hd:4 * hd])
    assert not wo[:, 6 * hd:8 * hd].any() and not wo[:, 8 * hd:].any()
    assert sd["layers.2.wq.weight"][6 * hd:].abs().sum() > 0
    # the new weights are seeded: the same growth twice is the same model
    again = grow.grow(a.state_dict(), src, dst)
    assert all(torch.equal(sd[k], again[k]) for k in sd)
    for bad in (dict(dst, head_dim=16), dict(dst, n_layers=2),
                dict(dst, n_heads=3)):
        with pytest.raises(ValueError):
            grow.grow(a.state_dict(), src, bad)


def test_m2g_starts_from_m1t_grown():
    """Recipe m2g is the second model's shape (12 layers, 4 KV heads of 4
    query heads, 1024 positions) grown from m1t's weights file: init_state
    grows an m1-shape file, takes one of its own shape as it is, and
    refuses another."""
    r = recipes.RECIPES["m2g"]
    c = r["config"]
    assert c["n_layers"] >= 12 and c["n_kv_heads"] >= 4
    assert c["n_heads"] == 4 * c["n_kv_heads"] and c["max_ctx"] >= 1024
    assert r["init"] == "m1t" and r["init_config"] == net.CONFIG_M1
    grow.check(r["init_config"], c)
    small = dict(net.CONFIG_M1, n_layers=1, ffn_dim=8)
    with pytest.raises(ValueError):
        recipes.init_state(r, small, {})
    sd = net.Model(net.CONFIG_M1).state_dict()
    grown = recipes.init_state(r, net.CONFIG_M1, sd)
    net.Model(c).load_state_dict(grown)
    assert recipes.init_state(r, c, grown) is grown
    # the committed m1t file (its rope_theta and norm_eps read back as
    # float32) grows too
    c1t, sd1t, _, _ = export.read_weights(
        os.path.join(MODEL_DIR, "data", "model1t.pkvm"))
    net.Model(c).load_state_dict(recipes.init_state(r, c1t, sd1t))


def test_log_upto_drops_steps_past_the_checkpoint():
    """A run killed after its checkpoint at step 508 logged 520 and 540 and
    an evaluation at 540; resumed from 508 its log keeps what 508 saw."""
    lines = ["# start\n", "# step tokens\n", "500 1 2\n", "# task x\n",
             "520 3 4\n", "540 5 6\n", "# task y\n"]
    assert train.log_upto(lines, 508) == lines[:4]
    assert train.log_upto(lines, 540) == lines
    assert train.log_upto(lines, 499) == lines[:2]


def test_bf16_autocast_keeps_the_head_float32():
    """train.py --bf16: the matrix products under autocast, the output head
    (and so the loss) in float32, the logits near float32's."""
    m = net.Model(dict(net.CONFIG_M1, n_layers=2, max_ctx=64))
    x = torch.randint(0, 256, (2, 64), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = m(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lg = m(x)
    assert ref.dtype == lg.dtype == torch.float32
    assert (lg - ref).abs().max().item() < 0.05


def test_blocked_attention_is_the_full_product():
    """Block's attention in ATTN_ROWS-row blocks (training, logits) gives
    what the one T x T product (want_attn) gives, T a multiple of the
    block or not, with position skips too."""
    m = net.Model(dict(net.CONFIG_M1, n_layers=2, max_ctx=1024))
    for p in m.parameters():
        torch.nn.init.normal_(p, std=0.2)
    g = torch.Generator().manual_seed(4)
    for T in (net.ATTN_ROWS * 3, net.ATTN_ROWS * 2 + 37, 40):
        x = torch.randint(0, 256, (2, T), generator=g)
        pos = torch.arange(T).repeat(2, 1)
        pos[:, T // 2:] += 100
        for ps in (None, pos):
            with torch.no_grad():
                lg = m(x, pos=ps)
                full, _ = m(x, want_attn=True, pos=ps)
            assert (lg - full).abs().max().item() < 1e-4, T


def test_committed_weights_read_back():
    c, sd, step, tokens = export.read_weights(
        os.path.join(MODEL_DIR, "data", "model.pkvm"))
    assert c["n_layers"] == net.CONFIG_M1["n_layers"] and step > 0 < tokens
    net.Model(c).load_state_dict(sd)


def logged_run(weights, source, log, shape):
    """A committed weights file is its run as the committed log ended it:
    the recipe's shape, and a header counting the steps and tokens of the
    file the run started from (--init) plus those of the log's `# done`
    line (the run ended by its recipe, not stopped)."""
    c, sd, step, tokens = export.read_weights(
        os.path.join(MODEL_DIR, "data", weights))
    assert net.same_shape(c, shape)
    net.Model(c).load_state_dict(sd)
    _, _, init_step, init_tokens = export.read_weights(
        os.path.join(MODEL_DIR, "data", source))
    with open(os.path.join(MODEL_DIR, log)) as f:
        last = f.read().rstrip("\n").rsplit("\n", 1)[-1].split()
    assert last[:2] == ["#", "done"], last
    done_step, done_tokens = int(last[3]), int(last[5])
    assert (step, tokens) == (init_step + done_step, init_tokens + done_tokens)


def test_committed_m1t_is_its_logged_run():
    """model1t.pkvm: m1's shape, m1's training plus the m1t log's."""
    logged_run("model1t.pkvm", "model.pkvm", "train_m1t.log", net.CONFIG_M1)


def test_committed_m2g_is_its_logged_run():
    """model2.pkvm: m2g's shape, m1t's training (the file it grew from)
    plus the m2g log's."""
    logged_run("model2.pkvm", "model1t.pkvm", "train_m2g.log",
               recipes.RECIPES["m2g"]["config"])


if __name__ == "__main__":
    # ctest runs this file: pytest on it (without torch the module is
    # skipped inside pytest, its reason printed by -rs); nothing collected
    # counts as skipped
    rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", __file__])
    sys.exit(77 if rc == 5 else int(rc))
