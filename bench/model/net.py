"""The byte-level Llama-style decoders that bench/model runs in C, in torch.

What this file owns: the shapes (CONFIG_M1, CONFIG_M2, CONFIG_M2G;
same_shape compares two) and the forward pass (RMSNorm, rotary positions,
grouped-query attention, SwiGLU), the definition train.py trains,
export.py writes and reads and bench/python/press_model.py runs. docs/model.md states the same step in
words; the C runtime (pkm_model.c) is tested against its logits.
"""
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tckpt

CONFIG_M1 = dict(
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

# The second model: deeper, Llama-style grouped heads (4 query heads per KV
# head, 4 KV heads), 1024 positions. The CPU sets the context: attention
# over 16 query heads dominates the cost (measured with --bench on two
# cores: 877 tokens/s at 128 positions, 401 at 256, 114 at 1024), so 2048
# positions would not train within a session. head_dim 16 keeps it at
# that; the rope base 10000 gives the slowest pair a wavelength of
# 2 pi 10000^(14/16) = 20,000 positions, twenty times the context.
CONFIG_M2 = dict(
    vocab=256,
    dim=128,
    n_layers=12,
    n_heads=16,
    n_kv_heads=4,
    head_dim=16,
    ffn_dim=384,
    max_ctx=1024,
    rope_theta=10000.0,
    norm_eps=1e-5,
)


# m2g: the second model's shape grown from m1t's (grow.py): m1's width,
# head size, MLP and rotary base, with 12 layers, 4 KV heads of 4 query
# heads each and 1024 positions (the rotary base's slowest pair: a
# wavelength of 2 pi 10000^(30/32) = 35,000 positions).
CONFIG_M2G = dict(CONFIG_M1, n_layers=12, n_heads=16, n_kv_heads=4,
                  max_ctx=1024)

# Query rows per block of Block's causal attention (want_attn: one block).
ATTN_ROWS = 256


def same_shape(a, b):
    """Whether two shapes are one: the same fields, every one equal, the
    float ones (rope_theta, norm_eps) as the float32 a weights file
    stores them."""
    def f32(x):
        return struct.unpack("<f", struct.pack("<f", x))[0] \
            if isinstance(x, float) else x
    return a.keys() == b.keys() and all(f32(a[k]) == f32(b[k]) for k in a)


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
        g, BH = self.h // self.kv, B * self.h
        # query head j reads KV head j // g: K and V repeated per query head,
        # one batched product per head with the mask added inside it (on two
        # CPU cores 1.7x faster than one product per KV group, head_dim 16)
        kh = k.repeat_interleave(g, dim=1).reshape(BH, T, self.hd)
        vh = v.repeat_interleave(g, dim=1).reshape(BH, T, self.hd)
        qh = q.reshape(BH, T, self.hd)
        if want_attn:
            s = torch.baddbmm(mask.expand(BH, T, T), qh, kh.transpose(1, 2))
            p = torch.softmax(s, dim=-1)
            o = torch.bmm(p, vh)
        else:
            # ATTN_ROWS query rows at a time, each block reading the keys up
            # to its last row only: the same sums (the skipped keys are
            # masked), 5/8 of the products at four blocks, and blocks that
            # stay in cache: a training step of m2g at 1024 (bfloat16) ran
            # 2.4x the tokens/s of one T x T product
            outs = []
            for a in range(0, T, ATTN_ROWS):
                b = min(a + ATTN_ROWS, T)
                s = torch.baddbmm(mask[a:b, :b].expand(BH, b - a, b),
                                  qh[:, a:b], kh[:, :b].transpose(1, 2))
                outs.append(torch.bmm(torch.softmax(s, dim=-1), vh[:, :b]))
            o = torch.cat(outs, 1) if len(outs) > 1 else outs[0]
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

    def forward(self, idx, want_attn=False, pos=None):
        """pos: (B, T) increasing position ids (training's position skips);
        None: 0 .. T-1, as the C runtime runs."""
        B, T = idx.shape
        if pos is None:
            cos, sin = self.cos[:T], self.sin[:T]
        else:
            cos, sin = self.cos[pos][:, None], self.sin[pos][:, None]
        mask = torch.full((T, T), float("-inf"), device=idx.device).triu(1)
        x = self.emb(idx)
        attns = []
        # recompute each block's attention in the backward pass at long
        # contexts (the saved T x T probabilities would not fit otherwise)
        recompute = self.training and T >= getattr(self, "recompute_from", 1 << 30)
        for b in self.layers:
            if want_attn:
                x, p = b(x, cos, sin, mask, True)
                attns.append(p)
            elif recompute:
                x = tckpt.checkpoint(b, x, cos, sin, mask)
            else:
                x = b(x, cos, sin, mask)
        # the output head in float32 under autocast too (train.py --bf16):
        # the answers' loss is read off gaps between logits that bfloat16's
        # 8 bits would round (0.125 at a logit of 20)
        with torch.autocast(idx.device.type, enabled=False):
            logits = self.out(self.norm(x.float()))
        return (logits, attns) if want_attn else logits
