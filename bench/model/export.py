#!/usr/bin/python3
"""Export a training checkpoint to the runtime's weights file and write the
torch reference logits the C logits test compares against.

What this file owns: the little-endian weights format of docs/model.md
(writer, and the reader train.py's --init uses) and the reference-logits
file format (same document).

  /usr/bin/python3 bench/model/export.py --ckpt CKPT/last.pt \
      --out bench/model/data/model.pkvm --ref bench/model/data/ref_logits.bin \
      --heldout bench/model/data/heldout.txt

  /usr/bin/python3 bench/model/export.py --random m2 \
      --out bench/model/data/model2_init.pkvm --ref bench/model/data/ref2_init.bin

--random RECIPE writes a random-init model of that recipe's shape instead
(seed 7; every linear layer N(0, 1/fan_in), embeddings N(0, 1), norm
weights 1 + U(-0.5, 0.5), so attention and logits are far from uniform):
the runtime's logits test for a shape before trained weights exist.
Both outputs come from the same weights, so the test always matches the
committed model. Reference logits are computed in float32 on the CPU from
the weights as written (they are float32 already: nothing is rounded).
"""
import argparse
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import net  # noqa: E402  (the model definition)
import recipes  # noqa: E402  (the recipes)
import train  # noqa: E402  (the text)

MAGIC = b"PKVM"
VERSION = 1

# Short prompts whose logits the C runtime must reproduce at every position.
REF_PROMPTS = [
    b"In the beginning God created the heaven and the earth.",
    b"The pass key is 31415. Remember it. And the LORD spake unto Moses, "
    b"saying,\nWhat is the pass key? The pass key is ",
    b"\x00\xff byte soup 0123456789 ~!@#$%^&*()",
]


def tensors_in_order(sd, c):
    """(name, tensor) in file order; shapes as torch stores them ([out, in]
    for linear layers)."""
    out = [("emb.weight", sd["emb.weight"])]
    for i in range(c["n_layers"]):
        for n in ("attn_norm.weight", "wq.weight", "wk.weight", "wv.weight",
                  "wo.weight", "ffn_norm.weight", "w1.weight", "w3.weight",
                  "w2.weight"):
            out.append((f"layers.{i}.{n}", sd[f"layers.{i}.{n}"]))
    out.append(("norm.weight", sd["norm.weight"]))
    out.append(("out.weight", sd["out.weight"]))
    return out


def write_weights(path, model, meta):
    c = model.c
    sd = model.state_dict()
    hdr = MAGIC + struct.pack("<9I2f", VERSION, c["vocab"], c["dim"],
                              c["n_layers"], c["n_heads"], c["n_kv_heads"],
                              c["head_dim"], c["ffn_dim"], c["max_ctx"],
                              c["rope_theta"], c["norm_eps"])
    hdr += struct.pack("<2Q", meta["step"], meta["tokens"])
    assert len(hdr) == 64, len(hdr)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(hdr)
        for _, t in tensors_in_order(sd, c):
            f.write(t.detach().contiguous().numpy().astype("<f4").tobytes())
    os.replace(tmp, path)


def read_weights(path):
    """(config, state_dict, step, tokens) of a weights file: the inverse of
    write_weights, exact (float32 both ways)."""
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:4] != MAGIC or struct.unpack_from("<I", blob, 4)[0] != VERSION:
        raise ValueError(f"{path}: not a version {VERSION} weights file")
    u = struct.unpack_from("<8I", blob, 8)
    theta, eps = struct.unpack_from("<2f", blob, 40)
    step, tokens = struct.unpack_from("<2Q", blob, 48)
    c = dict(vocab=u[0], dim=u[1], n_layers=u[2], n_heads=u[3], n_kv_heads=u[4],
             head_dim=u[5], ffn_dim=u[6], max_ctx=u[7], rope_theta=float(theta),
             norm_eps=float(eps))
    shapes = net.Model(c).state_dict()
    sd, off = {}, 64
    for name, t in tensors_in_order(shapes, c):
        n = t.numel()
        a = np.frombuffer(blob, dtype="<f4", count=n, offset=off)
        sd[name] = torch.from_numpy(a.astype(np.float32).reshape(t.shape))
        off += 4 * n
    if off != len(blob):
        raise ValueError(f"{path}: {len(blob)} bytes, the header's shape needs {off}")
    return c, sd, step, tokens


def write_ref(path, model):
    """Format: "PKVR", u32 version 1, u32 prompt count; then per prompt u32
    length n, n prompt bytes, n x 256 float32 logits (position-major)."""
    blob = bytearray(b"PKVR" + struct.pack("<2I", 1, len(REF_PROMPTS)))
    with torch.no_grad():
        for p in REF_PROMPTS:
            x = torch.tensor([list(p)], dtype=torch.int64)
            lg = model(x)[0].numpy().astype("<f4")
            blob += struct.pack("<I", len(p)) + p + lg.tobytes()
    with open(path, "wb") as f:
        f.write(blob)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", help="a checkpoint, CKPT_DIR/last.pt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--heldout", help="also write the held-out text here")
    ap.add_argument("--random", choices=sorted(recipes.RECIPES),
                    help="a random-init model of this recipe, no checkpoint")
    args = ap.parse_args()
    if not args.ckpt and not args.random:
        ap.error("--ckpt or --random is required")
    torch.set_num_threads(1)
    if args.random:
        torch.manual_seed(7)
        model = net.Model(recipes.RECIPES[args.random]["config"])
        with torch.no_grad():
            for n, t in model.named_parameters():
                if n.endswith("norm.weight"):
                    t.copy_(1.0 + torch.rand_like(t) - 0.5)
                elif n == "emb.weight":
                    t.normal_(0.0, 1.0)
                else:
                    t.normal_(0.0, t.shape[1] ** -0.5)
        st = dict(step=0, tokens=0)
    else:
        st = torch.load(args.ckpt, map_location="cpu", weights_only=False)
        model = net.Model(st["config"])
        model.load_state_dict(st["model"])
        # a run started from another's weights (--init) counts them too
        st = dict(st, step=st["step"] + st.get("init_step", 0),
                  tokens=st["tokens"] + st.get("init_tokens", 0))
    model.eval()
    write_weights(args.out, model, st)
    write_ref(args.ref, model)
    if args.heldout:
        with open(args.heldout, "wb") as f:
            f.write(train.load_kjv()[1])
    print(f"exported step {st['step']} tokens {st['tokens']}: "
          f"{os.path.getsize(args.out)} bytes -> {args.out}; "
          f"reference logits -> {args.ref}")


if __name__ == "__main__":
    main()
