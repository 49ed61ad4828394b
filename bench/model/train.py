#!/usr/bin/python3
"""Train the small byte-level Llama-style decoder that bench/model runs in C.

What this file owns: the model definition (shared with export.py), the
training data (English text from Debian's bible-kjv package mixed with a
synthetic pass-key retrieval task), the curriculum, and resumable training
with periodic checkpoints. docs/quality.md gives the commands and the run.

Data: `apt-get install bible-kjv` (pulls bible-kjv-text); the text is dumped
once with `/usr/bin/bible -f gen1:1-rev22:21` (31,102 verses, 4.4 MB). The
book of Revelation (Re* verses) is held out for evaluation; the rest trains.

Run (niced, background, resumable; rerun the same command to resume):
  nice -n 5 /usr/bin/python3 bench/model/train.py --ckpt-dir /work/model-ckpt
The script resumes from CKPT_DIR/last.pt when it exists; the training log is
appended to CKPT_DIR/train.log (copied into the repo as bench/model/train.log).
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
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# ----------------------------------------------------------------- model ---

CONFIG = dict(
    vocab=256,
    dim=192,
    n_layers=8,
    n_heads=6,       # query heads
    n_kv_heads=3,    # key/value heads (2 query heads per KV head)
    head_dim=32,
    ffn_dim=512,     # SwiGLU hidden width
    max_ctx=512,
    rope_theta=10000.0,
    norm_eps=1e-5,
)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, n_pos, theta):
    """cos/sin of shape (n_pos, head_dim/2); pair i of a head rotates
    (x[i], x[i + head_dim/2]) by angle pos * theta^(-2i/head_dim)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    # x: (B, H, T, D); pairs are (i, i + D/2) ("rotate half")
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h], x[..., h:]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, h, kv, hd = c["dim"], c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.h, self.kv, self.hd = h, kv, hd
        self.attn_norm = RMSNorm(d, c["norm_eps"])
        self.wq = nn.Linear(d, h * hd, bias=False)
        self.wk = nn.Linear(d, kv * hd, bias=False)
        self.wv = nn.Linear(d, kv * hd, bias=False)
        self.wo = nn.Linear(h * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, c["norm_eps"])
        self.w1 = nn.Linear(d, c["ffn_dim"], bias=False)  # gate
        self.w3 = nn.Linear(d, c["ffn_dim"], bias=False)  # up
        self.w2 = nn.Linear(c["ffn_dim"], d, bias=False)  # down

    def forward(self, x, cos, sin, mask, want_attn=False):
        B, T, _ = x.shape
        hx = self.attn_norm(x)
        q = self.wq(hx).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.wk(hx).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.wv(hx).view(B, T, self.kv, self.hd).transpose(1, 2)
        q = apply_rope(q * (1.0 / math.sqrt(self.hd)), cos, sin)
        k = apply_rope(k, cos, sin)
        g = self.h // self.kv
        # group queries by KV head: (B, kv, g*T, D) so one bmm serves the group
        qg = q.reshape(B, self.kv, g * T, self.hd)
        s = torch.matmul(qg, k.transpose(-1, -2))
        s = s.view(B, self.kv, g, T, T) + mask
        p = torch.softmax(s, dim=-1)
        o = torch.matmul(p.view(B, self.kv, g * T, T), v)
        o = o.view(B, self.h, T, self.hd).transpose(1, 2).reshape(B, T, self.h * self.hd)
        x = x + self.wo(o)
        hx = self.ffn_norm(x)
        x = x + self.w2(F.silu(self.w1(hx)) * self.w3(hx))
        if want_attn:
            return x, p.view(B, self.h, T, T)
        return x


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.emb = nn.Embedding(c["vocab"], c["dim"])
        self.layers = nn.ModuleList([Block(c) for _ in range(c["n_layers"])])
        self.norm = RMSNorm(c["dim"], c["norm_eps"])
        self.out = nn.Linear(c["dim"], c["vocab"], bias=False)
        cos, sin = rope_tables(c["head_dim"], c["max_ctx"] * 4, c["rope_theta"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.apply(self._init)
        for b in self.layers:
            nn.init.normal_(b.wo.weight, std=0.02 / math.sqrt(2 * c["n_layers"]))
            nn.init.normal_(b.w2.weight, std=0.02 / math.sqrt(2 * c["n_layers"]))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx, want_attn=False):
        B, T = idx.shape
        cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.full((T, T), float("-inf"), device=idx.device).triu(1)
        x = self.emb(idx)
        attns = []
        for b in self.layers:
            if want_attn:
                x, p = b(x, cos, sin, mask, True)
                attns.append(p)
            else:
                x = b(x, cos, sin, mask)
        logits = self.out(self.norm(x))
        return (logits, attns) if want_attn else logits


# ------------------------------------------------------------------ data ---

def load_kjv():
    """Return (train_text, heldout_text) as bytes. Verse references are
    stripped; one verse per line. Revelation is held out."""
    out = subprocess.run(["/usr/bin/bible", "-f", "gen1:1-rev22:21"],
                         check=True, capture_output=True).stdout
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


def make_batch(rng, text, B, T, p_needle, answer_weight):
    xs, ws = [], []
    for _ in range(B):
        w = np.ones(T, dtype=np.float32)
        if rng.random() < p_needle:
            seq, a = passkey_sample(rng, text, T)
            # targets are seq[1:], so target index of byte a is a-1
            w[a - 1:a - 1 + 5] = answer_weight
        else:
            s = rng.randrange(len(text) - T - 2)
            seq = text[s:s + T + 1]
        xs.append(np.frombuffer(seq, dtype=np.uint8))
        ws.append(w)
    arr = torch.from_numpy(np.stack(xs).astype(np.int64))
    return arr[:, :-1], arr[:, 1:], torch.from_numpy(np.stack(ws))


# ------------------------------------------------------------ curriculum ---

# The curriculum: (context, batch size, needle fraction, min tokens, max
# tokens) per phase. A phase ends when the running answer loss (an
# exponential mean over ~50 steps of the pass-key digits' loss) is below
# ANSWER_OK after at least its min tokens, or at its max tokens: copying
# forms cheaply at short context, then the context grows. The phase, its
# token count and the running mean are in the checkpoint, so a resumed run
# takes the same path.
PHASES = [
    (128, 16, 0.6, 600_000, 5_000_000),
    (256, 8, 0.6, 200_000, 600_000),
    (512, 4, 0.6, 0, 10**12),
]
ANSWER_OK = 0.25
ANSWER_EMA = 0.02
ANSWER_WEIGHT = 8.0
LR_MAX = 2e-3
LR_MIN = 2e-4
WARMUP = 200
LR_HORIZON = 20_000_000  # cosine schedule length in tokens (then LR_MIN)
# The end of the run: in the last phase (context 512), after COOL_START
# tokens the learning rate falls linearly from the cosine's value to LR_MIN
# over COOL_LEN tokens, and the run ends there. At the cosine's 1.8e-3 the
# pass-key accuracy swung between 0.78 and 1.0 from one evaluation to the
# next; the cool-down settles it.
COOL_START = 400_000
COOL_LEN = 400_000


def lr_at(step, tokens, cur):
    if step < WARMUP:
        return LR_MAX * (step + 1) / WARMUP
    f = min(1.0, tokens / LR_HORIZON)
    lr = LR_MIN + 0.5 * (LR_MAX - LR_MIN) * (1 + math.cos(math.pi * f))
    if cur["phase"] == len(PHASES) - 1 and cur["phase_tokens"] >= COOL_START:
        c = min(1.0, (cur["phase_tokens"] - COOL_START) / COOL_LEN)
        lr = lr * (1.0 - c) + LR_MIN * c
    return lr


def finished(cur):
    return (cur["phase"] == len(PHASES) - 1
            and cur["phase_tokens"] >= COOL_START + COOL_LEN)


@torch.no_grad()
def evaluate(model, rng_seed, held, n=32, T=512):
    """Pass-key exact-match accuracy (greedy per digit under teacher forcing
    of the previous answer digits, which equals greedy decoding when all are
    right) and held-out text loss."""
    model.eval()
    rng = random.Random(rng_seed)
    correct = 0
    for i in range(0, n, 8):
        seqs = [passkey_sample(rng, held, T, depth=(j % 8) / 7.0) for j in range(i, i + 8)]
        arr = torch.tensor([list(s) for s, _ in seqs], dtype=torch.int64)
        logits = model(arr[:, :-1])
        a = seqs[0][1]
        pred = logits[:, a - 1:a + 4].argmax(-1)
        correct += int((pred == arr[:, a:a + 5]).all(-1).sum())
    s = rng.randrange(len(held) - 4 * T)
    arr = torch.tensor([list(held[s + j * T:s + j * T + T + 1]) for j in range(2)],
                       dtype=torch.int64)
    logits = model(arr[:, :-1])
    nll = F.cross_entropy(logits.reshape(-1, 256), arr[:, 1:].reshape(-1)).item()
    model.train()
    return correct / n, nll


# ----------------------------------------------------------------- train ---

def save_ckpt(path, model, opt, step, tokens, rng, elapsed, cur):
    tmp = path + ".tmp"
    torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), step=step,
                    tokens=tokens, curriculum=cur, py_rng=rng.getstate(),
                    torch_rng=torch.get_rng_state(), config=CONFIG,
                    elapsed=elapsed), tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt-dir", default="/work/model-ckpt")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ckpt-every", type=float, default=300.0, help="seconds")
    ap.add_argument("--max-tokens", type=float, default=60e6)
    ap.add_argument("--bench", action="store_true",
                    help="time a few steps at each phase and exit")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    train_text, held = load_kjv()

    model = Model(CONFIG)
    opt = torch.optim.AdamW(model.parameters(), lr=LR_MAX, betas=(0.9, 0.95),
                            weight_decay=0.1)
    nparams = sum(p.numel() for p in model.parameters())

    if args.bench:
        for T, B in [(128, 16), (256, 8), (512, 4)]:
            x, y, w = make_batch(rng, train_text, B, T, 0.5, ANSWER_WEIGHT)
            for i in range(4):
                t0 = time.time()
                loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
                opt.zero_grad()
                loss.backward()
                opt.step()
                dt = time.time() - t0
            print(f"T={T} B={B}: {B*T/dt:.0f} tokens/s ({nparams} params)")
        return

    os.makedirs(args.ckpt_dir, exist_ok=True)
    ck = os.path.join(args.ckpt_dir, "last.pt")
    logf = open(os.path.join(args.ckpt_dir, "train.log"), "a")
    step, tokens, elapsed = 0, 0, 0.0
    cur = dict(phase=0, phase_tokens=0, answer_ema=math.log(10.0))
    if os.path.exists(ck):
        st = torch.load(ck)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, tokens, elapsed = st["step"], st["tokens"], st["elapsed"]
        rng.setstate(st["py_rng"])
        torch.set_rng_state(st["torch_rng"])
        # checkpoints written before the adaptive curriculum were in phase 0
        cur = st.get("curriculum", dict(cur, phase_tokens=tokens))
        print(f"# resumed at step {step}, {tokens} tokens, curriculum {cur}, "
              f"phases={PHASES}", file=logf, flush=True)
    else:
        print(f"# start seed={args.seed} threads={args.threads} params={nparams} "
              f"config={CONFIG} phases={PHASES} answer_weight={ANSWER_WEIGHT}",
              file=logf, flush=True)
        print("# step tokens elapsed_s ctx lr loss answer_loss tok_per_s", file=logf, flush=True)

    t_ck = time.time()
    t_start = time.time() - elapsed
    acc_loss, acc_ans, acc_n, acc_tok, t_win = 0.0, 0.0, 0, 0, time.time()
    while tokens < args.max_tokens and not finished(cur):
        T, B, pn, p_min, p_max = PHASES[cur["phase"]]
        x, y, w = make_batch(rng, train_text, B, T, pn, ANSWER_WEIGHT)
        lr = lr_at(step, tokens, cur)
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(x)
        ce = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1), reduction="none")
        loss = (ce * w.reshape(-1)).sum() / w.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += B * T
        acc_tok += B * T
        aw = (w.reshape(-1) > 1)
        acc_loss += ce.mean().item()
        ans = ce[aw].mean().item() if aw.any() else cur["answer_ema"]
        acc_ans += ans
        acc_n += 1
        cur["answer_ema"] += ANSWER_EMA * (ans - cur["answer_ema"])
        cur["phase_tokens"] += B * T
        if cur["phase"] + 1 < len(PHASES) and cur["phase_tokens"] >= p_min and (
                cur["answer_ema"] < ANSWER_OK or cur["phase_tokens"] >= p_max):
            print(f"# phase {cur['phase']} (context {T}) ends at step {step}, "
                  f"{tokens} tokens: answer loss {cur['answer_ema']:.3f}",
                  file=logf, flush=True)
            cur = dict(cur, phase=cur["phase"] + 1, phase_tokens=0)
        if step % 20 == 0:
            now = time.time()
            print(f"{step} {tokens} {now - t_start:.0f} {T} {lr:.2e} "
                  f"{acc_loss / acc_n:.4f} {acc_ans / acc_n:.4f} "
                  f"{acc_tok / (now - t_win):.0f}", file=logf, flush=True)
            acc_loss, acc_ans, acc_n, acc_tok, t_win = 0.0, 0.0, 0, 0, now
        if time.time() - t_ck > args.ckpt_every:
            acc, nll = evaluate(model, 99, held)
            print(f"# eval step {step} tokens {tokens} passkey512_acc {acc:.3f} "
                  f"heldout_nll {nll:.4f}", file=logf, flush=True)
            save_ckpt(ck, model, opt, step, tokens, rng, time.time() - t_start, cur)
            t_ck = time.time()
    acc, nll = evaluate(model, 99, held)
    print(f"# eval step {step} tokens {tokens} passkey512_acc {acc:.3f} "
          f"heldout_nll {nll:.4f}", file=logf, flush=True)
    save_ckpt(ck, model, opt, step, tokens, rng, time.time() - t_start, cur)
    print(f"# done step {step} tokens {tokens}", file=logf, flush=True)


if __name__ == "__main__":
    main()
