#!/usr/bin/python3
"""Train the small byte-level Llama-style decoders that bench/model runs in C.

What this file owns: the runs of the recipes (--model m1, m1t, m2 or m2g;
their shape, curriculum and learning rate are recipes.py, the model itself
net.py), the training data
(English text from Debian's bible-kjv package mixed with synthetic
retrieval tasks: m1 the pass key only, m1t, m2 and m2g the five tasks of
tasks.py), and resumable training with periodic checkpoints.
docs/model.md gives the commands and the runs.

Data: `apt-get install bible-kjv` (pulls bible-kjv-text); the text is dumped
once with `/usr/bin/bible -f gen1:1-rev22:21` (31,102 verses, 4.4 MB). The
book of Revelation (Re* verses) is held out for evaluation; the rest trains.

Run (niced, background, resumable; rerun the same command to resume):
  nice -n 19 /usr/bin/python3 bench/model/train.py --model m1 --ckpt-dir CKPT
  nice -n 19 /usr/bin/python3 bench/model/train.py --model m2 --ckpt-dir CKPT2
The script resumes from CKPT_DIR/last.pt when it exists; the training log is
appended to CKPT_DIR/train.log (copied into the repo as bench/model/train.log,
train_m1t.log, train_m2.log and train_m2g.log), its lines past last.pt's step
dropped when a run resumes from it. On another machine a run goes on from the
snapshot CKPT_DIR/resume.pt it writes beside last.pt (weights and place in
the recipe, no optimizer state; committed as bench/model/data/RECIPE_resume.pt):
  --resume SNAPSHOT, which wins over --init. --device cuda runs the same
recipe on a GPU; on a machine without bible-kjv --text FILE reads the
command's output saved here, and --max-seconds ends the run in time, with
its checkpoint and snapshot written.
"""
import argparse
import math
import os
import random
import subprocess
import sys
import time

# Before torch loads: on a shared, busy machine spinning worker threads burn
# most of the CPU the niced run gets (measured here: 361 tokens per CPU-second
# with the defaults, 1,913 with these two settings). torch's own two threads
# do the work; OpenBLAS is kept single-threaded beneath them.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tasks  # noqa: E402
from net import Model  # noqa: E402
from recipes import (ANSWER_EMA, ANSWER_WEIGHT, RECIPES,  # noqa: E402
                     START_LOSS, WARMUP, answer_nats, answers_loss,
                     cool_down_starts, finished, init_state, lr_at,
                     phase_of, phase_tasks, rate_of, task_weights,
                     update_task_ema)

# ------------------------------------------------------------------ data ---

KJV_CMD = ["/usr/bin/bible", "-f", "gen1:1-rev22:21"]


def load_kjv(path=None):
    """Return (train_text, heldout_text) as bytes. Verse references are
    stripped; one verse per line. Revelation is held out. path: a file
    holding what KJV_CMD prints (for a machine without bible-kjv, such as
    a GPU machine); None runs KJV_CMD."""
    if path:
        with open(path, "rb") as f:
            out = f.read()
    else:
        out = subprocess.run(KJV_CMD, check=True, capture_output=True).stdout
    train, held = [], []
    for line in out.split(b"\n"):
        if not line.strip():
            continue
        ref, _, verse = line.partition(b" ")
        (held if ref.startswith(b"Re") else train).append(verse)
    return b"\n".join(train) + b"\n", b"\n".join(held) + b"\n"


NEEDLE_FMT = " The pass key is {k}. Remember it. "
QUESTION = "\nWhat is the pass key? The pass key is "


def passkey_sample(rng, text, T, depth=None, key=None):
    """One training/eval sequence of exactly T+1 bytes: text haystack with
    the needle at a random (or given, 0..1) depth, the question, the 5-digit
    answer and '.'. Returns (bytes, answer_start) where answer_start indexes
    the first answer byte in the T+1 sequence."""
    if key is None:
        key = "%05d" % rng.randrange(100000)
    needle = NEEDLE_FMT.format(k=key).encode()
    tail = QUESTION.encode() + key.encode() + b"."
    hay_len = T + 1 - len(needle) - len(tail)
    start = rng.randrange(len(text) - hay_len - 1)
    hay = text[start:start + hay_len]
    if depth is None:
        depth = rng.random()
    pos = int(round(depth * hay_len))
    seq = hay[:pos] + needle + hay[pos:] + tail
    assert len(seq) == T + 1
    return seq, T + 1 - 6


def make_batch(rng, text, B, T, p_needle, answer_weight, task_names=None,
               span=None, task_weights=None, drawn=None):
    """B sequences of T+1 bytes: with probability p_needle a task sequence
    (m1: the pass key; m2: a task drawn uniformly from task_names among
    those that fit T), else plain text. Returns inputs, targets, the
    per-target loss weights (answer_weight on answer bytes) and the
    position ids (None when span is None or T: positions 0 .. T-1).

    span > T spreads the T positions over span (positional skip-wise
    training, PoSE): the positions from a cut c on are shifted by a jump
    J, c uniform in [1, tail] (tail: where a task's questions begin, T for
    text), J uniform in [0, span - T]. Each piece stays contiguous, so the
    text reads as it would; a question after the cut sees its needles up
    to span - 1 positions back, as in a span-long context, at the cost of a
    T-long one.

    task_weights ({task: weight}) draws a task in proportion to its weight
    among those that fit instead of uniformly; drawn (a list) receives each
    sequence's task, None for text."""
    xs, ws, ps = [], [], []
    skip = span is not None and span > T
    for _ in range(B):
        w = np.ones(T, dtype=np.float32)
        tail = T
        if rng.random() < p_needle:
            if task_names is None:
                seq, a = passkey_sample(rng, text, T)
                spans = [(a, a + 5)]
                if drawn is not None:
                    drawn.append("passkey")
            else:
                fit = [t for t in task_names if tasks.fits(t, T)]
                if task_weights is None:
                    task = rng.choice(fit)
                else:
                    task = rng.choices(fit, [task_weights[t] for t in fit])[0]
                seq, spans, tail = tasks.sample_tail(rng, text, task, T)
                if drawn is not None:
                    drawn.append(task)
            # targets are seq[1:], so the target index of byte a is a-1
            for a, e in spans:
                w[a - 1:e - 1] = answer_weight
        else:
            s = rng.randrange(len(text) - T - 2)
            seq = text[s:s + T + 1]
            if drawn is not None:
                drawn.append(None)
        xs.append(np.frombuffer(seq, dtype=np.uint8))
        ws.append(w)
        if skip:
            c, j = rng.randint(1, tail), rng.randint(0, span - T)
            pos = np.arange(T, dtype=np.int64)
            pos[c:] += j
            ps.append(pos)
    arr = torch.from_numpy(np.stack(xs).astype(np.int64))
    pos = torch.from_numpy(np.stack(ps)) if skip else None
    return arr[:, :-1], arr[:, 1:], torch.from_numpy(np.stack(ws)), pos


# -------------------------------------------------------------- evaluate ---

@torch.no_grad()
def evaluate(model, r, rng_seed, held, T):
    """{task: exact-match accuracy} on held-out haystacks (greedy per byte
    under teacher forcing of the previous answer bytes, which equals greedy
    decoding when all are right; for multiq every answer must be right) and
    the held-out text loss. m1: the pass key at fixed depths."""
    model.eval()
    dev = next(model.parameters()).device
    rng = random.Random(rng_seed)
    n = r["eval_n"]
    acc = {}
    for task in (r["tasks"] or ("passkey",)):
        if task != "passkey" and not tasks.fits(task, T):
            continue
        correct = 0
        for i in range(0, n, 8):
            if task == "passkey":
                seqs = [passkey_sample(rng, held, T, depth=(j % 8) / 7.0)
                        for j in range(8)]
                seqs = [(s, [(a, a + 6)]) for s, a in seqs]
            else:
                seqs = [tasks.sample(rng, held, task, T) for _ in range(8)]
            for s, spans in seqs:  # one at a time: the memory of one sequence
                arr = torch.tensor([list(s)], dtype=torch.int64, device=dev)
                pred = model(arr[:, :-1])[0].argmax(-1)
                ok = all(bool((pred[a - 1:e - 2] == arr[0, a:e - 1]).all())
                         for a, e in spans)
                correct += ok
        acc[task] = correct / n
    s = rng.randrange(len(held) - 4 * T)
    arr = torch.tensor([list(held[s + j * T:s + j * T + T + 1]) for j in range(2)],
                       dtype=torch.int64, device=dev)
    logits = model(arr[:, :-1])
    nll = F.cross_entropy(logits.reshape(-1, 256), arr[:, 1:].reshape(-1)).item()
    model.train()
    return acc, nll


# ----------------------------------------------------------------- train ---

def save_ckpt(path, model, opt, step, tokens, rng, elapsed, cur, name, meta):
    """The whole state of a run on this machine (CKPT_DIR/last.pt): the
    snapshot's, the optimizer's moments and the random states."""
    save_snapshot(path, model, step, tokens, elapsed, cur, name, meta,
                  opt=opt.state_dict(), py_rng=rng.getstate(),
                  torch_rng=torch.get_rng_state())


def save_snapshot(path, model, step, tokens, elapsed, cur, name, meta,
                  **more):
    """What a run resumes from on another machine (--resume): the weights
    and the run's place in its recipe, without the optimizer's moments (a
    third of a checkpoint's size, small enough to commit at the end of a
    working session; AdamW's moments refill during the warmup a resumed run
    repeats). more: save_ckpt's additions."""
    tmp = path + ".tmp"
    torch.save(dict(model=model.state_dict(), step=step, tokens=tokens,
                    curriculum=cur, config=model.c, recipe=name,
                    elapsed=elapsed, **meta, **more), tmp)
    os.replace(tmp, path)


def load_snapshot(path, model, name):
    """Loads a snapshot's weights into model; returns (step, tokens,
    elapsed, curriculum, init meta), the curriculum's warm_from set to the
    step (the fresh optimizer warms up again)."""
    st = torch.load(path, map_location="cpu", weights_only=False)
    if st.get("recipe") != name:
        raise ValueError(f"{path}: a snapshot of recipe {st.get('recipe')}, "
                         f"not {name}")
    model.load_state_dict(st["model"])
    cur = dict(st["curriculum"], warm_from=st["step"])
    meta = {k: st[k] for k in ("init_step", "init_tokens") if k in st}
    return st["step"], st["tokens"], st["elapsed"], cur, meta


def log_upto(lines, step):
    """The lines of a training log that a checkpoint at step has seen: all
    before the first step line (a line that starts with a digit) past step,
    so a run killed after its last checkpoint and resumed from it logs each
    step once, and a committed log ends at its snapshot."""
    for i, ln in enumerate(lines):
        if ln[:1].isdigit() and int(ln.split()[0]) > step:
            return lines[:i]
    return lines


def cut_log(path, step):
    """Rewrite the log at path to log_upto(its lines, step)."""
    with open(path) as f:
        lines = f.readlines()
    kept = log_upto(lines, step)
    if len(kept) < len(lines):
        with open(path, "w") as f:
            f.writelines(kept)


def log_eval(logf, model, r, held, step, tokens, T):
    """Accuracy at the phase's context T and, where T is shorter, at the
    model's full context (the length model_eval runs)."""
    for n in sorted({T, model.c["max_ctx"]}):
        acc, nll = evaluate(model, r, 99, held, n)
        a = " ".join(f"{k}{n}_acc {v:.3f}" for k, v in acc.items())
        print(f"# eval step {step} tokens {tokens} {a} heldout_nll {nll:.4f}",
              file=logf, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(RECIPES), default="m1")
    ap.add_argument("--ckpt-dir", required="--bench" not in sys.argv)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--bf16", action="store_true",
                    help="the training steps' matrix products in bfloat16 "
                    "(torch.autocast; weights, optimizer, output head and "
                    "held-out checks stay float32): 2.2x the tokens/s of "
                    "float32 here, on cores with avx512_bf16")
    ap.add_argument("--ckpt-every", type=float, default=300.0, help="seconds")
    ap.add_argument("--eval-every", type=float, default=None,
                    help="seconds (0: at every checkpoint; default: the "
                    "recipe's, m1 0, m2 2400)")
    ap.add_argument("--max-tokens", type=float, default=60e6)
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop training after this many seconds; the "
                    "held-out evaluation, checkpoint and snapshot follow "
                    "(on the CPU about a minute for m2 at 1024: leave room "
                    "for them on a lent GPU machine that must hand its "
                    "files back in time); rerun to go on")
    ap.add_argument("--text", metavar="FILE",
                    help="the training text as `" + " ".join(KJV_CMD) +
                    "` prints it, for a machine without bible-kjv "
                    "(default: run that command)")
    ap.add_argument("--init", metavar="PKVM",
                    help="start from this weights file (recipes with an "
                    "init: m1t starts from m1's, bench/model/data/model.pkvm; "
                    "m2g from m1t's, bench/model/data/model1t.pkvm, grown "
                    "to its shape by grow.py); read when no checkpoint "
                    "exists")
    ap.add_argument("--resume", metavar="SNAPSHOT",
                    help="go on from this snapshot (CKPT_DIR/resume.pt of "
                    "an earlier run, as committed under bench/model/data) "
                    "with a fresh optimizer; read when no checkpoint exists")
    ap.add_argument("--bench", action="store_true",
                    help="time a few steps at each phase and exit")
    args = ap.parse_args()
    r = RECIPES[args.model]
    phases = r["phases"]
    if args.eval_every is None:
        args.eval_every = r["eval_every"]

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    train_text, held = load_kjv(args.text)

    model = Model(r["config"]).to(args.device)
    model.recompute_from = r["recompute_from"]
    opt = torch.optim.AdamW(model.parameters(), lr=r["lr_max"], betas=(0.9, 0.95),
                            weight_decay=0.1)
    nparams = sum(p.numel() for p in model.parameters())

    dev_type = torch.device(args.device).type

    def train_step(x, y, w, pos, lr):
        for g in opt.param_groups:
            g["lr"] = lr
        x, y, w = x.to(args.device), y.to(args.device), w.to(args.device)
        with torch.autocast(dev_type, dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(x, pos=None if pos is None else pos.to(args.device))
        ce = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1), reduction="none")
        loss = (ce * w.reshape(-1)).sum() / w.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return ce.detach().cpu(), w.reshape(-1).cpu()

    if args.bench:
        for ph in phases:
            T, B, pn, _, _, span = phase_of(ph)
            x, y, w, pos = make_batch(rng, train_text, B, T, pn, ANSWER_WEIGHT,
                                      r["tasks"], span)
            for i in range(3):
                t0 = time.time()
                train_step(x, y, w, pos, 1e-4)
                dt = time.time() - t0
            print(f"T={T} B={B} span={span}: {B*T/dt:.0f} tokens/s "
                  f"({nparams} params, bf16={args.bf16})", flush=True)
        return

    os.makedirs(args.ckpt_dir, exist_ok=True)
    ck = os.path.join(args.ckpt_dir, "last.pt")
    snap = os.path.join(args.ckpt_dir, "resume.pt")
    logp = os.path.join(args.ckpt_dir, "train.log")
    step, tokens, elapsed = 0, 0, 0.0
    cur = dict(phase=0, phase_tokens=0, answer_ema=START_LOSS)
    init_meta = {}
    run = (f"device={args.device} bf16={args.bf16} phases={phases} "
           f"rate={rate_of(r)}")
    if os.path.exists(ck):
        st = torch.load(ck, map_location=args.device, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, tokens, elapsed = st["step"], st["tokens"], st["elapsed"]
        rng.setstate(st["py_rng"])
        torch.set_rng_state(st["torch_rng"])
        # checkpoints written before the adaptive curriculum were in phase 0
        cur = st.get("curriculum", dict(cur, phase_tokens=tokens))
        init_meta.update({k: st[k] for k in ("init_step", "init_tokens") if k in st})
        if os.path.exists(logp):
            cut_log(logp, step)
        head = f"# resumed at step {step}, {tokens} tokens, {run}, curriculum {cur}"
    elif args.resume:
        step, tokens, elapsed, cur, init_meta = load_snapshot(
            args.resume, model, args.model)
        # a fresh draw from here: the snapshot keeps no random state
        rng = random.Random(args.seed + step)
        torch.manual_seed(args.seed + step)
        head = (f"# resumed from snapshot {args.resume} at step {step}, "
                f"{tokens} tokens, {run}, optimizer fresh (warmup {WARMUP} "
                f"steps), curriculum {cur}")
    else:
        init = ""
        if r.get("init"):
            if not args.init:
                ap.error(f"recipe {args.model} starts from {r['init']}'s "
                         "weights: --init FILE.pkvm")
            import export
            c, sd, istep, itok = export.read_weights(args.init)
            try:
                sd = init_state(r, c, sd)
            except ValueError as e:
                ap.error(f"{args.init}: {e}")
            model.load_state_dict(sd)
            init_meta.update(init_step=istep, init_tokens=itok)
            init = f" init={args.init} (step {istep}, {itok} tokens)"
        head = (f"# start model={args.model} seed={args.seed} "
                f"threads={args.threads} {run} params={nparams} "
                f"config={r['config']} tasks={r['tasks']} "
                f"answer_weight={ANSWER_WEIGHT}{init}\n"
                "# step tokens elapsed_s ctx lr loss answer_loss tok_per_s")
    logf = open(logp, "a")
    print(head, file=logf, flush=True)

    t_ck = t_ev = time.time()
    t_start = time.time() - elapsed

    def save():
        """last.pt for this machine, resume.pt for another, at one time."""
        now = time.time() - t_start
        save_ckpt(ck, model, opt, step, tokens, rng, now, cur, args.model,
                  init_meta)
        save_snapshot(snap, model, step, tokens, now, cur, args.model,
                      init_meta)

    acc_loss, acc_ans, acc_n, acc_tok, t_win = 0.0, 0.0, 0, 0, time.time()
    t_stop = (math.inf if args.max_seconds is None
              else time.time() + args.max_seconds)
    while (tokens < args.max_tokens and not finished(r, cur)
           and time.time() < t_stop):
        T, B, pn, p_min, p_max, span = phase_of(phases[cur["phase"]])
        drawn = []
        x, y, w, pos = make_batch(rng, train_text, B, T, pn, ANSWER_WEIGHT,
                                  phase_tasks(r, cur), span,
                                  task_weights(r, cur), drawn)
        lr = lr_at(r, step, tokens, cur)
        ce, w = train_step(x, y, w, pos, lr)
        if r["tasks"]:
            update_task_ema(cur, drawn, ce.view(B, T), w.view(B, T))
        step += 1
        tokens += B * T
        acc_tok += B * T
        aw = w > 1
        acc_loss += ce.mean().item()
        ans = ce[aw].mean().item() if aw.any() else cur["answer_ema"]
        acc_ans += ans
        acc_n += 1
        cur["answer_ema"] += ANSWER_EMA * (ans - cur["answer_ema"])
        cur["phase_tokens"] += B * T
        ans_loss = answers_loss(r, cur)
        if cur["phase"] + 1 < len(phases) and cur["phase_tokens"] >= p_min and (
                ans_loss < r["answer_ok"] or cur["phase_tokens"] >= p_max):
            print(f"# phase {cur['phase']} (context {T}) ends at step {step}, "
                  f"{tokens} tokens: answer loss {ans_loss:.3f}",
                  file=logf, flush=True)
            log_eval(logf, model, r, held, step, tokens, T)
            cur = dict(cur, phase=cur["phase"] + 1, phase_tokens=0)
        why = cool_down_starts(r, cur, tokens)
        if why:
            cur["cool_from"] = cur["phase_tokens"]
            nats = (f", worst nats an answer {answer_nats(r, cur):.3f}"
                    if r["tasks"] else "")
            print(f"# cool-down from step {step}, {tokens} tokens ({why}): "
                  f"answer loss {answers_loss(r, cur):.3f}{nats}",
                  file=logf, flush=True)
        if step % 20 == 0:
            now = time.time()
            print(f"{step} {tokens} {now - t_start:.0f} {T} {lr:.2e} "
                  f"{acc_loss / acc_n:.4f} {acc_ans / acc_n:.4f} "
                  f"{acc_tok / (now - t_win):.0f}", file=logf, flush=True)
            acc_loss, acc_ans, acc_n, acc_tok, t_win = 0.0, 0.0, 0, 0, now
        if time.time() - t_ck > args.ckpt_every:
            for key, what in (("task_ema", "answer loss"),
                              ("task_nats", "nats an answer")):
                if key in cur:
                    print(f"# task {what} " + " ".join(
                        f"{t} {v:.3f}" for t, v in sorted(cur[key].items())),
                        file=logf, flush=True)
            if time.time() - t_ev > args.eval_every:
                log_eval(logf, model, r, held, step, tokens, T)
                t_ev = time.time()
            save()
            t_ck = time.time()
    log_eval(logf, model, r, held, step, tokens, phases[cur["phase"]][0])
    save()
    if finished(r, cur):
        print(f"# done step {step} tokens {tokens}", file=logf, flush=True)
    else:
        why = ("--max-tokens" if tokens >= args.max_tokens else "--max-seconds")
        print(f"# stopped at {why}, step {step} tokens {tokens}: rerun to go on",
              file=logf, flush=True)


if __name__ == "__main__":
    main()
