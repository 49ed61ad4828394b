"""The runtime helpers (pyramidkv_runtime.h): evicting to an instance's own
share, victims as slot indices of the caller's K/V rows, compacting those
rows in place, and scoring straight from queries and keys (pb_qk) for a
decode step or a prompt's observation window.

It owns the Python face of these calls: numpy arrays checked and passed by
address, K/V rows compacted in place in the caller's arrays. With a library
that lacks them (an older libpyramidkv.so.0), available() is False and
every call raises NotImplementedError.
"""
import ctypes
import threading

import numpy as np

from . import _lib
from ._lib import PyramidKVError, check, check_u32, lib
from .kvcache import HEAD_REDUCE, _Owned, _enum, _pos

KEY_TYPES = {"f32": 0, "f16": 1, "bf16": 2}
_KEY_DTYPES = {0: np.dtype(np.float32), 1: np.dtype(np.float16),
               2: np.dtype(np.uint16)}


def available():
    """True if the loaded library has pyramidkv_runtime.h's calls."""
    return hasattr(lib(), "pb_qk_create")


def _require():
    if not available():
        raise NotImplementedError("the loaded libpyramidkv has no "
                                  "pyramidkv_runtime.h calls")


def evict_to_share(cache):
    """pb_kvcache_evict_to_share: evicts ``cache`` (a KVCache) down to its
    own effective share; returns the victims, ascending."""
    _require()
    with cache._lock:
        st = lib().pb_kvcache_evict_to_share(cache._handle(),
                                             cache._victims_addr,
                                             cache._victims.size,
                                             cache._n_addr)
        if st:
            raise PyramidKVError(st, "pb_kvcache_evict_to_share")
        return cache._victims[:cache._n.value].copy()


def evict_slots(cache, budget=0xFFFFFFFF):
    """pb_kvcache_evict_slots: (victims, slots), both uint32 ascending; a
    victim's slot is its index in the held order just before the call,
    i.e. its row in K/V buffers kept in held order."""
    _require()
    budget = check_u32(budget, "budget")
    slots = np.empty(cache._victims.size, dtype=np.uint32)
    with cache._lock:
        st = lib().pb_kvcache_evict_slots(cache._handle(), budget,
                                          cache._victims_addr,
                                          slots.ctypes.data,
                                          cache._victims.size, cache._n_addr)
        if st:
            raise PyramidKVError(st, "pb_kvcache_evict_slots")
        n = cache._n.value
        return cache._victims[:n].copy(), slots[:n].copy()


def _rows(a, name):
    if not isinstance(a, np.ndarray):
        raise TypeError("%s must be a numpy array" % name)
    if not (a.flags.c_contiguous and a.flags.writeable) or a.ndim < 1:
        raise ValueError("%s must be a writable C-contiguous array of rows"
                         % name)
    row_bytes = a.nbytes // a.shape[0] if a.shape[0] else a.itemsize
    return a, max(row_bytes, 1)


def compact_rows(slots, k, v=None):
    """pb_kvcache_compact_rows: removes rows ``slots`` (ascending, from
    evict_slots) from k (and v) in place along the first axis; rows
    0 .. n-len(slots)-1 then hold the survivors in order. Returns that
    survivor count. k, v: writable C-contiguous arrays of any dtype whose
    first axis is the held order."""
    _require()
    s = _lib.u32_array(slots, "slots")
    k, kb = _rows(k, "k")
    n_rows = k.shape[0]
    if v is not None:
        v, vb = _rows(v, "v")
        if v.shape[0] != n_rows:
            raise ValueError("k and v hold %d and %d rows"
                             % (n_rows, v.shape[0]))
    check(lib().pb_kvcache_compact_rows(
        s.ctypes.data, s.size, n_rows, k.ctypes.data, kb, kb,
        v.ctypes.data if v is not None else None,
        vb if v is not None else 0, vb if v is not None else 0),
        "pb_kvcache_compact_rows")
    return n_rows - s.size


def qk_size(**config):
    """pb_qk_size: the exact bytes QK(**config) allocates."""
    _require()
    c = _qk_config(config)
    n = _lib.size_t(0)
    _lib.check_fields(lib().pb_qk_size(ctypes.byref(c), ctypes.byref(n)),
                      "pb_qk_size", config, _qk_config, "pb_qk_size")
    return int(n.value)


def _qk_config(config):
    c = dict(config)
    if "key_type" in c:
        c["key_type"] = _enum(c["key_type"], KEY_TYPES, "key_type")
    if "reduce" in c:
        c["reduce"] = _enum(c["reduce"], HEAD_REDUCE, "reduce")
    return _lib.make_struct(_lib.QKConfig, **c)


class QK(_Owned):
    """pb_qk: a Q/K scorer for one KV head's shape (head_dim, group of query
    heads, key_type "f32" / "f16" / "bf16", reduce "mean" / "max" / "sum",
    scale (0: 1/sqrt(head_dim)), max_keys, max_rows). Queries are float32
    [group, rows, head_dim] (or [group, head_dim] for one row); keys are
    [n_keys, head_dim] of the key type (float32, float16, or uint16 holding
    bfloat16), already rotated."""
    _destroy = "pb_qk_destroy"
    _what = "the pb_qk scorer"

    def __init__(self, **config):
        _require()
        c = _qk_config(config)
        h = ctypes.c_void_p()
        _lib.check_fields(lib().pb_qk_create(ctypes.byref(c), None,
                                             ctypes.byref(h)),
                          "pb_qk_create", config, _qk_config, "pb_qk_size")
        self._h = h.value
        self._lock = threading.Lock()
        self.head_dim, self.group = c.head_dim, c.group
        self.key_dtype = _KEY_DTYPES.get(c.key_type)

    def _q(self, q, decode=False):
        a = _lib.f32_array(q, "q", (2, 3))
        if a.ndim == 2:
            a = a.reshape(a.shape[0], 1, a.shape[1])
        if a.shape[0] != self.group or a.shape[2] != self.head_dim or \
                (decode and a.shape[1] != 1):
            raise ValueError("q: expected [group=%d, %shead_dim=%d], got %s"
                             % (self.group, "" if decode else "rows, ",
                                self.head_dim, q.shape))
        return a

    def _k(self, k):
        if not isinstance(k, np.ndarray) or k.dtype != self.key_dtype:
            raise TypeError("k: a numpy array of %s expected"
                            % self.key_dtype)
        if not k.flags.c_contiguous or k.ndim != 2 \
                or k.shape[1] != self.head_dim:
            raise ValueError("k: a C-contiguous [n_keys, head_dim=%d] array "
                             "expected" % self.head_dim)
        return k

    def attention(self, q, k):
        """pb_qk_attention: [rows, n_keys] float32, the group reduced."""
        a, kk = self._q(q), self._k(k)
        rows = a.shape[1]
        out = np.empty((rows, kk.shape[0]), dtype=np.float32)
        with self._lock:
            check(lib().pb_qk_attention(
                self._handle(), a.ctypes.data, rows * self.head_dim,
                self.head_dim, rows, kk.ctypes.data, self.head_dim,
                kk.shape[0], out.ctypes.data), "pb_qk_attention")
        return out

    def observe(self, cache, pos, q, k):
        """pb_qk_observe: a decode step of ``cache`` (a KVCache) scored from
        the new token's queries q [group, head_dim] (one row per query
        head; [group, 1, head_dim] is accepted too) over keys k (the held
        positions' keys in held order, optionally followed by the new
        token's own)."""
        a, kk = self._q(q, decode=True), self._k(k)
        pos = _pos(pos)
        with self._lock, cache._lock:
            check(lib().pb_qk_observe(
                self._handle(), cache._handle(), pos, a.ctypes.data,
                self.head_dim, kk.ctypes.data, self.head_dim, kk.shape[0]),
                "pb_qk_observe")

    def prefill(self, cache, q, k, budget=0xFFFFFFFF, victims=False):
        """pb_qk_prefill: compresses a prompt of len(k) positions in
        ``cache`` (fresh, window scorer) from the observation window's
        queries q [group, rows, head_dim]. Returns the kept positions only
        (uint32, ascending), or (kept, victims) with victims=True. The
        prompt's K/V rows are in position order, so the victims are the
        rows to drop: compact_rows(victims, k, v) leaves row i holding the
        i-th kept position, the held order decode steps go on with."""
        a, kk = self._q(q), self._k(k)
        rows, length = a.shape[1], kk.shape[0]
        kept = np.empty(max(length, 1), dtype=np.uint32)
        vic = np.empty(max(length, 1), dtype=np.uint32) if victims else None
        n = _lib.size_t(0)
        with self._lock, cache._lock:
            check(lib().pb_qk_prefill(
                self._handle(), cache._handle(), a.ctypes.data,
                rows * self.head_dim, self.head_dim, rows, kk.ctypes.data,
                self.head_dim, length, check_u32(budget, "budget"),
                kept.ctypes.data, kept.size,
                vic.ctypes.data if victims else None,
                vic.size if victims else 0, ctypes.byref(n)),
                "pb_qk_prefill")
        held = kept[:n.value]
        return (held, vic[:length - n.value]) if victims else held
