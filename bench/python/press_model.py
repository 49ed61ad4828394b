#!/usr/bin/python3
"""The torch press on the project's own model (bench/model, docs/model.md):
loads the committed weights (bench/model/data/model.pkvm) into the torch
module of bench/model/net.py, runs pass-key prompts built exactly as
model_eval builds them, compresses the prompt's cache with
pyramidkv.press.KVPress and decodes the key greedily with the press's step.

  PYTHONPATH=build/dev/python /usr/bin/python3 bench/python/press_model.py \
      --needles 10 --method 0 --den 4 [--compare build/dev/tests/python/pkm_kept_dump]

With --compare, the C runtime (pkm_kept_dump, the runtime of pkm_cache.c)
runs the same prompts and the kept positions after the prefill and after
every decode step are compared, layer by layer and KV head by KV head.
It owns the pkvm reader for torch, the forward passes that expose K/V, and
the comparison; the cache decisions are the library's.
"""
import argparse
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.join(HERE, os.pardir, "model")
# pyramidkv from PYTHONPATH (the build tree's copy, which knows its
# library), not the source package beside this script
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, MODEL_DIR)
import export  # noqa: E402  (the weights file's reader)
import net  # noqa: E402  (the model definition)

from pyramidkv.press import KVPress  # noqa: E402

NEEDLE_FMT = " The pass key is %s. Remember it. "
QUESTION = b"\nWhat is the pass key? The pass key is "
DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
M64 = (1 << 64) - 1
# pkm_methods.c rows this script can drive: (scorer, schedule, params, sinks)
METHODS = {
    0: ("SnapKV (uniform)", "window", "uniform", {}, 0),
    1: ("PyramidKV r=2", "window", "arithmetic", {"ratio": 2}, 0),
    2: ("PyramidKV r=4", "window", "arithmetic", {"ratio": 4}, 0),
    3: ("PyramidKV r=8", "window", "arithmetic", {"ratio": 8}, 0),
    9: ("H2O (uniform)", "cumulative", "uniform", {}, 0),
    11: ("TOVA (uniform)", "last", "uniform", {}, 0),
    12: ("Scissorhands (uniform)", "votes", "uniform", {}, 0),
    13: ("StreamingLLM (uniform, 4 sinks)", "none", "uniform", {}, 4),
}


def load_pkvm(path):
    """The weights file of docs/model.md into net.Model (export.py's
    reader), in eval mode."""
    c, sd, _, _ = export.read_weights(path)
    m = net.Model(c)
    m.load_state_dict(sd)
    m.eval()
    return m


def _qkv(b, x, cos, sin):
    B, T, _ = x.shape
    hx = b.attn_norm(x)
    q = b.wq(hx).view(B, T, b.h, b.hd).transpose(1, 2)
    k = b.wk(hx).view(B, T, b.kv, b.hd).transpose(1, 2)
    v = b.wv(hx).view(B, T, b.kv, b.hd).transpose(1, 2)
    q = net.apply_rope(q * (1.0 / math.sqrt(b.hd)), cos, sin)
    k = net.apply_rope(k, cos, sin)
    return q, k, v


def _finish(b, x, o):
    B, T = x.shape[:2]
    o = o.transpose(1, 2).reshape(B, T, b.h * b.hd)
    x = x + b.wo(o)
    hx = b.ffn_norm(x)
    return x + b.w2(torch.nn.functional.silu(b.w1(hx)) * b.w3(hx))


@torch.no_grad()
def prefill(m, idx, queries=None):
    """The full-cache forward of a prompt: (logits of the last token,
    keys[l], values[l] [B, kv, T, hd] rotated, attn[l] [B, h, T, T]).
    A list passed as ``queries`` receives every layer's queries [B, h, T,
    hd] (rotated and already scaled by 1/sqrt(hd), as the model does)."""
    B, T = idx.shape
    cos, sin = m.cos[:T], m.sin[:T]
    mask = torch.full((T, T), float("-inf")).triu(1)
    x = m.emb(idx)
    ks, vs, ps = [], [], []
    for b in m.layers:
        q, k, v = _qkv(b, x, cos, sin)
        g = b.h // b.kv
        kr = k.repeat_interleave(g, dim=1)
        vr = v.repeat_interleave(g, dim=1)
        p = torch.softmax(q @ kr.transpose(-1, -2) + mask, dim=-1)
        x = _finish(b, x, p @ vr)
        ks.append(k)
        vs.append(v)
        ps.append(p)
        if queries is not None:
            queries.append(q)
    return m.out(m.norm(x))[:, -1], ks, vs, ps


@torch.no_grad()
def decode_step(m, cache, tok, pos):
    """One token at ``pos`` against a PressedCache: appends its k/v to
    every layer, attends over the held rows; returns (logits, attn[l]
    [B, h, held])."""
    idx = torch.tensor([[tok]])
    cos, sin = m.cos[pos:pos + 1], m.sin[pos:pos + 1]
    x = m.emb(idx)
    attn = []
    for l, b in enumerate(m.layers):
        q, k, v = _qkv(b, x, cos, sin)
        cache.append(l, k, v, pos)
        g = b.h // b.kv
        kr = cache.keys[l].repeat_interleave(g, dim=1)
        vr = cache.values[l].repeat_interleave(g, dim=1)
        p = torch.softmax(q @ kr.transpose(-1, -2), dim=-1)
        x = _finish(b, x, p @ vr)
        attn.append(p[:, :, 0, :])
    return m.out(m.norm(x))[:, -1], attn


def splitmix(state):
    state[0] = (state[0] + 0x9E3779B97F4A7C15) & M64
    z = state[0]
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def needle_prompts(text, n, length, seed=1):
    """model_eval.c's pass-key prompts, the same bytes in the same order."""
    rng = [(seed * 0x100000001B3 + 17) & M64]
    out = []
    for i in range(n):
        key = "%05u" % (splitmix(rng) % 100000)
        needle = (NEEDLE_FMT % key).encode()
        hay = length - len(needle) - len(QUESTION)
        start = splitmix(rng) % (len(text) - hay - 1)
        pos = int(math.floor(DEPTHS[i % 5] * hay + 0.5))
        p = (text[start:start + pos] + needle + text[start + pos:start + hay]
             + QUESTION)
        out.append((p, key))
    return out


def c_runtime(dump, method, budget, recent, obs, pool, cadence, decode,
              prompt):
    """pkm_kept_dump's kept positions: a list of (label, {(l, kv): [...]})
    and the tokens it fed."""
    run = subprocess.run([dump, str(method), str(budget), str(recent),
                          str(obs), str(pool), str(cadence), str(decode)],
                         input=prompt, capture_output=True, check=True)
    blocks, toks = [], []
    for line in run.stdout.decode().splitlines():
        f = line.split()
        if f[0] == "prefill":
            blocks.append(("prefill", {}))
        elif f[0] == "step":
            blocks.append(("step %s" % f[1], {}))
            toks.append(int(f[2]))
        elif f[0] == "argmax":
            toks.append(int(f[1]))
        else:
            blocks[-1][1][(int(f[0]), int(f[1]))] = [int(x) for x in f[2:]]
    return blocks, toks


def run_prompt(m, press, prompt, decode, obs):
    """Press + greedy decode; returns (blocks like c_runtime's, tokens,
    seconds of the forward, seconds of the compression)."""
    idx = torch.tensor([list(prompt)])
    t0 = time.perf_counter()
    logits, ks, vs, ps = prefill(m, idx)
    t1 = time.perf_counter()
    rows = ps if press.replay else [p[:, :, -obs:, :] for p in ps]
    press.reset()
    cache = press.compress(ks, vs, rows)
    t2 = time.perf_counter()

    def snap(label):
        d = {}
        for l in range(press.L):
            for kv in range(press.kv):
                d[(l, kv)] = cache.positions[l][0, kv].tolist()
        return (label, d)

    blocks = [snap("prefill")]
    tok = int(torch.argmax(logits[0]))
    toks = []
    for j in range(decode):
        pos = len(prompt) + j
        logits, attn = decode_step(m, cache, tok, pos)
        press.step(cache, pos, attn)
        blocks.append(snap("step %d" % pos))
        toks.append(tok)
        tok = int(torch.argmax(logits[0]))
    toks.append(tok)
    return blocks, toks, t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--needles", type=int, default=10)
    ap.add_argument("--method", type=int, default=0, choices=sorted(METHODS))
    ap.add_argument("--den", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--obs", type=int, default=16)
    ap.add_argument("--pool", type=int, default=7)
    ap.add_argument("--compare", help="the pkm_kept_dump program")
    a = ap.parse_args()
    torch.set_num_threads(1)
    m = load_pkvm(os.path.join(MODEL_DIR, "data", "model.pkvm"))
    text = open(os.path.join(MODEL_DIR, "data", "heldout.txt"), "rb").read()
    name, scorer, sched, sp, sinks = METHODS[a.method]
    budget = a.ctx // a.den
    recent = max(budget // 4, 1)
    plen = a.ctx - 1 - 5
    c = m.c
    press = KVPress(c["n_layers"], c["n_kv_heads"], c["n_heads"] // c["n_kv_heads"],
                    budget, schedule=sched, schedule_params=sp, scorer=scorer,
                    recent_window=recent, obs_window=a.obs, pool_kernel=a.pool,
                    sinks=sinks, max_len=plen + 8)
    ok = same_prompts = 0
    diff_slots = total_slots = 0
    fwd, comp = [], []
    for i, (prompt, key) in enumerate(needle_prompts(text, a.needles, plen)):
        blocks, toks, tf, tc = run_prompt(m, press, prompt, 4, a.obs)
        fwd.append(tf)
        comp.append(tc)
        got = bytes(toks).decode("latin-1")
        ok += got == key
        if a.compare:
            cb, ctoks = c_runtime(a.compare, a.method, budget, recent, a.obs,
                                  a.pool, 1, 4, prompt)
            same = ctoks == toks and len(cb) == len(blocks)
            for (_, d1), (_, d2) in zip(blocks, cb):
                for k in d1:
                    total_slots += 1
                    if d1[k] != d2.get(k):
                        diff_slots += 1
                        same = False
            same_prompts += same
    print("method %s, budget 1/%d = %d, recent %d, obs %d, pool %d: needle "
          "%d/%d (%.1f %%)" % (name, a.den, budget, recent, a.obs, a.pool, ok,
                               a.needles, 100.0 * ok / a.needles))
    if a.compare:
        print("kept positions equal to the C runtime's on %d/%d prompts; "
              "(layer, KV head) snapshots differing: %d of %d"
              % (same_prompts, a.needles, diff_slots, total_slots))
    f, cp = float(np.median(fwd)), float(np.median(comp))
    print("median torch forward of the %d-byte prompt %.1f ms, compression "
          "%.2f ms (%.1f %% of the forward)" % (plen, f * 1e3, cp * 1e3,
                                                100.0 * cp / f))
    press.close()


if __name__ == "__main__":
    main()
