"""Policy instances: one pb_kvcache (one layer, or one layer and KV head) of
any scorer, created from a pb_kvcache_config or one of the policybook
vtables, with observe / evict / reset / scores / prefill, the head-group
reduction, and a Layer of one instance per KV head.

It owns the Python lifetime of an instance (close, context manager, a lock
so one instance is never used by two threads at once, and a closed instance
refusing every call) and the numpy checks that keep C inside the caller's
buffers. Every decision is the library's.
"""
import collections.abc
import ctypes
import threading

import numpy as np

from . import _lib
from ._lib import PyramidKVError, check, check_u32, lib

UINT32_MAX = 0xFFFFFFFF


class _ScorerNames(collections.abc.Mapping):
    """name -> pb_scorer, the library's canonical names (pb_scorer_name),
    read from the library on first use."""

    def __init__(self):
        self._names = None

    def _table(self):
        if self._names is None:
            names, s = {}, 0
            while True:
                name = lib().pb_scorer_name(s)
                if name is None:
                    break
                names[name.decode()] = s
                s += 1
            self._names = names
        return self._names

    def __getitem__(self, key):
        return self._table()[key]

    def __iter__(self):
        return iter(self._table())

    def __len__(self):
        return len(self._table())


SCORERS = _ScorerNames()
POOLS = {"max": 0, "avg": 1}
PREFILL_SCOPES = {"consistent": 0, "reference": 1}
ROW_STORES = {"cached": 0, "streamed": 1}
HEAD_REDUCE = {"mean": 0, "max": 1, "sum": 2}
VTABLES = {
    "pyramidkv": _lib.PyramidKVParams,
    "snapkv": _lib.SnapKVParams,
    "h2o": _lib.H2OParams,
    "scissorhands": _lib.ScissorhandsParams,
    "tova": _lib.TOVAParams,
    "streaming_llm": _lib.StreamingLLMParams,
    "sliding_window": _lib.SlidingWindowParams,
}

_F32 = np.dtype(np.float32)


class ClosedError(ValueError):
    """The instance was closed (destroyed); it refuses every call."""


def _queried(function, doc=None):
    """A read-only property: the integer `function` reports for the
    handle (_Owned._query)."""
    return property(lambda self: self._query(function), doc=doc)


def _called(function, doc=None):
    """A method: the status-returning `function` on the handle alone
    (_Owned._call)."""
    def method(self):
        self._call(function)
    method.__doc__ = doc
    return method


class _Owned:
    """A handle the object owns: close() destroys it once (idempotent,
    under the object's lock), a with-block closes it, and so does garbage
    collection. A subclass names its destroy function and what it holds."""
    _destroy = ""
    _what = ""

    def close(self):
        """Destroys the C object. Idempotent."""
        with self._lock:
            h, self._h = self._h, None
            if h is not None:
                getattr(lib(), self._destroy)(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) is not None:
            getattr(lib(), self._destroy)(self._h)
            self._h = None

    @property
    def closed(self):
        return self._h is None

    def _handle(self):
        h = self._h
        if h is None:
            raise ClosedError("%s is closed" % self._what)
        return h

    def _query(self, function):
        """The integer `function` reports for the handle, under the lock."""
        with self._lock:
            return int(getattr(lib(), function)(self._handle()))

    def _call(self, function):
        """The status-returning `function` on the handle alone, under the
        lock; an error raises."""
        with self._lock:
            check(getattr(lib(), function)(self._handle()), function)


def _enum(value, table, name):
    if isinstance(value, str):
        try:
            return table[value]
        except KeyError:
            raise ValueError("%s must be one of %s, not %r"
                             % (name, ", ".join(table), value)) from None
    return check_u32(value, name)


def _pos(pos):
    if pos.__class__ is int and 0 <= pos <= UINT32_MAX:
        return pos
    return check_u32(pos, "pos")


def head_reduce(attn, mode="mean"):
    """pb_kvcache_head_reduce over the first axis: ``attn`` [heads, ...]
    float32 (C-contiguous) becomes one block shaped attn.shape[1:], in one
    call. mode: "mean", "max" or "sum"."""
    a = _lib.f32_array(attn, "attn")
    if a.ndim < 2:
        raise ValueError("attn: expected [heads, ...], got shape %s" % (a.shape,))
    out = np.empty(a.shape[1:], dtype=np.float32)
    n = out.size
    check(lib().pb_kvcache_head_reduce(_lib.addr(a), a.shape[0], n, n,
                                       _enum(mode, HEAD_REDUCE, "mode"),
                                       _lib.addr(out)),
          "pb_kvcache_head_reduce")
    return out


def config_size(**config):
    """pb_kvcache_size: the exact bytes KVCache(**config) would allocate."""
    cfg = _make_config(config)
    n = _lib.size_t(0)
    _lib.check_fields(lib().pb_kvcache_size(ctypes.byref(cfg),
                                            ctypes.byref(n)),
                      "pb_kvcache_size", config, _make_config,
                      "pb_kvcache_size")
    return int(n.value)


def _make_config(config):
    c = dict(config)
    for key, table in (("scorer", SCORERS), ("pool", POOLS),
                       ("prefill_scope", PREFILL_SCOPES),
                       ("row_stores", ROW_STORES)):
        if key in c:
            c[key] = _enum(c[key], table, key)
    return _lib.make_struct(_lib.Config, **c)


class KVCache(_Owned):
    """One policy instance (pb_kvcache).

    ``KVCache(budget=..., scorer="window", ...)`` takes every field of
    pb_kvcache_config by name (budget, layer, num_layers, pyramid_ratio,
    share, recent_window, obs_window, pool_kernel, pool, scorer, sinks,
    capacity, prefill_scope, prefill_max_len, row_stores; enums by name or
    value); unset fields take PB_KVCACHE_CONFIG_DEFAULT's values. A refused
    configuration raises PyramidKVError (status PB_ERR_PARAM, ...) naming
    the refused fields. A field given as None is unset: it takes its
    default, as an omitted one does.
    ``KVCache.from_vtable("h2o", budget=64, recent_window=8)`` creates
    through a policybook vtable instead. Close with close() or a with
    block; a closed instance raises ClosedError."""
    _destroy = "pb_kvcache_destroy"
    _what = "the pb_kvcache instance"

    def __init__(self, **config):
        cfg = _make_config(config)
        h = ctypes.c_void_p()
        _lib.check_fields(lib().pb_kvcache_create(ctypes.byref(cfg), None,
                                                  ctypes.byref(h)),
                          "pb_kvcache_create", config, _make_config,
                          "pb_kvcache_size")
        self._adopt(h.value, cfg.prefill_max_len)
        self.config = {n: getattr(cfg, n) for n in _lib.CONFIG_FIELDS}

    @classmethod
    def from_vtable(cls, name, **params):
        """Creates through pb_kvcache_<name>.create (name: pyramidkv, snapkv,
        h2o, scissorhands, tova, streaming_llm, sliding_window) with that
        vtable's params struct. The vtable returns NULL without a status:
        a refusal raises PyramidKVError with PB_ERR_PARAM."""
        try:
            pcls = VTABLES[name]
        except KeyError:
            raise ValueError("no vtable %r (one of %s)"
                             % (name, ", ".join(VTABLES))) from None
        p = _lib.make_struct(pcls, **params)
        vt = _lib.Vtable.in_dll(lib(), "pb_kvcache_" + name)
        h = vt.create(ctypes.addressof(p), None, None)
        if not h:
            raise PyramidKVError(_lib.PB_ERR_PARAM,
                                 "pb_kvcache_%s.create" % name)
        self = cls.__new__(cls)
        self._adopt(h, 0)
        self.config = {"vtable": name}
        self.config.update({f[0]: getattr(p, f[0]) for f in pcls._fields_})
        return self

    @classmethod
    def pyramidkv(cls, params=None, options=None):
        """pb_kvcache_pyramidkv_create: params and options as dicts of
        pb_kvcache_pyramidkv_params / pb_kvcache_options fields."""
        p = _lib.make_struct(_lib.PyramidKVParams, **(params or {}))
        o = dict(options or {})
        for key, table in (("pool", POOLS), ("prefill_scope", PREFILL_SCOPES)):
            if key in o:
                o[key] = _enum(o[key], table, key)
        o = _lib.make_struct(_lib.Options, **o)
        h = ctypes.c_void_p()
        check(lib().pb_kvcache_pyramidkv_create(
            ctypes.byref(p), ctypes.byref(o), None, ctypes.byref(h)),
            "pb_kvcache_pyramidkv_create")
        self = cls.__new__(cls)
        self._adopt(h.value, o.prefill_max_len)
        self.config = {f[0]: getattr(p, f[0]) for f in p._fields_}
        self.config.update({f[0]: getattr(o, f[0]) for f in o._fields_})
        return self

    def _adopt(self, handle, prefill_max_len):
        L = lib()
        self._h = handle
        self._lock = threading.Lock()
        self._prefill_max_len = prefill_max_len
        self._observe = L.pb_kvcache_observe
        self._evict = L.pb_kvcache_evict
        cap = int(L.pb_kvcache_capacity(handle))
        self._victims = np.empty(max(cap, 1), dtype=np.uint32)
        self._victims_addr = _lib.addr(self._victims)
        self._n = _lib.size_t(0)
        self._n_addr = ctypes.addressof(self._n)

    # ------------------------------------------------------ per token --
    def observe(self, pos, attn=None):
        """pb_kvcache_observe: the token at ``pos`` attended to the held
        positions (ascending) with weights ``attn`` (float32, one per held
        position), then ``pos`` is admitted. attn None admits it without
        observing."""
        pos = _pos(pos)
        if attn is None:
            with self._lock:
                st = self._observe(self._handle(), pos, None, 0)
        else:
            if not (attn.__class__ is np.ndarray and attn.dtype is _F32
                    and attn.ndim == 1 and attn.flags.c_contiguous):
                attn = _lib.f32_array(attn, "attn", (1,))
            with self._lock:
                st = self._observe(self._handle(), pos, attn.ctypes.data,
                                   attn.size)
        if st:
            raise PyramidKVError(st, "pb_kvcache_observe")

    def step(self, pos, attn, budget=UINT32_MAX, out=None):
        """observe(pos, attn) then evict(budget) under one lock: one
        decode step with the least Python between the two C calls. With
        ``out`` (a uint32 ndarray of at least the victims' count) the
        victims are written there and their count returned, so nothing is
        allocated; otherwise a new array of the victims is returned. If
        observe refuses, nothing changed and evict is not called; an out
        too small raises PB_ERR_BUFFER after the observation was
        recorded."""
        pos = _pos(pos)
        if not (budget.__class__ is int and 0 <= budget <= UINT32_MAX):
            budget = check_u32(budget, "budget")
        if attn is None:
            a_addr, a_len = None, 0
        else:
            if not (attn.__class__ is np.ndarray and attn.dtype is _F32
                    and attn.ndim == 1 and attn.flags.c_contiguous):
                attn = _lib.f32_array(attn, "attn", (1,))
            a_addr, a_len = attn.ctypes.data, attn.size
        if out is None:
            v_addr, v_cap = self._victims_addr, self._victims.size
        else:
            out = _lib.u32_array(out, "out", out=True)
            v_addr, v_cap = out.ctypes.data, out.size
        with self._lock:
            h = self._handle()
            st = self._observe(h, pos, a_addr, a_len)
            if st:
                raise PyramidKVError(st, "pb_kvcache_observe")
            st = self._evict(h, budget, v_addr, v_cap, self._n_addr)
            if st:
                raise PyramidKVError(st, "pb_kvcache_evict")
            n = self._n.value
            return n if out is not None else self._victims[:n].copy()

    def evict(self, budget=UINT32_MAX, capacity=None):
        """pb_kvcache_evict: evicts down to min(budget, effective share) and
        returns the victims, ascending, as a new uint32 array. capacity
        (default: the instance's capacity, always enough) limits the
        victims buffer the library is given; a smaller one than the count
        to drop raises PB_ERR_BUFFER and changes nothing."""
        if not (budget.__class__ is int and 0 <= budget <= UINT32_MAX):
            budget = check_u32(budget, "budget")
        cap = self._victims.size
        if capacity is not None:
            cap = min(_lib.check_size(capacity, "capacity"), cap)
        with self._lock:
            st = self._evict(self._handle(), budget, self._victims_addr,
                             cap, self._n_addr)
            if st:
                raise PyramidKVError(st, "pb_kvcache_evict")
            return self._victims[:self._n.value].copy()

    reset = _called("pb_kvcache_reset",
                    "pb_kvcache_reset: back to holding position 0, nothing "
                    "observed.")

    # ----------------------------------------------------- inspection --
    effective_budget = _queried("pb_kvcache_effective_budget")

    kept_count = _queried("pb_kvcache_kept_count")

    def __len__(self):
        return self.kept_count

    capacity = _queried("pb_kvcache_capacity")

    memory_bytes = _queried("pb_kvcache_memory_bytes")

    sink_count = _queried("pb_kvcache_sink_count")

    def kept_positions(self):
        """pb_kvcache_kept_positions: the held positions, ascending."""
        with self._lock:
            h = self._handle()
            out = np.empty(max(int(lib().pb_kvcache_kept_count(h)), 1),
                           dtype=np.uint32)
            n = _lib.size_t(0)
            check(lib().pb_kvcache_kept_positions(h, _lib.addr(out), out.size,
                                                  ctypes.byref(n)),
                  "pb_kvcache_kept_positions")
            return out[:n.value]

    def score(self, pos):
        """pb_kvcache_score: the score held position ``pos`` is ranked by."""
        d = ctypes.c_double()
        with self._lock:
            check(lib().pb_kvcache_score(self._handle(), _pos(pos),
                                         ctypes.byref(d)), "pb_kvcache_score")
        return d.value

    def window_score(self, pos):
        """pb_kvcache_window_score (window scorer only)."""
        d = ctypes.c_double()
        with self._lock:
            check(lib().pb_kvcache_window_score(self._handle(), _pos(pos),
                                                ctypes.byref(d)),
                  "pb_kvcache_window_score")
        return d.value

    def scores(self):
        """(positions, scores): every held position and its score. The
        library has no call returning every score at once, so this makes
        one pb_kvcache_score call per held position."""
        with self._lock:
            h = self._handle()
            L = lib()
            out = np.empty(max(int(L.pb_kvcache_kept_count(h)), 1),
                           dtype=np.uint32)
            n = _lib.size_t(0)
            check(L.pb_kvcache_kept_positions(h, _lib.addr(out), out.size,
                                              ctypes.byref(n)),
                  "pb_kvcache_kept_positions")
            pos = out[:n.value]
            sc = np.empty(pos.size, dtype=np.float64)
            base = _lib.addr(sc)
            f = L.pb_kvcache_score
            for i, p in enumerate(pos.tolist()):
                st = f(h, p, base + 8 * i)
                if st:
                    raise PyramidKVError(st, "pb_kvcache_score")
            return pos, sc

    # -------------------------------------------------------- prefill --
    def prefill_workspace_size(self, length):
        """pb_kvcache_prefill_workspace_size for a prompt of ``length``."""
        n = _lib.size_t(0)
        with self._lock:
            check(lib().pb_kvcache_prefill_workspace_size(
                self._handle(), _lib.check_size(length, "length"),
                ctypes.byref(n)), "pb_kvcache_prefill_workspace_size")
        return int(n.value)

    def prefill(self, attn, budget=UINT32_MAX, workspace="auto",
                victims=False):
        """pb_kvcache_prefill: compresses a prompt in one call.

        attn: [rows, len] float32, C-contiguous, row j the attention of the
        prompt token len - rows + j over 0 .. len-1. Returns the kept
        positions (uint32, ascending), or (kept, victims) with
        victims=True. workspace: "auto" uses the scratch reserved at create
        (prefill_max_len) when it is large enough and otherwise allocates
        one here; None always uses the reserved scratch (the library
        refuses a longer prompt with PB_ERR_WORKSPACE); or a writable
        uint64 ndarray of at least prefill_workspace_size(len) bytes."""
        a = _lib.f32_array(attn, "attn", (2,))
        rows, length = a.shape
        ws_addr, ws_bytes = None, 0
        if isinstance(workspace, str):
            if workspace != "auto":
                raise ValueError("workspace must be 'auto', None or an array")
            if length > self._prefill_max_len:
                nb = self.prefill_workspace_size(length)
                workspace = np.empty((nb + 7) // 8 or 1, dtype=np.uint64)
            else:
                workspace = None
        if workspace is not None:
            if not (isinstance(workspace, np.ndarray)
                    and workspace.flags.c_contiguous
                    and workspace.flags.writeable):
                raise TypeError("workspace must be a writable C-contiguous "
                                "ndarray")
            ws_addr, ws_bytes = _lib.addr(workspace), workspace.nbytes
        kept = np.empty(max(length, 1), dtype=np.uint32)
        vic = np.empty(max(length, 1), dtype=np.uint32) if victims else None
        n = _lib.size_t(0)
        with self._lock:
            check(lib().pb_kvcache_prefill(
                self._handle(), _lib.addr(a), rows, length,
                check_u32(budget, "budget"), ws_addr, ws_bytes,
                _lib.addr(kept), kept.size,
                _lib.addr(vic) if victims else None,
                vic.size if victims else 0, ctypes.byref(n)),
                "pb_kvcache_prefill")
        k = kept[:n.value]
        return (k, vic[:length - n.value]) if victims else k

    def __repr__(self):
        if self._h is None:
            return "<pyramidkv.KVCache closed>"
        return "<pyramidkv.KVCache held=%d share=%d>" % (
            self.kept_count, self.effective_budget)


class Layer:
    """One layer's KV heads: one KVCache per head, all of the same
    configuration. The library has no call that takes every head of a
    layer at once, so observe() and evict() make one C call per head
    (docs/python.md)."""

    def __init__(self, num_kv_heads, **config):
        n = check_u32(num_kv_heads, "num_kv_heads")
        if n < 1:
            raise ValueError("num_kv_heads must be >= 1")
        self.heads = []
        try:
            for _ in range(n):
                self.heads.append(KVCache(**config))
        except BaseException:
            self.close()
            raise

    def close(self):
        for h in self.heads:
            h.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self):
        return len(self.heads)

    def observe(self, pos, attn):
        """attn: [kv_heads, held] float32, C-contiguous, row h for head h
        (None: admit without observing). The shape is checked once for the
        whole layer, then each head's row goes to C by address. A head
        that refuses raises after the heads before it were updated
        (each head is its own instance)."""
        pos = _pos(pos)
        if attn is None:
            for h in self.heads:
                h.observe(pos, None)
            return
        a = _lib.f32_array(attn, "attn", (2,))
        n_heads, held = a.shape
        if n_heads != len(self.heads):
            raise ValueError("attn: %d rows for %d KV heads"
                             % (n_heads, len(self.heads)))
        base, stride = a.ctypes.data, 4 * held
        for i, h in enumerate(self.heads):
            with h._lock:
                st = h._observe(h._handle(), pos, base + i * stride, held)
            if st:
                raise PyramidKVError(st, "pb_kvcache_observe (KV head %d)"
                                     % i)

    def evict(self, budget=UINT32_MAX):
        """The victims of every head: a list of uint32 arrays."""
        budget = check_u32(budget, "budget")
        out = []
        for h in self.heads:
            with h._lock:
                st = h._evict(h._handle(), budget, h._victims_addr,
                              h._victims.size, h._n_addr)
                if st:
                    raise PyramidKVError(st, "pb_kvcache_evict")
                out.append(h._victims[:h._n.value].copy())
        return out

    def reset(self):
        for h in self.heads:
            h.reset()

    def kept_positions(self):
        return [h.kept_positions() for h in self.heads]
