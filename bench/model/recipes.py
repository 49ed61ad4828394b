"""The training recipes of the small decoders (train.py runs them).

What this file owns: each recipe's shape, curriculum and learning rate
(RECIPES: m1, m1t, m2, m2g), and the functions that walk a run through
its recipe from the running answer losses a run keeps (cur): its phase,
the task draw, the learning rate, when the cool-down starts and when the
run ends. Nothing here trains; train.py owns the data, the steps and the
checkpoints. docs/model.md gives the runs.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grow  # noqa: E402
import tasks  # noqa: E402
from net import CONFIG_M1, CONFIG_M2, CONFIG_M2G, same_shape  # noqa: E402

# A recipe: the shape, the curriculum and the learning rate of one model.
# The curriculum: (context, batch size, task fraction, min tokens, max
# tokens[, position span]) per phase. A phase ends when the running answer
# loss (answers_loss: an exponential mean over ~50 steps of the answer
# bytes' loss; from adaptive_from on the worst task's running loss) is below
# answer_ok after at least its min tokens, or at its max tokens: copying
# forms cheaply at short context, then the context grows. The phase, its
# token count and the running mean are in the checkpoint, so a resumed run
# takes the same path. The end of the run: in the last phase, once it has
# run cool_start tokens and the running answer loss is below answer_ok (and,
# for a recipe with done_nats, every task's running nats an answer below
# done_nats: answer_nats), or, for a recipe with floor_len, once the run
# has spent floor_len tokens at the cosine's floor (past its horizon)
# whatever its answers, the learning rate falls linearly from the cosine's
# value to lr_end (default lr_min) over cool_len tokens, and the run ends
# there
# (m1: at the cosine's 1.8e-3 the pass-key accuracy swung between 0.78 and
# 1.0 from one evaluation to the next; the cool-down settles it; its answer
# loss was far below answer_ok by then, so it cooled from cool_start
# exactly).
# done_nats for the task recipes: greedy decoding answers right whenever
# the model gives the whole answer a probability above 1/2 (each byte's is
# then above 1/2), so at a mean of c nats an answer at most c / ln 2 of the
# answers are wrong (Markov): 0.1 ln 2 bounds the errors at 10 %, the
# target's 90 % on the training stream. A mean nats a byte does not say as
# much: m1t at 0.13-0.18 nats a byte of multikey and multiq (5-digit
# answers) answered 62-81 % and 0-19 % of its held-out haystacks.
DONE_NATS = 0.1 * math.log(2.0)

RECIPES = {
    "m1": dict(config=CONFIG_M1, tasks=None, phases=[
        (128, 16, 0.6, 600_000, 5_000_000),
        (256, 8, 0.6, 200_000, 600_000),
        (512, 4, 0.6, 0, 10**12)],
        answer_ok=0.25, lr_max=2e-3, lr_min=2e-4, horizon=20_000_000,
        cool_start=400_000, cool_len=400_000, recompute_from=1 << 30,
        eval_n=32, eval_every=0.0),
    # m2: the five tasks. Its first phase (text-heavy, 256 positions) ran
    # 2.6 M tokens without the copy forming (answer loss 2.2, digits at
    # chance); the next ones are task-heavy, at short windows whose
    # positions skip over the full 1024 (make_batch's span): the needle
    # alone at 128, then all five tasks at 384 (multiq needs 362 bytes);
    # then the real 1024 positions until the answers hold there, and a
    # short cool-down (two sequences a step keep the saved attention at
    # ~5 GB, no recompute). The needle's first 8 M tokens ended at their
    # cap just as the copy formed (answer loss 1.9 for 2.8 M tokens, 1.4
    # at 7 M, 1.0 at the cap, 25 % right); the third phase gives it up to
    # 4 M more, until it holds (the run had drawn ~50 steps of the five
    # tasks at 384 before the phase was added). The letter key joined the
    # draw 0.25 M tokens into the five-task phase (11.7 M); its keys were
    # 5 letters until 12.2 M tokens, 5 to 24 from there. The five-task
    # phase's cap was 3 M tokens until 13.0 M (1.6 M into it: answer
    # losses 1.5-1.7 on multikey, multivalue and multiq, 2.7 on vartrack);
    # 10 M from there, at ~3x the tokens/s of the real 1024. The repeat
    # task (tasks.py) joined the draw at 13.9 M: the letter key was still
    # at chance after 1.7 M tokens of it and no digit of multikey followed
    # the named key's, so the copy by content had not formed. The cosine's
    # horizon was 20 M tokens until 15.2 M (rate 3.6e-4, letters still at
    # chance after 3.5 M tokens of them); 25 M from there, a restart at
    # 7.3e-4, as m1t's letter copy formed after its restart.
    "m2": dict(config=CONFIG_M2, tasks=tasks.TASKS, phases=[
        (256, 16, 0.7, 1_500_000, 2_600_000),
        (128, 32, 0.9, 0, 8_000_000, 1024),
        (128, 32, 0.9, 0, 4_000_000, 1024),
        (384, 10, 0.9, 300_000, 10_000_000, 1024),
        (1024, 2, 0.7, 0, 10**12)], adaptive_from=3, letters_from=3,
        repeat_from=3,
        answer_ok=0.2, done_nats=DONE_NATS, lr_max=2e-3, lr_min=1e-4,
        horizon=25_000_000,
        cool_start=40_000, cool_len=60_000, recompute_from=2048,
        eval_n=8, eval_every=2400.0),
    # m1t: m1 taught the task suite. It starts from m1's trained weights
    # (--init, the m1 weights file) with a fresh optimizer: the copy is
    # there already, the formats are new. Four tasks and the letter key fit
    # 256 positions, so the first phase trains at 256 skipping over 512
    # (~3x the tokens/s of 512), tasks drawn by their running loss, until
    # the answers hold; then 512 (multiq joins) until every task's nats an
    # answer is under done_nats, and the cool-down.
    # The floor: the second run reached the cosine's floor at 25 M tokens;
    # from there to 28 M vartrack's running nats an answer swung between
    # 0.14 and 0.76 with no trend (the others at 0.003-0.07), so at a
    # constant 1e-4 it would not reach done_nats. floor_len (added at
    # 27.9 M, the run resumed from its checkpoint there) ends the run
    # after 3 M tokens at the floor with a real
    # cool-down, 2 M tokens down to 1e-5 (it was 200 k tokens to lr_min,
    # i.e. no fall at all past the horizon).
    # The recipe of a first run (bench/model/train_m1t_run1.log; its
    # checkpoint was lost with its machine at 29.8 M tokens): 256, then 2.4
    # M tokens at 512 with tasks drawn uniformly (needle 100 %, the others
    # 0-6 %: wasted), then 256 over 512 drawn by loss, then 512; the letter
    # key from that last phase (13.2 M tokens) and rate restarts at 7.3 M,
    # 16.6 M and 24.7 M. Its letter copy formed at ~17 M tokens, 4 M after
    # the letter key joined and after the keys grew from 5 letters to 5-24;
    # vartrack and multiq were its long poles (25 % and 50 % held out at
    # 29.4 M, rising). This recipe takes its lessons: letters and the
    # adaptive draw from the start, no uniform phase at 512, one cosine.
    "m1t": dict(config=CONFIG_M1, tasks=tasks.TASKS, init="m1", phases=[
        (256, 16, 0.9, 200_000, 10_000_000, 512),
        (512, 8, 0.8, 0, 10**12)], adaptive_from=0, letters_from=0,
        answer_ok=0.15, done_nats=DONE_NATS, lr_max=1e-3, lr_min=1e-4,
        horizon=25_000_000, floor_len=3_000_000, lr_end=1e-5,
        cool_start=200_000, cool_len=2_000_000, recompute_from=1 << 30,
        eval_n=16, eval_every=1200.0),
    # m2g: the second model's shape grown from m1t's weights (grow.py:
    # --init the m1t weights file; at step 0 it computes what m1t does),
    # for this project's two CPU cores, where m2 from scratch formed no
    # copy by content in 16 M tokens. The copy is m1t's; what is new is
    # 1024 positions (m1t never saw a distance above 511), a fourth KV
    # head, two more query heads per KV head and four layers, all with
    # zero output weights at the start. Windows of 512 whose positions
    # skip over 1024 (at least 1 M tokens: distances up to 1023 at 1.8x
    # the tokens/s of the real 1024, --bench: 495 against 270), then the
    # real 1024; every task from the start, drawn by its running loss; a
    # fresh optimizer at half m1t's peak rate (the weights are trained
    # already), then m1t's ending: done_nats, or 2 M tokens at the floor,
    # and a cool-down.
    # The horizon was 8 M tokens, sized for 280-320 tokens/s at 1024 (7
    # hours); from 1.9 M tokens the run went at 1,100-1,500 (train.py
    # --bf16, attention in row blocks). At 5.6 M (rate 1.4e-4) every
    # task's running nats an answer was under 0.36 but vartrack's, 1.2-1.4
    # and falling (2.7 at 1.6 M); the horizon became 16 M there (the run
    # resumed from its checkpoint; the rate rose to 3.7e-4).
    "m2g": dict(config=CONFIG_M2G, tasks=tasks.TASKS, init="m1t",
        init_config=CONFIG_M1, phases=[
            (512, 8, 0.9, 1_000_000, 6_000_000, 1024),
            (1024, 2, 0.8, 0, 10**12)],
        adaptive_from=0, letters_from=0,
        answer_ok=0.15, done_nats=DONE_NATS, lr_max=5e-4, lr_min=5e-5,
        horizon=16_000_000, floor_len=2_000_000, lr_end=1e-5,
        cool_start=200_000, cool_len=1_000_000, recompute_from=1 << 30,
        eval_n=8, eval_every=2400.0),
}
ANSWER_EMA = 0.02
# Every running answer loss starts at a uniform guess among ten bytes, the
# running nats of an answer at a uniform guess of five of them.
START_LOSS = math.log(10.0)
START_NATS = 5 * START_LOSS
# From a recipe's phase adaptive_from on, a task sequence's task is drawn in
# proportion to its running answer loss (TASK_EMA per sequence of it) plus
# TASK_FLOOR: the tasks not yet learnt get the samples, the learnt ones
# enough to stay learnt.
TASK_EMA = 0.05
TASK_FLOOR = 0.1
ANSWER_WEIGHT = 8.0
WARMUP = 200


def init_state(r, c, sd):
    """The state dict a recipe with an init starts from, given the init
    file's shape c and weights sd: sd itself where c is the recipe's
    shape, sd grown to it (grow.py) where c is its init_config; else
    ValueError."""
    if same_shape(c, r["config"]):
        return sd
    if "init_config" in r and same_shape(c, r["init_config"]):
        return grow.grow(sd, c, r["config"])
    raise ValueError(f"shape {c}, the recipe starts from "
                     f"{r.get('init_config', r['config'])}")


def phase_of(ph):
    """(context, batch, task fraction, min tokens, max tokens, span): a
    phase's sixth entry, the position span, defaults to its context."""
    return tuple(ph) + (ph[0],) * (6 - len(ph))


def rate_of(r):
    """The recipe's learning-rate schedule, as the log records it."""
    return {k: r[k] for k in ("lr_max", "lr_min", "horizon", "floor_len",
                              "lr_end", "cool_len") if k in r}


def lr_at(r, step, tokens, cur):
    """The cosine from lr_max to lr_min over the recipe's horizon, after a
    linear warmup of WARMUP steps; a run resumed from a snapshot (its
    optimizer fresh, cur's warm_from its first step) warms up again to the
    cosine's value; the cool-down's linear fall to lr_end (lr_min where
    the recipe has none)."""
    if "warm_from" not in cur and step < WARMUP:
        return r["lr_max"] * (step + 1) / WARMUP
    f = min(1.0, tokens / r["horizon"])
    lr = r["lr_min"] + 0.5 * (r["lr_max"] - r["lr_min"]) * (1 + math.cos(math.pi * f))
    if "cool_from" in cur:
        c = min(1.0, (cur["phase_tokens"] - cur["cool_from"]) / r["cool_len"])
        lr = lr * (1.0 - c) + r.get("lr_end", r["lr_min"]) * c
    warm = step - cur.get("warm_from", step - WARMUP)
    if warm < WARMUP:
        lr *= (warm + 1) / WARMUP
    return lr


def phase_tasks(r, cur):
    """The tasks drawn in the current phase: the recipe's, from its
    letters_from phase on tasks.LETTER_KEY and from its repeat_from phase
    on tasks.REPEAT (both training only)."""
    if not r["tasks"]:
        return r["tasks"]
    extra = tuple(t for t, k in ((tasks.LETTER_KEY, "letters_from"),
                                 (tasks.REPEAT, "repeat_from"))
                  if cur["phase"] >= r.get(k, 1 << 30))
    return tuple(r["tasks"]) + extra


def task_weights(r, cur):
    """{task: draw weight} in the current phase, None for a uniform draw."""
    if not r["tasks"] or cur["phase"] < r.get("adaptive_from", 1 << 30):
        return None
    ema = cur.get("task_ema", {})
    return {t: ema.get(t, START_LOSS) + TASK_FLOOR
            for t in phase_tasks(r, cur)}


def update_task_ema(cur, drawn, ce, w):
    """Each task sequence moves its task's running means (ce and w: the
    batch's per-target losses and weights, B x T): task_ema by its mean
    answer loss a byte, task_nats by its answer loss summed over the bytes
    of an answer (the sum over its answer bytes over its number of answers,
    the runs of answer bytes: multiq's four)."""
    ema = cur.setdefault("task_ema", {})
    nats = cur.setdefault("task_nats", {})
    for i, t in enumerate(drawn):
        if t is None:
            continue
        a = w[i] > 1
        if a.any():
            e = ema.get(t, START_LOSS)
            ema[t] = e + TASK_EMA * (ce[i][a].mean().item() - e)
            runs = int(a[0]) + int((a[1:] & ~a[:-1]).sum())
            n = nats.get(t, START_NATS)
            nats[t] = n + TASK_EMA * (ce[i][a].sum().item() / runs - n)


def answers_loss(r, cur):
    """The running answer loss that ends a phase and starts the cool-down:
    from adaptive_from on, the worst of the running losses of the recipe's
    tasks that fit the phase's context (the training-only tasks left out:
    their longer answers would outweigh a task not learnt yet in a mean
    over answer bytes); before, the mean over every answer byte."""
    if not r["tasks"] or cur["phase"] < r.get("adaptive_from", 1 << 30):
        return cur["answer_ema"]
    return worst_task(r, cur, "task_ema", START_LOSS)


def worst_task(r, cur, key, start):
    """The worst of the running means cur[key] (start where a task has none
    yet) among the recipe's tasks that fit the phase's context: the
    training-only tasks are left out."""
    T = r["phases"][cur["phase"]][0]
    means = cur.get(key, {})
    return max(means.get(t, start) for t in r["tasks"] if tasks.fits(t, T))


def answer_nats(r, cur):
    """The worst running nats an answer among the recipe's tasks that fit
    the phase's context (the training-only tasks left out)."""
    return worst_task(r, cur, "task_nats", START_NATS)


def cool_down_starts(r, cur, tokens=0):
    """Why the cool-down begins now (None: it does not): not begun yet, the
    last phase, cool_start tokens into it, and either its answers hold
    (answers_loss below answer_ok and, where the recipe has done_nats, its
    answer_nats below that) or, where the recipe has floor_len, the run's
    tokens are floor_len past the cosine's horizon."""
    if ("cool_from" in cur or cur["phase"] != len(r["phases"]) - 1
            or cur["phase_tokens"] < r["cool_start"]):
        return None
    if (answers_loss(r, cur) < r["answer_ok"]
            and ("done_nats" not in r or answer_nats(r, cur) < r["done_nats"])):
        return "the answers hold"
    if "floor_len" in r and tokens >= r["horizon"] + r["floor_len"]:
        return f"{r['floor_len']} tokens at the floor"
    return None


def finished(r, cur):
    return ("cool_from" in cur
            and cur["phase_tokens"] >= cur["cool_from"] + r["cool_len"])
