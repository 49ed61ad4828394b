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

For CAKE's layer preference (docs/spec.md §18.2), run the model over
each text the runtime measures the preference on (not a prompt of the
trace: for example needle-free calibration excerpts) and write its window
rows as preference records (kind 4); the file is then version 3 and
calibrate takes each layer's preference from them, so no ``--cake-pref``
is needed.

    out = model(text_ids, output_attentions=True)
    pt.write_hf_preference(w, out.attentions, num_kv_heads=8, window=32)

The file is then read by ``pyramidkv trace``, ``calibrate`` and ``replay``.
"""

import operator
import struct
import zlib

import numpy as np

MAGIC = b"\x89PBTR\r\n\x1a"
VERSION = 1
VERSION_FUTURE = 2
VERSION_PREFERENCE = 3
HEADER_SIZE = 40
PREFILL = 1
DECODE = 2
FUTURE = 3
PREFERENCE = 4
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


def _index(name, value):
    """value as a Python int; a TypeError names what is not an integer."""
    if isinstance(value, bool):
        raise TypeError("%s must be an integer, not bool" % name)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, not %s" %
                        (name, type(value).__name__)) from None


def _window_rows(name, rows):
    """rows as a float32 [R, n] copy with each row's causal part (the keys
    after its query, row j the query at n - R + j) zeroed."""
    try:
        v = np.array(rows, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise TypeError("%s rows must be a numeric array: %s" % (name, e)) \
            from None
    if v.ndim != 2:
        raise TraceError("%s rows must be 2-dimensional [rows, length], not "
                         "shaped %r" % (name, v.shape))
    r, n = v.shape
    if r == 0 or r > n:
        raise TraceError("%s rows shaped %r: need 1 .. length rows" %
                         (name, v.shape))
    for j in range(r):
        v[j, n - r + j + 1:] = 0.0
    return v


class TraceWriter:
    """Writes one trace file: the header at open, records, the end record
    at close (a file without it is reported as truncated). The header
    says version 1 unless a future or preference record was written: then
    close rewrites it as version 3 if a preference record was written,
    else as version 2 (docs/trace_format.md)."""

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
        self.preference = 0
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
        """Appends one record. values is [rows, length] (prefill, future,
        preference) or [length] (decode); entries must be finite and
        non-negative. A bad argument raises TraceError (a ValueError) or,
        for an index that is not an integer, TypeError; nothing is written
        then."""
        code = _dtype_code(dtype)
        layer = _index("layer", layer)
        head = _index("KV head", head)
        qhead = _index("query head", qhead)
        query = _index("query position", query)
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
        elif kind in (PREFILL, FUTURE, PREFERENCE):
            if not 1 <= rows <= MAX_ROWS or query + rows != length:
                raise TraceError("prefill, future and preference rows must "
                                 "be the last rows of their length")
            if rows * length > MAX_VALUES:
                raise TraceError("record too large (%d values)" % (rows * length))
        else:
            raise TraceError("unknown kind %r" % (kind,))
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise TraceError("values must be finite and non-negative")
        if code == F16:
            with np.errstate(over="ignore"):
                half = v.astype("<f2")
            if not np.all(np.isfinite(half)):
                raise TraceError("a value overflows float16")
            payload = np.ascontiguousarray(half).tobytes()
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
        self.preference += kind == PREFERENCE

    def add_prefill(self, layer, head, rows, qhead=GROUP_REDUCED, dtype="f32"):
        """The last R rows of a prompt of n positions, rows shaped [R, n]:
        row j is the query at n - R + j (its causal part is zeroed)."""
        v = _window_rows("prefill", rows)
        r, n = v.shape
        self.add(PREFILL, layer, head, qhead, n - r, v, dtype)

    def add_future(self, layer, head, rows, qhead=GROUP_REDUCED, dtype="f32"):
        """The rows, under the full cache, of the F tokens after a prompt of
        n - F positions, shaped [F, n]: row j is the query at n - F + j
        over keys 0 .. n - 1 (its causal part is zeroed). The k-th future
        record of a (layer, KV head, query head) belongs to its k-th
        prefill record, whose length must be n - F."""
        v = _window_rows("future", rows)
        r, n = v.shape
        self.add(FUTURE, layer, head, qhead, n - r, v, dtype)

    def add_preference(self, layer, head, rows, qhead=GROUP_REDUCED,
                       dtype="f32"):
        """The last R rows of a text of n positions that is not a prompt
        of the trace, shaped [R, n] as for add_prefill (row j is the query
        at n - R + j; its causal part is zeroed): the text a runtime
        measures CAKE's layer preference on. The k-th preference record of
        a (layer, KV head, query head) is its text k; calibrate takes the
        layer's preference from its texts (docs/spec.md §18.2). The
        runtime measures every query head, so write one record per query
        head (qhead 0 .. group - 1) to score what it runs. The file is
        then version 3."""
        v = _window_rows("preference", rows)
        r, n = v.shape
        self.add(PREFERENCE, layer, head, qhead, n - r, v, dtype)

    def add_decode(self, layer, head, row, qhead=GROUP_REDUCED, dtype="f32"):
        """The row of the query at position len(row) - 1 over keys 0 .. it."""
        v = np.asarray(row, dtype=np.float32).reshape(-1)
        self.add(DECODE, layer, head, qhead, v.shape[0] - 1, v, dtype)

    def close(self):
        if self._file.closed:
            return
        end = b"END1" + struct.pack("<IQ", 0, self.records) + bytes(16)
        self._file.write(end + struct.pack("<I", zlib.crc32(end)))
        if self.preference or self.future:
            self._file.seek(0)
            self._header(VERSION_PREFERENCE if self.preference
                         else VERSION_FUTURE)
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
    for l, a, group in _hf_layers(writer, attentions, num_kv_heads, batch,
                                  layers, reduce):
        q, k = a.shape[1:]
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


def write_hf_preference(writer, attentions, num_kv_heads, window=32,
                        batch=0, reduce=None, dtype="f32", layers=None,
                        heads=None):
    """Writes the preference records of one text from the attention a
    Hugging Face model returned over it (one call, q == k, the whole
    text; ``attentions`` as for write_hf_attentions).

    The text is one the runtime measures CAKE's layer preference on, not
    a prompt of the trace (docs/spec.md §18.2): each layer and KV head
    gets the last ``window`` rows of the text as a preference record
    (kind 4), and the file is version 3. Call it once per text, in the
    runtime's order: the k-th call writes text k of every stream.

    reduce=None (the default) writes every query head, as the runtime
    measures them (the layer's entropy and variance are sums over its
    query heads); the writer's group size must be the model's.
    reduce="mean" writes the group's mean as one record, a different
    preference (the entropy of a mean is not the sum of entropies).
    ``layers``, ``heads``, ``batch`` and ``dtype`` as for
    write_hf_attentions. Returns the number of records written.
    """
    _index("window", window)
    if window < 1:
        raise TraceError("window must be at least 1, not %r" % (window,))
    def whole_text(l, q, k):
        if q != k:
            raise TraceError("layer %d: preference rows come from one call "
                             "over the whole text (q == k), not q=%d k=%d"
                             % (l, q, k))

    written = 0
    for l, a, group in _hf_layers(writer, attentions, num_kv_heads, batch,
                                  layers, reduce, check=whole_text):
        q = a.shape[1]
        block = a[:, q - min(window, q):, :]
        for kv in range(num_kv_heads):
            if heads is not None and kv not in heads:
                continue
            for qh, rows in _reduced(block[kv * group:(kv + 1) * group],
                                     reduce):
                writer.add_preference(l, kv, np.maximum(rows, 0.0),
                                      qhead=qh, dtype=dtype)
                written += 1
    return written


def _hf_layers(writer, attentions, num_kv_heads, batch, layers, reduce,
               check=None):
    """The selected layers of a Hugging Face attentions tuple as (layer,
    [heads, q, k] float64 array of the batch entry, group size), checked
    in this order: the rank, check(layer, q, k) where given, the heads
    against num_kv_heads, the group against the writer's (reduce=None)."""
    for l, a in enumerate(attentions):
        if layers is not None and l not in layers:
            continue
        a = np.asarray(a)
        if a.ndim != 4:
            raise TraceError("layer %d: expected [batch, heads, q, k]" % l)
        a = a[batch].astype(np.float64)
        n_heads, q, k = a.shape
        if check is not None:
            check(l, q, k)
        if n_heads % num_kv_heads:
            raise TraceError("heads %d not a multiple of KV heads %d" %
                             (n_heads, num_kv_heads))
        group = n_heads // num_kv_heads
        if reduce is None and group != writer.group_size:
            raise TraceError("the writer's group size is %d, the model's %d" %
                             (writer.group_size, group))
        yield l, a, group


def _reduced(members, reduce):
    """A KV head's query heads as (query head, rows) items: their mean as
    one (the group reduced) or each as it is."""
    if reduce == "mean":
        return [(GROUP_REDUCED, members.mean(axis=0))]
    if reduce is None:
        return list(enumerate(members))
    raise TraceError("reduce must be 'mean' or None")
