"""Preference records (kind 4, trace version 3) from the Python trace
writer (pyramidkv.trace: TraceWriter.add_preference, write_hf_preference):
their bytes against the format (docs/trace_format.md) encoded here from the
tables, a round trip through the C reader (`pyramidkv trace --dump`),
`pyramidkv calibrate --json` taking CAKE's preference from them as
docs/spec.md §18.2 defines it (recomputed here from the formulas, and with
the library's pb_cake_layer_preference over every query head at once, as
the runtime calls it), version 1 and 2 files unchanged byte for byte, and
bad arguments refused before anything is written."""
import hashlib
import json
import struct
import subprocess
import zlib

import numpy as np
import pytest

import pyramidkv.trace as pt


def causal_rows(rows, n, sharp, rng):
    """The last `rows` rows of a causal softmax over n keys, float32."""
    logits = rng.normal(size=(rows, n)) * sharp
    for j in range(rows):
        logits[j, n - rows + j + 1:] = -np.inf
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def hf_text(rng, heads, n, sharp):
    """Attention of one call over a text, shaped as HF returns it
    [1, heads, n, n]; head h has sharpness sharp[h]."""
    return np.stack([causal_rows(n, n, s, rng) for s in sharp])[np.newaxis]


def dump(cli, path):
    run = subprocess.run([cli, "trace", str(path), "--dump"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    records, i = [], 1
    while i < len(lines):
        f = lines[i].split()
        rec = {"kind": f[2], "layer": int(f[4]), "head": int(f[6]),
               "qhead": int(f[8]), "query": int(f[10]), "rows": int(f[12]),
               "length": int(f[14]), "dtype": f[16]}
        rec["values"] = np.stack([
            np.array(lines[i + 1 + j].split(), dtype=np.float64)
            .astype(np.float32) for j in range(rec["rows"])])
        records.append(rec)
        i += 1 + rec["rows"]
    return records


def calibrate(cli, path, *extra):
    run = subprocess.run([cli, "calibrate", str(path), "--budget", "16",
                          "--recent", "4", "--json", "--progress", "off"]
                         + list(extra), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def entropy_variance(v):
    """docs/spec.md §17.1 for one record [R, n] from the definition, over
    the prefix columns p < n - R: H = max(0, -sum a ln(a + 1e-10)), V = the
    sum over p of the rows' sample variance (0 for one row)."""
    a = v.astype(np.float64)[:, :v.shape[1] - v.shape[0]]
    h = max(0.0, float(-(a * np.log(a + 1e-10)).sum()))
    var = float(a.var(axis=0, ddof=1).sum()) if a.shape[0] > 1 else 0.0
    return h, var


def spec_preference(texts, tau1=1.6, tau2=0.6):
    """§18.2: per text, H and V summed over its records, P_k =
    H^(1/tau1) V^(1/tau2); the layer's P the mean over the texts."""
    ps = []
    for recs in texts:
        hv = [entropy_variance(r) for r in recs]
        hs, vs = sum(x[0] for x in hv), sum(x[1] for x in hv)
        ps.append(hs ** (1.0 / tau1) * vs ** (1.0 / tau2))
    return sum(ps) / len(ps)


def near(got, want):
    return abs(got - want) <= 1e-9 * abs(want)


LAYERS, KV, GROUP, N, ROWS, TEXTS, TLEN = 2, 2, 2, 40, 6, 3, 30


def make_rows():
    rng = np.random.default_rng(29)
    prompts = {(l, h): causal_rows(ROWS, N, 1.5 + h + l, rng)
               for l in range(LAYERS) for h in range(KV)}
    texts = [{(h, g): causal_rows(ROWS, TLEN, 1.0 + 2.0 * g + t, rng)
              for h in range(KV) for g in range(GROUP)}
             for t in range(TEXTS)]
    return prompts, texts


def write_trace(path, prompts, texts, pref_layers=(0,), dtype="f32"):
    """Reduced prefill records of one prompt per (layer, KV head), and
    the preference records of every query head for each text on
    pref_layers (text by text, as a runtime measures them)."""
    with pt.TraceWriter(path, LAYERS, KV, GROUP) as w:
        for t, text in enumerate(texts):
            for l in pref_layers:
                for (h, g), rows in text.items():
                    w.add_preference(l, h, rows, qhead=g, dtype=dtype)
        for (l, h), rows in prompts.items():
            w.add_prefill(l, h, rows)
    return path


def test_record_bytes_follow_the_format(tmp_path):
    """A one-record file encoded here from the tables of
    docs/trace_format.md, field by field."""
    rows = np.array([[0.5, 0.5, 0.0], [0.25, 0.25, 0.5]], np.float32)
    path = tmp_path / "one.trace"
    with pt.TraceWriter(path, 3, 2, 4) as w:
        w.add_preference(2, 1, rows, qhead=3)
    head = b"\x89PBTR\r\n\x1a" + struct.pack("<7I", 3, 40, 3, 2, 4, 0, 0)
    rec = b"REC1" + struct.pack("<BBH6I", 4, 1, 0, 2, 1, 3, 1, 2, 3)
    payload = rows.astype("<f4").tobytes()
    end = b"END1" + struct.pack("<IQ", 0, 1) + bytes(16)
    want = (head + struct.pack("<I", zlib.crc32(head))
            + rec + struct.pack("<I", zlib.crc32(rec))
            + payload + struct.pack("<I", zlib.crc32(payload))
            + end + struct.pack("<I", zlib.crc32(end)))
    assert path.read_bytes() == want


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_round_trip_through_the_c_reader(cli, tmp_path, dtype):
    prompts, texts = make_rows()
    path = write_trace(tmp_path / "pref.trace", prompts, texts, (0, 1),
                       dtype)
    assert path.read_bytes()[8] == 3
    records = dump(cli, path)
    pref = [r for r in records if r["kind"] == "preference"]
    assert len(pref) == TEXTS * LAYERS * KV * GROUP
    i = 0
    for t in range(TEXTS):
        for l in (0, 1):
            for (h, g), rows in texts[t].items():
                rec = pref[i]
                i += 1
                assert (rec["layer"], rec["head"], rec["qhead"]) == (l, h, g)
                assert (rec["query"], rec["rows"], rec["length"]) == \
                    (TLEN - ROWS, ROWS, TLEN)
                assert rec["dtype"] == dtype
                want = rows if dtype == "f32" else \
                    rows.astype(np.float16).astype(np.float32)
                assert np.array_equal(rec["values"].view(np.uint32),
                                      want.view(np.uint32))
    run = subprocess.run([cli, "trace", str(path)], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert "4 prefill, 0 decode, 0 future, 24 preference" in run.stdout


def test_calibrate_takes_the_preference_from_the_records(cli, tmp_path):
    """Layer 0 has texts: its P is the spec's formula over them (and the
    runtime's one call over every query head of a text); layer 1 has none
    and takes P from its prompt. --cake-pref is not needed."""
    import pyramidkv as pk
    prompts, texts = make_rows()
    doc = calibrate(cli, write_trace(tmp_path / "p.trace", prompts, texts))
    l0, l1 = doc["profile"]
    assert l0["cakePreferenceFrom"] == "preference"
    assert l1["cakePreferenceFrom"] == "prompts"
    per_text = [[t[(h, g)] for h in range(KV) for g in range(GROUP)]
                for t in texts]
    assert near(l0["cakePreference"], spec_preference(per_text))
    runtime = np.mean([pk.cake_layer_preference(np.stack(recs), 1.6, 0.6)[2]
                       for recs in per_text])
    assert near(l0["cakePreference"], runtime)
    assert near(l1["cakePreference"],
                spec_preference([[prompts[(1, h)] for h in range(KV)]]))
    # The preference differs from the prompts' (else this proves nothing).
    plain = calibrate(cli, write_trace(tmp_path / "n.trace", prompts, []))
    assert plain["profile"][0]["cakePreferenceFrom"] == "prompts"
    assert not near(plain["profile"][0]["cakePreference"],
                    l0["cakePreference"])


def test_preference_equal_to_the_prompts_gives_their_p(cli, tmp_path):
    """Preference records holding the prompts' own rows (reduced, as the
    prefill records) give calibrate's prompt-derived P: the records are
    read the way the C reader reads prompts."""
    prompts, _ = make_rows()
    path = tmp_path / "same.trace"
    with pt.TraceWriter(path, LAYERS, KV, GROUP) as w:
        for (l, h), rows in prompts.items():
            w.add_preference(l, h, rows)
            w.add_prefill(l, h, rows)
    pref = calibrate(cli, path)
    plain = calibrate(cli, write_trace(tmp_path / "n.trace", prompts, []))
    for a, b in zip(pref["profile"], plain["profile"]):
        assert a["cakePreferenceFrom"] == "preference"
        assert near(a["cakePreference"], b["cakePreference"])


def test_write_hf_preference(cli, tmp_path):
    """One call per text over every query head: text k of each stream is
    the k-th call's last `window` rows; calibrate's P is the spec's."""
    rng = np.random.default_rng(3)
    calls = [[hf_text(rng, KV * GROUP, TLEN, [1.0 + h + t for h in
                                              range(KV * GROUP)])
              for _ in range(LAYERS)] for t in range(2)]
    prompts, _ = make_rows()
    path = tmp_path / "hf.trace"
    with pt.TraceWriter(path, LAYERS, KV, GROUP) as w:
        for attn in calls:
            assert pt.write_hf_preference(w, attn, KV, window=ROWS) == \
                LAYERS * KV * GROUP
        for (l, h), rows in prompts.items():
            w.add_prefill(l, h, rows)
    assert path.read_bytes()[8] == 3
    pref = [r for r in dump(cli, path) if r["kind"] == "preference"]
    assert [(r["layer"], r["head"], r["qhead"]) for r in pref] == \
        [(l, h, g) for _ in calls for l in range(LAYERS) for h in range(KV)
         for g in range(GROUP)]
    doc = calibrate(cli, path)
    for l in range(LAYERS):
        per_text = [[a[l][0, h, TLEN - ROWS:] for h in range(KV * GROUP)]
                    for a in calls]
        assert doc["profile"][l]["cakePreferenceFrom"] == "preference"
        assert near(doc["profile"][l]["cakePreference"],
                    spec_preference(per_text))


# Version 1 and 2 files written by the writer before preference records
# existed: the sha256 of what it wrote for write_old() (the writer of the
# commit before this test, run on these rows).
OLD_SHA256 = {
    False: "57df7e9ddf3a387bb10a74a14f1cbcc95e85bba7acff49e77cc803a755f012de",
    True: "6e264c665c9bf095a3fe496ff227d50491d48b1504b17fb9aa20616d738f6a73",
}


def exact_rows(r, n, s):
    """Rows whose float32 values are the same on every IEEE platform."""
    v = np.zeros((r, n))
    for j in range(r):
        q = n - r + j
        w = np.arange(1, q + 2, dtype=np.float64) + s
        v[j, :q + 1] = w / w.sum()
    return v


def write_old(path, future):
    with pt.TraceWriter(path, 2, 2, 2) as w:
        for l in range(2):
            for h in range(2):
                w.add_prefill(l, h, exact_rows(4, 12, l + h), dtype="f32")
                w.add_prefill(l, h, exact_rows(3, 10, h), qhead=1,
                              dtype="f16")
                if future:
                    w.add_future(l, h, exact_rows(2, 14, l))
                w.add_decode(l, h, exact_rows(1, 13, 1)[0])


@pytest.mark.parametrize("future", [False, True])
def test_version_1_and_2_files_unchanged(tmp_path, future):
    path = tmp_path / "old.trace"
    write_old(path, future)
    data = path.read_bytes()
    assert data[8] == (2 if future else 1)
    assert hashlib.sha256(data).hexdigest() == OLD_SHA256[future]


def test_future_and_preference_make_version_3(cli, tmp_path):
    path = tmp_path / "both.trace"
    with pt.TraceWriter(path, 1, 1, 1) as w:
        w.add_prefill(0, 0, exact_rows(3, 10, 0))
        w.add_future(0, 0, exact_rows(2, 12, 0))
        w.add_preference(0, 0, exact_rows(3, 9, 1), qhead=0)
    assert path.read_bytes()[8] == 3
    assert [r["kind"] for r in dump(cli, path)] == \
        ["prefill", "future", "preference"]


def test_causal_part_is_written_as_zero(cli, tmp_path):
    """Row j of R is the query at n - R + j: its keys above it are 0."""
    path = tmp_path / "causal.trace"
    with pt.TraceWriter(path, 1, 1, 1) as w:
        w.add_preference(0, 0, np.full((2, 4), 0.25), qhead=0)
    (rec,) = dump(cli, path)
    assert rec["values"].tolist() == [[0.25, 0.25, 0.25, 0.0],
                                      [0.25, 0.25, 0.25, 0.25]]


def test_bad_arguments_raise_and_write_nothing(cli, tmp_path):
    path = tmp_path / "bad.trace"
    ok = exact_rows(3, 8, 0)
    with pt.TraceWriter(path, 2, 2, 2) as w:
        bad = [
            (pt.TraceError, dict(layer=2)),            # layer out of range
            (pt.TraceError, dict(head=2)),             # KV head
            (pt.TraceError, dict(qhead=2)),            # query head
            (pt.TraceError, dict(qhead=-1)),
            (pt.TraceError, dict(rows=ok[0])),         # 1-dimensional
            (pt.TraceError, dict(rows=np.ones((9, 8)) / 8)),  # R > n
            (pt.TraceError, dict(rows=np.zeros((0, 8)))),
            (pt.TraceError, dict(rows=-ok)),           # negative
            (pt.TraceError, dict(rows=ok * np.nan)),   # NaN
            (pt.TraceError, dict(rows=ok * 1e6, dtype="f16")),  # overflow
            (pt.TraceError, dict(dtype="f64")),
            (TypeError, dict(layer=0.5)),
            (TypeError, dict(head="0")),
            (TypeError, dict(qhead=None)),
            (TypeError, dict(layer=True)),
            (TypeError, dict(rows=[["a", "b"]])),
        ]
        for exc, kw in bad:
            args = dict(layer=0, head=0, rows=ok, qhead=0, dtype="f32")
            args.update(kw)
            with pytest.raises(exc):
                w.add_preference(**args)
        assert issubclass(pt.TraceError, ValueError)
        text = hf_text(np.random.default_rng(1), 4, 8, [1.0] * 4)
        with pytest.raises(pt.TraceError, match="q == k"):
            pt.write_hf_preference(w, [text[:, :, -1:, :]], 2)  # a decode
        with pytest.raises(pt.TraceError, match="group size"):
            pt.write_hf_preference(w, [np.concatenate([text, text], 1)], 2)
        with pytest.raises(pt.TraceError, match="window"):
            pt.write_hf_preference(w, [text], 2, window=0)
        with pytest.raises(pt.TraceError, match="reduce"):
            pt.write_hf_preference(w, [text], 2, reduce="max")
        w.add_prefill(1, 1, ok)
    # Nothing of the refused calls reached the file: version 1, one record.
    assert path.read_bytes()[8] == 1
    assert [r["kind"] for r in dump(cli, path)] == ["prefill"]
