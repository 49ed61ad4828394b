"""Tests of the Python trace writer (pyramidkv_trace.py) through the C
reader: `pyramidkv trace --dump` must give back every value written, exactly
for float32 and as numpy's float16 rounding for float16; a corrupted file
must be refused with one line and exit status 2. Run by ctest
(test_trace_python) with PYRAMIDKV_BIN set to the pyramidkv program."""

import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyramidkv_trace as pt  # noqa: E402

BIN = os.environ.get("PYRAMIDKV_BIN", "pyramidkv")


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def hf_prompt(rng, heads, n, batch=1):
    """Causal attention of a prompt, shaped as HF returns it."""
    logits = rng.normal(size=(batch, heads, n, n)) * 3.0
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    logits[..., mask] = -np.inf
    return softmax(logits).astype(np.float32)


def hf_step(rng, heads, k, batch=1):
    return softmax(rng.normal(size=(batch, heads, 1, k)) * 3.0).astype(np.float32)


def dump(path):
    run = subprocess.run([BIN, "trace", str(path), "--dump"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    shape = lines[0].split()
    records = []
    i = 1
    while i < len(lines):
        f = lines[i].split()
        rec = {"kind": f[2], "layer": int(f[4]), "head": int(f[6]),
               "qhead": int(f[8]), "query": int(f[10]), "rows": int(f[12]),
               "length": int(f[14]), "dtype": f[16]}
        rows = [np.array(lines[i + 1 + j].split(), dtype=np.float64)
                .astype(np.float32) for j in range(rec["rows"])]
        rec["values"] = np.stack(rows)
        records.append(rec)
        i += 1 + rec["rows"]
    return shape, records


def test_crc_is_zlib():
    assert zlib.crc32(b"123456789") == 0xCBF43926


def write_model(path, dtype, reduce="mean", layers=None, heads=None):
    rng = np.random.default_rng(5)
    n_layers, kv, group, n, window = 3, 2, 2, 40, 8
    prompt = [hf_prompt(rng, kv * group, n) for _ in range(n_layers)]
    steps = [[hf_step(rng, kv * group, n + s + 1) for _ in range(n_layers)]
             for s in range(2)]
    with pt.TraceWriter(path, n_layers, kv, group) as w:
        count = pt.write_hf_attentions(w, prompt, kv, window=window,
                                       reduce=reduce, dtype=dtype,
                                       layers=layers, heads=heads)
        for st in steps:
            count += pt.write_hf_attentions(w, st, kv, reduce=reduce,
                                            dtype=dtype, layers=layers,
                                            heads=heads)
    return prompt, steps, count, (n_layers, kv, group, n, window)


def expected(prompt, steps, shape, reduce):
    n_layers, kv, group, n, window = shape
    out = []
    for source, is_prompt in [(prompt, True)] + [(s, False) for s in steps]:
        for l, a in enumerate(source):
            a = a[0].astype(np.float64)
            for h in range(kv):
                members = a[h * group:(h + 1) * group]
                items = ([(-1, members.mean(axis=0))] if reduce == "mean"
                         else list(enumerate(members)))
                for qh, rows in items:
                    rows = rows.astype(np.float32)
                    if is_prompt:
                        rows = rows[n - window:].copy()
                        for j in range(window):
                            rows[j, n - window + j + 1:] = 0.0
                    out.append((l, h, qh, is_prompt, rows))
    return out


@pytest.mark.parametrize("reduce", ["mean", None])
def test_round_trip_float32_exact(tmp_path, reduce):
    path = tmp_path / "f32.trace"
    prompt, steps, count, shape = write_model(path, "f32", reduce)
    header, records = dump(path)
    assert header == ["shape", "layers", "3", "kv_heads", "2", "group", "2"]
    want = expected(prompt, steps, shape, reduce)
    assert len(records) == count == len(want)
    for rec, (l, h, qh, is_prompt, rows) in zip(records, want):
        assert (rec["layer"], rec["head"], rec["qhead"]) == (l, h, qh)
        assert rec["kind"] == ("prefill" if is_prompt else "decode")
        assert rec["dtype"] == "f32"
        assert rec["values"].shape == rows.shape
        # Exact: the same float32 bits.
        assert np.array_equal(rec["values"].view(np.uint32),
                              rows.view(np.uint32))


def test_round_trip_float16_within_rounding(tmp_path):
    path = tmp_path / "f16.trace"
    prompt, steps, count, shape = write_model(path, "f16")
    _, records = dump(path)
    want = expected(prompt, steps, shape, "mean")
    assert len(records) == len(want)
    for rec, (_, _, _, _, rows) in zip(records, want):
        assert rec["dtype"] == "f16"
        # Exactly numpy's float16 rounding (nearest, ties to even) ...
        assert np.array_equal(rec["values"],
                              rows.astype(np.float16).astype(np.float32))
        # ... hence within half a float16 ulp of the float32 value.
        tol = np.maximum(np.abs(rows) * 2.0 ** -11, 2.0 ** -25)
        assert np.all(np.abs(rec["values"] - rows) <= tol)


def test_subset_of_layers_and_heads(tmp_path):
    path = tmp_path / "subset.trace"
    _, _, count, _ = write_model(path, "f16", layers={0, 2}, heads={1})
    _, records = dump(path)
    assert len(records) == count == 2 * 1 * 3
    assert {r["layer"] for r in records} == {0, 2}
    assert {r["head"] for r in records} == {1}
    run = subprocess.run([BIN, "calibrate", str(path), "--budget", "20"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "recommendation:" in run.stdout


def test_corrupt_file_is_one_error_line(tmp_path):
    path = tmp_path / "bad.trace"
    write_model(path, "f32")
    data = bytearray(path.read_bytes())
    data[200] ^= 0x40
    path.write_bytes(bytes(data))
    for cmd in (["trace", str(path)], ["calibrate", str(path)],
                ["replay", str(path), "--policy", "snapkv", "--schedule",
                 "uniform", "--budget", "40"]):
        run = subprocess.run([BIN] + cmd, capture_output=True, text=True)
        assert run.returncode == 2
        assert run.stdout == ""
        assert len(run.stderr.splitlines()) == 1
        assert "checksum mismatch" in run.stderr


def test_writer_refuses_bad_records(tmp_path):
    with pt.TraceWriter(tmp_path / "x.trace", 2, 1, 1) as w:
        with pytest.raises(pt.TraceError):
            w.add_decode(2, 0, [1.0, 0.0])
        with pytest.raises(pt.TraceError):
            w.add_decode(0, 0, [1.0, float("nan")])
        with pytest.raises(pt.TraceError):
            w.add_decode(0, 0, [1.0, -0.5])
        with pytest.raises(pt.TraceError):
            w.add_decode(0, 0, [1e6, 1.0], dtype="f16")
        w.add_decode(1, 0, [0.25, 0.75])
    run = subprocess.run([BIN, "trace", str(tmp_path / "x.trace")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "records: 0 prefill, 1 decode" in run.stdout


@pytest.mark.parametrize("reduce", ["mean", None])
def test_future_records_round_trip(tmp_path, reduce):
    """One call over a prompt of P positions and F later tokens with
    prompt_len=P: a prefill record of the first P rows' window over keys
    0 .. P - 1, then a future record (kind 3) of rows P .. P + F - 1 over
    all keys; the file says version 2 and calibrate ranks by the peak."""
    rng = np.random.default_rng(11)
    n_layers, kv, group, p, f, window = 2, 2, 2, 36, 5, 8
    full = [hf_prompt(rng, kv * group, p + f) for _ in range(n_layers)]
    path = tmp_path / "future.trace"
    with pt.TraceWriter(path, n_layers, kv, group) as w:
        count = pt.write_hf_attentions(w, full, kv, window=window,
                                       reduce=reduce, prompt_len=p)
    assert path.read_bytes()[8] == 2  # the version field
    _, records = dump(path)
    per_head = 1 if reduce == "mean" else group
    assert len(records) == count == n_layers * kv * per_head * 2
    i = 0
    for l in range(n_layers):
        a = full[l][0].astype(np.float64)
        for h in range(kv):
            members = a[h * group:(h + 1) * group]
            items = ([members.mean(axis=0)] if reduce == "mean"
                     else list(members))
            pre, fut = [], []
            for rows in items:
                pre.append(rows[p - window:p, :p].astype(np.float32))
                fut.append(rows[p:, :].astype(np.float32))
            for kind, want, q in (("prefill", pre, p - window),
                                  ("future", fut, p)):
                for rows in want:
                    rec = records[i]
                    i += 1
                    assert (rec["kind"], rec["layer"], rec["head"]) == \
                        (kind, l, h)
                    assert rec["query"] == q
                    assert np.array_equal(rec["values"].view(np.uint32),
                                          rows.view(np.uint32))
    run = subprocess.run([BIN, "calibrate", str(path), "--budget", "16",
                          "--recent", "4", "--json"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert '"peakLoss"' in run.stdout


def test_prompt_len_must_leave_later_tokens(tmp_path):
    with pt.TraceWriter(tmp_path / "y.trace", 1, 1, 1) as w:
        rows = np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, np.newaxis]
        with pytest.raises(pt.TraceError):  # no token after the prompt
            pt.write_hf_attentions(w, [rows[np.newaxis, np.newaxis]], 1,
                                   prompt_len=6)
        w.add_prefill(0, 0, np.full((2, 4), 0.25))
    assert (tmp_path / "y.trace").read_bytes()[8] == 1
