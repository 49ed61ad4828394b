"""Grow a trained model into a larger shape without changing what it computes.

What this file owns: grow(), the function-preserving map from a trained
model's weights (m1t) to the start of recipe m2g (recipes.py): more layers,
more KV heads, more query heads per KV head, a longer context, the same
width, head size, MLP and rotary base. docs/model.md, "The models", says
why and what it costs (m2g is not independent of m1t).

- Each source layer i goes to destination layer place(i) (spread evenly,
  the first and last kept in place); the other destination layers are new.
- In a source layer, KV head g keeps its K and V rows; its query heads
  (G_src of them) take the first G_src of the G_dst query slots of that KV
  head, with their output columns of wo. Every other query slot and every
  new KV head gets random rows (N(0, 0.02), the model's init) and zero
  output columns, so it adds nothing until training moves its wo.
- A new layer: random attention and MLP inputs, zero wo and w2 (its
  residual branches add nothing), norm weights 1.
- Embedding, final norm and output layer are copied.

So at step 0 the grown model's logits equal the source's at every position
the source was trained on (up to float summation order; the test checks
1e-4), and its gradients reach the new heads and layers through their zero
output weights first.
"""
import math

import torch

SAME = ("vocab", "dim", "head_dim", "ffn_dim", "rope_theta", "norm_eps")


def place(n_src, n_dst):
    """The destination layer of each source layer: evenly spread, 0 -> 0
    and the last -> the last."""
    if n_src == 1:
        return [0]
    return [round(i * (n_dst - 1) / (n_src - 1)) for i in range(n_src)]


def check(cs, cd):
    """Raise ValueError unless cd is a growth of cs."""
    for k in SAME:  # a weights file stores rope_theta and norm_eps as float32
        if not math.isclose(cs[k], cd[k], rel_tol=1e-6):
            raise ValueError(f"grow: {k} differs ({cs[k]} -> {cd[k]})")
    gs = cs["n_heads"] // cs["n_kv_heads"]
    gd = cd["n_heads"] // cd["n_kv_heads"]
    if not (cd["n_layers"] >= cs["n_layers"]
            and cd["n_kv_heads"] >= cs["n_kv_heads"] and gd >= gs
            and cd["max_ctx"] >= cs["max_ctx"]):
        raise ValueError(f"grow: {cd} is not larger than {cs} everywhere")


def grow(sd, cs, cd, seed=7):
    """The state dict of a model of shape cd that computes what sd (shape
    cs) computes; the new weights drawn from torch.Generator(seed)."""
    check(cs, cd)
    g = torch.Generator().manual_seed(seed)
    hd, d, f = cs["head_dim"], cs["dim"], cs["ffn_dim"]
    hq, hkv = cd["n_heads"] * hd, cd["n_kv_heads"] * hd
    gs = cs["n_heads"] // cs["n_kv_heads"]
    gd = cd["n_heads"] // cd["n_kv_heads"]

    def rnd(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    out = {k: sd[k].clone() for k in ("emb.weight", "norm.weight", "out.weight")}
    src_of = {j: i for i, j in enumerate(place(cs["n_layers"], cd["n_layers"]))}
    for j in range(cd["n_layers"]):
        p = f"layers.{j}."
        w = {"wq": rnd(hq, d), "wk": rnd(hkv, d), "wv": rnd(hkv, d),
             "wo": torch.zeros(d, hq), "w1": rnd(f, d), "w3": rnd(f, d),
             "w2": torch.zeros(d, f), "attn_norm": torch.ones(d),
             "ffn_norm": torch.ones(d)}
        if j in src_of:
            s = f"layers.{src_of[j]}."
            for n in ("w1", "w2", "w3", "attn_norm", "ffn_norm"):
                w[n] = sd[s + n + ".weight"].clone()
            for kv in range(cs["n_kv_heads"]):
                rows = slice(kv * hd, (kv + 1) * hd)
                w["wk"][rows] = sd[s + "wk.weight"][rows]
                w["wv"][rows] = sd[s + "wv.weight"][rows]
                for q in range(gs):
                    a = slice((kv * gs + q) * hd, (kv * gs + q + 1) * hd)
                    b = slice((kv * gd + q) * hd, (kv * gd + q + 1) * hd)
                    w["wq"][b] = sd[s + "wq.weight"][a]
                    w["wo"][:, b] = sd[s + "wo.weight"][:, a]
        out.update({p + n + ".weight": t for n, t in w.items()})
    return out
