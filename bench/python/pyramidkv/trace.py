"""Write libpyramidkv attention traces (docs/trace_format.md) from Python.

This module owns the writer side of the trace format; the C reader is
bench/trace/trace_io.c. It is also importable as ``pyramidkv_trace`` (the
shim bench/trace/pyramidkv_trace.py) and needs numpy only.

For PyTorch / Hugging Face users: run the model with output_attentions=True
and pass the per-layer attention arrays, shaped [batch, heads, q, k], to
``write_hf_attentions``. Needs numpy only (torch tensors are converted with
``numpy.asarray``, so move them to the CPU first).

    import pyramidkv.trace as pt
    out = model(input_ids, output_attentions=True)
    with pt.TraceWriter("model.trace", num_layers=32, num_kv_heads=8,
                        group_size=4) as w:
        pt.write_hf_attentions(w, out.attentions, num_kv_heads=8, window=32)
    # then:  pyramidkv calibrate model.trace --budget 512

For calibrate's future measures (docs/calibrate.md), run the prompt and
the tokens after it (the answer, or the question and the answer) in one
call and pass ``prompt_len``: each layer and KV head gets the prompt's
window rows as a prefill record and the later tokens' rows as a future
record (kind 3); the file is then version 2.

    out = model(torch.cat([prompt_ids, answer_ids], 1), output_attentions=True)
    pt.write_hf_attentions(w, out.attentions, num_kv_heads=8, window=32,
                           prompt_len=prompt_ids.shape[1])

The file is then read by ``pyramidkv trace``, ``calibrate`` and ``replay``.
"""

import struct
import zlib

import numpy as np

MAGIC = b"\x89PBTR\r\n\x1a"
VERSION = 1
VERSION_FUTURE = 2
HEADER_SIZE = 40
PREFILL = 1
DECODE = 2
FUTURE = 3
F32 = 1
F16 = 2
GROUP_REDUCED = 0xFFFFFFFF
MAX_LEN = 1 << 24
MAX_ROWS = 65536
MAX_VALUES = 1 << 26


class TraceError(ValueError):
    """A record or shape the format does not allow."""


def _dtype_code(dtype):
    if dtype in ("f32", "float32", np.float32):
        return F32
    if dtype in ("f16", "float16", np.float16):
        return F16
    raise TraceError("dtype must be 'f32' or 'f16', not %r" % (dtype,))


class TraceWriter:
    """Writes one trace file: the header at open, records, the end record
    at close (a file without it is reported as truncated). The header
    says version 1 unless a future record was written: then close
    rewrites it as version 2."""

    def __init__(self, path, num_layers, num_kv_heads, group_size=1):
        for name, value, hi in (("num_layers", num_layers, 65536),
                                ("num_kv_heads", num_kv_heads, 65536),
                                ("group_size", group_size, 1024)):
            if not 1 <= int(value) <= hi:
                raise TraceError("%s must be 1 .. %d, not %r" % (name, hi, value))
        self.num_layers = int(num_layers)
        self.num_kv_heads = int(num_kv_heads)
        self.group_size = int(group_size)
        self.records = 0
        self.future = 0
        self._file = open(path, "wb")
        self._header(VERSION)

    def _header(self, version):
        head = MAGIC + struct.pack("<IIIIIII", version, HEADER_SIZE,
                                   self.num_layers, self.num_kv_heads,
                                   self.group_size, 0, 0)
        self._file.write(head + struct.pack("<I", zlib.crc32(head)))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self._file.close()

    def add(self, kind, layer, head, qhead, query, values, dtype="f32"):
        """Appends one record. values is [rows, length] (prefill, future)
        or [length] (decode); entries must be finite and non-negative."""
        code = _dtype_code(dtype)
        v = np.asarray(values, dtype=np.float32)
        if v.ndim == 1:
            v = v[np.newaxis, :]
        if v.ndim != 2:
            raise TraceError("values must be 1- or 2-dimensional")
        rows, length = v.shape
        if not 0 <= layer < self.num_layers:
            raise TraceError("layer %d out of range" % layer)
        if not 0 <= head < self.num_kv_heads:
            raise TraceError("KV head %d out of range" % head)
        if qhead != GROUP_REDUCED and not 0 <= qhead < self.group_size:
            raise TraceError("query head %d out of range" % qhead)
        if not 1 <= length <= MAX_LEN:
            raise TraceError("row length %d out of range" % length)
        if kind == DECODE:
            if rows != 1 or query + 1 != length:
                raise TraceError("a decode row has length query + 1")
        elif kind in (PREFILL, FUTURE):
            if not 1 <= rows <= MAX_ROWS or query + rows != length:
                raise TraceError("prefill and future rows must be the last "
                                 "rows of their length")
            if rows * length > MAX_VALUES:
                raise TraceError("record too large (%d values)" % (rows * length))
        else:
            raise TraceError("unknown kind %r" % (kind,))
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise TraceError("values must be finite and non-negative")
        if code == F16:
            payload = np.ascontiguousarray(v.astype("<f2")).tobytes()
            if not np.all(np.isfinite(v.astype(np.float16))):
                raise TraceError("a value overflows float16")
        else:
            payload = np.ascontiguousarray(v.astype("<f4")).tobytes()
        head_bytes = b"REC1" + struct.pack("<BBHIIIIII", kind, code, 0, layer,
                                           head, qhead & 0xFFFFFFFF, query,
                                           rows, length)
        self._file.write(head_bytes + struct.pack("<I", zlib.crc32(head_bytes)))
        self._file.write(payload)
        self._file.write(struct.pack("<I", zlib.crc32(payload)))
        self.records += 1
        self.future += kind == FUTURE

    def add_prefill(self, layer, head, rows, qhead=GROUP_REDUCED, dtype="f32"):
        """The last R rows of a prompt of n positions, rows shaped [R, n]:
        row j is the query at n - R + j (its causal part is zeroed)."""
        v = np.array(rows, dtype=np.float32)
        r, n = v.shape
        for j in range(r):
            v[j, n - r + j + 1:] = 0.0
        self.add(PREFILL, layer, head, qhead, n - r, v, dtype)

    def add_future(self, layer, head, rows, qhead=GROUP_REDUCED, dtype="f32"):
        """The rows, under the full cache, of the F tokens after a prompt of
        n - F positions, shaped [F, n]: row j is the query at n - F + j
        over keys 0 .. n - 1 (its causal part is zeroed). The k-th future
        record of a (layer, KV head, query head) belongs to its k-th
        prefill record, whose length must be n - F."""
        v = np.array(rows, dtype=np.float32)
        r, n = v.shape
        for j in range(r):
            v[j, n - r + j + 1:] = 0.0
        self.add(FUTURE, layer, head, qhead, n - r, v, dtype)

    def add_decode(self, layer, head, row, qhead=GROUP_REDUCED, dtype="f32"):
        """The row of the query at position len(row) - 1 over keys 0 .. it."""
        v = np.asarray(row, dtype=np.float32).reshape(-1)
        self.add(DECODE, layer, head, qhead, v.shape[0] - 1, v, dtype)

    def close(self):
        if self._file.closed:
            return
        end = b"END1" + struct.pack("<IQ", 0, self.records) + bytes(16)
        self._file.write(end + struct.pack("<I", zlib.crc32(end)))
        if self.future:
            self._file.seek(0)
            self._header(VERSION_FUTURE)
        self._file.close()


def write_hf_attentions(writer, attentions, num_kv_heads, window=32,
                        batch=0, reduce="mean", dtype="f32", layers=None,
                        heads=None, prompt_len=None):
    """Writes the attention a Hugging Face model returned.

    attentions: one array per layer, shaped [batch, heads, q, k]
    (``outputs.attentions`` with ``output_attentions=True``). A prefill
    call (q == k, the whole prompt) writes the last ``window`` rows of each
    layer and KV head as a prefill record; a decode step (q == 1, k =
    past + 1) writes the row as a decode record at position k - 1.
    With ``prompt_len`` P < q (a call over a prompt of P positions and the
    q - P tokens after it), a prefill call writes the last ``window`` of
    the first P rows over keys 0 .. P - 1 as the prefill record, then rows
    P .. q - 1 over all q keys as its future record.

    The query heads are grouped as Hugging Face's repeat_kv does: query
    head h uses KV head h // group, group = heads // num_kv_heads.
    reduce="mean" writes one record per KV head, the group's mean (the
    group reduced, query head 0xFFFFFFFF); reduce=None writes every query
    head. ``layers`` and ``heads`` (KV heads) select a subset to keep the
    file small; dtype "f16" halves it.
    Returns the number of records written.
    """
    written = 0
    for l, a in enumerate(attentions):
        if layers is not None and l not in layers:
            continue
        a = np.asarray(a)
        if a.ndim != 4:
            raise TraceError("layer %d: expected [batch, heads, q, k]" % l)
        a = a[batch].astype(np.float64)
        n_heads, q, k = a.shape
        if n_heads % num_kv_heads:
            raise TraceError("heads %d not a multiple of KV heads %d" %
                             (n_heads, num_kv_heads))
        group = n_heads // num_kv_heads
        if reduce is None and group != writer.group_size:
            raise TraceError("the writer's group size is %d, the model's %d" %
                             (writer.group_size, group))
        fut = None
        if q == k and prompt_len is not None:
            if not 1 <= prompt_len < q:
                raise TraceError("layer %d: prompt_len %r is not in 1 .. %d"
                                 % (l, prompt_len, q - 1))
            w = min(window, prompt_len)
            block = a[:, prompt_len - w:prompt_len, :prompt_len]
            fut = a[:, prompt_len:, :]
        elif q == k:
            w = min(window, q)
            block = a[:, q - w:, :]
        elif q == 1:
            block = a[:, :, :]
        else:
            raise TraceError("layer %d: q=%d k=%d is neither a prompt nor a "
                             "decode step" % (l, q, k))
        for kv in range(num_kv_heads):
            if heads is not None and kv not in heads:
                continue
            items = _reduced(block[kv * group:(kv + 1) * group], reduce)
            futs = (_reduced(fut[kv * group:(kv + 1) * group], reduce)
                    if fut is not None else [])
            for qh, rows in items:
                rows = np.maximum(rows, 0.0).astype(np.float32)
                if q == k:
                    writer.add_prefill(l, kv, rows, qhead=qh, dtype=dtype)
                else:
                    writer.add_decode(l, kv, rows[0], qhead=qh, dtype=dtype)
                written += 1
            for qh, rows in futs:
                writer.add_future(l, kv, np.maximum(rows, 0.0), qhead=qh,
                                  dtype=dtype)
                written += 1
    return written


def _reduced(members, reduce):
    """A KV head's query heads as (query head, rows) items: their mean as
    one (the group reduced) or each as it is."""
    if reduce == "mean":
        return [(GROUP_REDUCED, members.mean(axis=0))]
    if reduce is None:
        return list(enumerate(members))
    raise TraceError("reduce must be 'mean' or None")
