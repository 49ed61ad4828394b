"""The attention-profile accumulator (pb_profile, docs/spec.md §14): rows of
attention per layer in, each layer's entropy, mass curve and the weights of
the profile schedule out, plus the arithmetic ratio that fits them; and
CAKE's layer preference, the cake schedule's weights and per-head shares
(pyramidkv_preference.h, when the loaded library has them).

It owns the Python lifetime of a pb_profile; rows go to C by address, a
whole [rows, len] block in a loop of one C call per row (the library takes
one row per call).
"""
import ctypes
import threading

import numpy as np

from . import _lib
from ._lib import check, check_u32, lib
from .kvcache import _called, _Owned, _queried


def profile_size(num_layers=32, max_len=4096):
    """pb_profile_size: the exact bytes Profile(...) allocates."""
    fields = dict(num_layers=num_layers, max_len=max_len)
    p = _params(fields)
    n = _lib.size_t(0)
    _lib.check_fields(lib().pb_profile_size(ctypes.byref(p), ctypes.byref(n)),
                      "pb_profile_size", fields, _params, "pb_profile_size")
    return int(n.value)


def _params(fields):
    return _lib.make_struct(_lib.ProfileParams, **fields)


def fit_ratio(weights, max_ratio=8):
    """pb_profile_fit_ratio: (ratio, distance) of the arithmetic pyramid
    closest to ``weights`` (uint32)."""
    w = _lib.u32_array(weights, "weights")
    r, d = _lib.u32(0), _lib.u64(0)
    check(lib().pb_profile_fit_ratio(_lib.addr(w), w.size,
                                     check_u32(max_ratio, "max_ratio"),
                                     ctypes.byref(r), ctypes.byref(d)),
          "pb_profile_fit_ratio")
    return int(r.value), int(d.value)


def _require_cake():
    if not hasattr(lib(), "pb_cake_weights"):
        raise NotImplementedError("the loaded libpyramidkv has no "
                                  "pyramidkv_preference.h calls")


def cake_layer_preference(attn, tau1=1.0, tau2=1.0):
    """pb_cake_layer_preference over a layer's window attention ``attn``
    [heads, rows, len] float32: (entropy, variance, preference)."""
    _require_cake()
    a = _lib.f32_array(attn, "attn", (3,))
    H, R, n = a.shape
    e, v, p = ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
    check(lib().pb_cake_layer_preference(
        _lib.addr(a), H, R * n, R, n, float(tau1), float(tau2),
        ctypes.byref(e), ctypes.byref(v), ctypes.byref(p)),
        "pb_cake_layer_preference")
    return e.value, v.value, p.value


def cake_weights(preference):
    """pb_cake_weights: the cake schedule's uint32 weights from the layers'
    preferences (float64)."""
    _require_cake()
    pr = _lib.float_array(preference, "preference", np.float64, (1,))
    out = np.empty(max(pr.size, 1), dtype=np.uint32)
    check(lib().pb_cake_weights(_lib.addr(pr), pr.size, _lib.addr(out),
                                out.size), "pb_cake_weights")
    return out[:pr.size]


class Profile(_Owned):
    """pb_profile over ``num_layers`` layers, rows up to ``max_len``."""
    _destroy = "pb_profile_destroy"
    _what = "the pb_profile"

    def __init__(self, num_layers=32, max_len=4096):
        fields = dict(num_layers=num_layers, max_len=max_len)
        p = _params(fields)
        h = ctypes.c_void_p()
        _lib.check_fields(lib().pb_profile_create(ctypes.byref(p), None,
                                                  ctypes.byref(h)),
                          "pb_profile_create", fields, _params,
                          "pb_profile_size")
        self._h = h.value
        self._lock = threading.Lock()
        self.num_layers = p.num_layers
        self.max_len = p.max_len

    memory_bytes = _queried("pb_profile_memory_bytes")

    reset = _called("pb_profile_reset")

    def add_row(self, layer, row):
        """pb_profile_add_row: one attention row (float32, 1-D)."""
        r = _lib.f32_array(row, "row", (1,))
        with self._lock:
            check(lib().pb_profile_add_row(self._handle(),
                                           check_u32(layer, "layer"),
                                           _lib.addr(r), r.size),
                  "pb_profile_add_row")

    def add_rows(self, layer, rows, lengths=None):
        """Every row of a [rows, len] float32 block; ``lengths`` (one per
        row) takes only each row's first lengths[j] entries (the causal
        part of a prompt's window rows: query q gives q + 1)."""
        a = _lib.f32_array(rows, "rows", (2,))
        n, w = a.shape
        if lengths is None:
            lens = [w] * n
        else:
            lens = _lib.int_array(lengths, "lengths", w).tolist()
            if len(lens) != n:
                raise ValueError("lengths: one per row, each 0 .. %d" % w)
        layer = check_u32(layer, "layer")
        base = _lib.addr(a)
        f = lib().pb_profile_add_row
        with self._lock:
            h = self._handle()
            for j, ln in enumerate(lens):
                check(f(h, layer, base + 4 * w * j, ln), "pb_profile_add_row")

    def layer_rows(self, layer):
        v = _lib.u64(0)
        with self._lock:
            check(lib().pb_profile_layer_rows(self._handle(),
                                              check_u32(layer, "layer"),
                                              ctypes.byref(v)),
                  "pb_profile_layer_rows")
        return int(v.value)

    def entropy(self, layer):
        """(mean entropy in bits, effective support 2^H)."""
        b, s = ctypes.c_double(), ctypes.c_double()
        with self._lock:
            check(lib().pb_profile_entropy(self._handle(),
                                           check_u32(layer, "layer"),
                                           ctypes.byref(b), ctypes.byref(s)),
                  "pb_profile_entropy")
        return b.value, s.value

    def mass(self, layer, k):
        d = ctypes.c_double()
        with self._lock:
            check(lib().pb_profile_mass(self._handle(),
                                        check_u32(layer, "layer"),
                                        check_u32(k, "k"), ctypes.byref(d)),
                  "pb_profile_mass")
        return d.value

    def mass_curve(self, layer, n=None):
        """The mean mass at k = 1 .. n (default max_len), float64."""
        n = self.max_len if n is None else int(n)
        out = np.empty(max(n, 1), dtype=np.float64)
        with self._lock:
            check(lib().pb_profile_mass_curve(self._handle(),
                                              check_u32(layer, "layer"),
                                              _lib.addr(out), n),
                  "pb_profile_mass_curve")
        return out[:n]

    def mass_k(self, layer, fraction_ppm):
        k = _lib.u32(0)
        with self._lock:
            check(lib().pb_profile_mass_k(self._handle(),
                                          check_u32(layer, "layer"),
                                          check_u32(fraction_ppm,
                                                    "fraction_ppm"),
                                          ctypes.byref(k)),
                  "pb_profile_mass_k")
        return int(k.value)

    def head_shares(self, layer, num_heads, share, min_share=0,
                    fraction_ppm=900000):
        """pb_profile_head_shares: per-head shares of one layer from a
        profile made with num_layers = L x num_heads (uint32, summing to
        num_heads x share)."""
        _require_cake()
        n = check_u32(num_heads, "num_heads")
        out = np.empty(max(n, 1), dtype=np.uint32)
        with self._lock:
            check(lib().pb_profile_head_shares(
                self._handle(), check_u32(layer, "layer"), n,
                check_u32(share, "share"), check_u32(min_share, "min_share"),
                check_u32(fraction_ppm, "fraction_ppm"), _lib.addr(out),
                out.size), "pb_profile_head_shares")
        return out[:n]

    def weights(self, fraction_ppm=900000, floor_weight=1):
        """pb_profile_weights: the profile schedule's weights, uint32."""
        out = np.empty(self.num_layers, dtype=np.uint32)
        with self._lock:
            check(lib().pb_profile_weights(self._handle(),
                                           check_u32(fraction_ppm,
                                                     "fraction_ppm"),
                                           check_u32(floor_weight,
                                                     "floor_weight"),
                                           _lib.addr(out), out.size),
                  "pb_profile_weights")
        return out
