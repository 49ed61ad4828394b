"""The ctypes layer of the pyramidkv package: finding and loading
libpyramidkv.so.0, the C structs mirrored field for field, the function
prototypes, the status -> exception mapping and the numpy argument checks.

It owns nothing of the algorithms (they are all in the C library) and does
no per-element work in Python: arrays are passed to C by address after their
dtype, shape and layout have been checked here, so a bad argument raises
instead of letting C read past a buffer.
"""
import ctypes
import operator
import os
import threading

import numpy as np

u32 = ctypes.c_uint32
u64 = ctypes.c_uint64
size_t = ctypes.c_size_t
vp = ctypes.c_void_p
P_u32 = ctypes.POINTER(u32)
P_size = ctypes.POINTER(size_t)
P_double = ctypes.POINTER(ctypes.c_double)

SONAME = "libpyramidkv.so.0"

# ------------------------------------------------------------ statuses ---

# The values of pb_status (include/pyramidkv/pyramidkv.h), never renumbered.
STATUS_NAMES = (
    "PB_OK", "PB_ERR_NULL", "PB_ERR_PARAM", "PB_ERR_LENGTH",
    "PB_ERR_POSITION", "PB_ERR_WEIGHT", "PB_ERR_FULL", "PB_ERR_BUFFER",
    "PB_ERR_NOT_HELD", "PB_ERR_NOMEM", "PB_ERR_TOO_LARGE", "PB_ERR_NOT_FRESH",
    "PB_ERR_WORKSPACE",
)
for _i, _n in enumerate(STATUS_NAMES):
    globals()[_n] = _i


class PyramidKVError(Exception):
    """A call of the library returned a status other than PB_OK. ``status``
    is the pb_status value, ``status_name`` its enum name, and the message
    is the library's own (pb_status_str), prefixed with the function.
    ``fields`` names, for a refused configuration (PB_ERR_PARAM), the
    fields the caller set that the library refuses (see refused_fields);
    () otherwise."""

    def __init__(self, status, function="", fields=()):
        self.status = int(status)
        self.status_name = (STATUS_NAMES[self.status]
                            if 0 <= self.status < len(STATUS_NAMES)
                            else "unknown")
        self.function = function
        self.fields = tuple(name for name, _ in fields)
        msg = status_str(self.status)
        text = ("%s: %s (%s)" % (function, msg, self.status_name)
                if function else "%s (%s)" % (msg, self.status_name))
        if fields:
            text += "; refused: " + ", ".join("%s=%r" % f for f in fields)
        super().__init__(text)


def refused_fields(status, function, fields, accepts):
    """The PyramidKVError of a call that returned ``status`` for the
    caller's ``fields`` (a dict). For PB_ERR_PARAM it names the refused
    ones: each field the caller set that, put back alone to its default,
    makes the library accept the rest (``accepts(rest)``, a pure sizing or
    shares query of the library). The library decides; nothing here
    repeats its rules."""
    named = []
    if status == STATUS_NAMES.index("PB_ERR_PARAM") and fields:
        for k in fields:
            rest = {n: v for n, v in fields.items() if n != k}
            try:
                ok = accepts(rest)
            except (TypeError, ValueError, PyramidKVError):
                ok = False
            if ok:
                named.append((k, fields[k]))
    return PyramidKVError(status, function, named)


class LibraryNotFound(OSError):
    """libpyramidkv.so.0 could not be loaded from any place the package
    looks (docs/python.md, "Installing")."""


# ------------------------------------------------------------- structs ---

class Allocator(ctypes.Structure):
    _fields_ = [("alloc", vp), ("free", vp), ("ctx", vp)]


class PyramidKVParams(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("budget", "layer", "num_layers",
                                   "pyramid_ratio", "recent_window",
                                   "obs_window", "pool_kernel")]
    DEFAULT = (512, 0, 1, 4, 32, 16, 7)


class SnapKVParams(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("budget", "recent_window", "obs_window",
                                   "pool_kernel")]
    DEFAULT = (512, 32, 16, 7)


class H2OParams(ctypes.Structure):
    _fields_ = [("budget", u32), ("recent_window", u32)]
    DEFAULT = (512, 32)


class ScissorhandsParams(ctypes.Structure):
    _fields_ = [("budget", u32), ("recent_window", u32)]
    DEFAULT = (512, 32)


class TOVAParams(ctypes.Structure):
    _fields_ = [("budget", u32)]
    DEFAULT = (512,)


class StreamingLLMParams(ctypes.Structure):
    _fields_ = [("budget", u32), ("sinks", u32)]
    DEFAULT = (512, 4)


class SlidingWindowParams(ctypes.Structure):
    _fields_ = [("budget", u32)]
    DEFAULT = (512,)


class Options(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("capacity", "pool", "prefill_scope",
                                   "prefill_max_len")]
    DEFAULT = (0, 0, 0, 0)


CONFIG_FIELDS = ("struct_size", "budget", "layer", "num_layers",
                 "pyramid_ratio", "share", "recent_window", "obs_window",
                 "pool_kernel", "pool", "scorer", "sinks", "capacity",
                 "prefill_scope", "prefill_max_len", "row_stores")


class Config(ctypes.Structure):
    _fields_ = [(n, u32) for n in CONFIG_FIELDS]
    DEFAULT = (64, 512, 0, 1, 4, 0, 32, 16, 7, 0, 0, 0, 0, 0, 0, 0)


class Schedule(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("struct_size", "kind", "num_layers",
                                   "budget", "ratio", "window", "beta",
                                   "prompt_len", "sinks", "gamma_milli",
                                   "min_share")] + [
        ("taper_beta", ctypes.c_double), ("weights", P_u32)]
    DEFAULT = (64, 0, 1, 512, 4, 8, 20, 0, 4, 750, 0, 2.0, None)


class ProfileParams(ctypes.Structure):
    _fields_ = [("struct_size", u32), ("num_layers", u32), ("max_len", u32)]
    DEFAULT = (12, 32, 4096)


class GroupParams(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("struct_size", "num_heads",
                                   "floor_permille", "slack",
                                   "prefill_max_len", "head_cap_permille",
                                   "pooled_rows")]
    DEFAULT = (28, 8, 200, 1, 0, 0, 0)


class GroupPlanInfo(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("struct_size", "num_heads", "head_share",
                                   "floor", "head_min", "head_max",
                                   "head_capacity", "reserved")] + [
        ("layer_total", u64), ("pool_rows", u64)]
    DEFAULT = (48, 0, 0, 0, 0, 0, 0, 0, 0, 0)


class QKConfig(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("struct_size", "head_dim", "group",
                                   "key_type", "reduce")] + [
        ("scale", ctypes.c_float), ("max_keys", u32), ("max_rows", u32)]
    DEFAULT = (32, 128, 1, 0, 0, 0.0, 4096, 32)


class Vtable(ctypes.Structure):
    _fields_ = [("create", ctypes.CFUNCTYPE(vp, vp, vp, vp)),
                ("on_decode_step", ctypes.CFUNCTYPE(None, vp, u32, vp, size_t)),
                ("evict", ctypes.CFUNCTYPE(size_t, vp, u32, vp, size_t)),
                ("memory_bytes", ctypes.CFUNCTYPE(size_t, vp)),
                ("destroy", ctypes.CFUNCTYPE(None, vp))]


# Every mirrored struct with its C name, for the sizeof test.
STRUCTS = {
    "pb_allocator": Allocator,
    "pb_kvcache_pyramidkv_params": PyramidKVParams,
    "pb_kvcache_snapkv_params": SnapKVParams,
    "pb_kvcache_h2o_params": H2OParams,
    "pb_kvcache_scissorhands_params": ScissorhandsParams,
    "pb_kvcache_tova_params": TOVAParams,
    "pb_kvcache_streaming_llm_params": StreamingLLMParams,
    "pb_kvcache_sliding_window_params": SlidingWindowParams,
    "pb_kvcache_options": Options,
    "pb_kvcache_config": Config,
    "pb_schedule": Schedule,
    "pb_profile_params": ProfileParams,
    "pb_kvcache_vtable": Vtable,
    "pb_kvcache_group_params": GroupParams,
    "pb_kvcache_group_plan_info": GroupPlanInfo,
    "pb_qk_config": QKConfig,
}

# Structs of headers a library may lack (an older libpyramidkv.so.0): the
# layout test skips those its C compiler does not know.
OPTIONAL_STRUCTS = ("pb_kvcache_group_params", "pb_kvcache_group_plan_info",
                    "pb_qk_config")


def make_struct(cls, **fields):
    """An instance of ``cls`` at its C defaults with ``fields`` set; an
    unknown field name raises TypeError, a value outside the C type's range
    raises ValueError (ctypes would wrap it silently)."""
    s = cls(*cls.DEFAULT)
    names = {f[0] for f in cls._fields_}
    for k, v in fields.items():
        if k not in names or k == "struct_size":
            raise TypeError("%s has no settable field %r" % (cls.__name__, k))
        if v is None:
            continue
        ctype = dict(cls._fields_)[k]
        if ctype is u32:
            v = check_u32(v, k)
        setattr(s, k, v)
    return s


def check_int(v, name, hi):
    """``v`` as an int in 0 .. hi: an integer (Python or numpy) or
    TypeError (a float, even 2.0, a bool, a string); out of range:
    ValueError (ctypes would wrap it)."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError("%s must be an integer, not the bool %r" % (name, v))
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError("%s must be an integer, not %r" % (name, v)) from None
    if not 0 <= i <= hi:
        raise ValueError("%s must be an integer in 0 .. %d, not %r"
                         % (name, hi, v))
    return i


def check_u32(v, name="value"):
    """check_int in the uint32_t range."""
    return check_int(v, name, 0xFFFFFFFF)


def check_size(v, name="value"):
    """check_int in the size_t range (64 bits)."""
    return check_int(v, name, (1 << 64) - 1)


def int_array(a, name, hi):
    """``a`` as a 1-D integer ndarray of values 0 .. hi, for a count the
    package copies (lengths): a numpy array of any integer dtype, or a
    sequence checked element by element as check_int does (a float or a
    bool is a TypeError, an integer out of range a ValueError)."""
    if isinstance(a, np.ndarray):
        if a.dtype.kind not in "iu":
            raise TypeError("%s: an integer array expected, not dtype %s"
                            % (name, a.dtype))
        if a.ndim != 1:
            raise ValueError("%s: expected one dimension, got shape %s"
                             % (name, a.shape))
        if a.size and (int(a.min()) < 0 or int(a.max()) > hi):
            raise ValueError("%s: every value must be in 0 .. %d"
                             % (name, hi))
        return a
    if isinstance(a, (str, bytes)):
        raise TypeError("%s: a sequence of integers expected, not %r"
                        % (name, a))
    try:
        items = list(a)
    except TypeError:
        raise TypeError("%s: a sequence of integers expected, not %r"
                        % (name, a)) from None
    return np.array([check_int(v, "%s[%d]" % (name, i), hi)
                     for i, v in enumerate(items)], dtype=np.uint64)


# ------------------------------------------------------------- loading ---

def _candidates():
    env = os.environ.get("PYRAMIDKV_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    try:
        from . import _libpath  # written by the CMake build and install
        p = _libpath.LIBRARY
        out.append(p if os.path.isabs(p) else os.path.normpath(
            os.path.join(here, p)))
    except ImportError:
        pass
    out.append(os.path.join(here, SONAME))
    out.append(SONAME)  # the dynamic loader's own search (ld.so.cache, ...)
    return out


_lib = None
_lock = threading.Lock()


def library_path():
    """The path the loaded library came from (loads it if needed)."""
    lib()
    return _lib._name


def lib():
    """The loaded library, loading it and declaring its prototypes on the
    first call. Raises LibraryNotFound with every place tried."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for c in _candidates():
            if os.sep in c and not os.path.exists(c):
                tried.append("%s (no such file)" % c)
                continue
            try:
                handle = ctypes.CDLL(c)
            except OSError as e:
                tried.append("%s (%s)" % (c, e))
                continue
            _declare(handle)
            _lib = handle
            return _lib
        raise LibraryNotFound(
            "libpyramidkv.so.0 not found; set PYRAMIDKV_LIBRARY to its path "
            "or build with BUILD_SHARED_LIBS=ON. Tried: " + "; ".join(tried))


def _declare(L):
    st = ctypes.c_int
    protos = {
        "pb_version_number": (ctypes.c_uint, []),
        "pb_version_string": (ctypes.c_char_p, []),
        "pb_status_str": (ctypes.c_char_p, [ctypes.c_int]),
        "pb_kvcache_pyramid_budget": (u32, [u32, u32, u32, u32]),
        "pb_kvcache_pyramid_budgets": (st, [u32, u32, u32, vp, size_t]),
        "pb_kvcache_pyramid_total": (u64, [u32, u32, u32]),
        "pb_kvcache_schedule_shares": (st, [vp, vp, size_t, vp]),
        "pb_schedule_kind_name": (ctypes.c_char_p, [u32]),
        "pb_schedule_kind_from_name": (st, [ctypes.c_char_p, vp]),
        "pb_scorer_name": (ctypes.c_char_p, [u32]),
        "pb_kvcache_pyramidkv_create": (st, [vp, vp, vp, vp]),
        "pb_kvcache_pyramidkv_size": (st, [vp, vp, vp]),
        "pb_kvcache_create": (st, [vp, vp, vp]),
        "pb_kvcache_size": (st, [vp, vp]),
        "pb_kvcache_destroy": (None, [vp]),
        "pb_kvcache_observe": (st, [vp, u32, vp, size_t]),
        "pb_kvcache_evict": (st, [vp, u32, vp, size_t, vp]),
        "pb_kvcache_reset": (st, [vp]),
        "pb_kvcache_effective_budget": (u32, [vp]),
        "pb_kvcache_kept_count": (size_t, [vp]),
        "pb_kvcache_capacity": (size_t, [vp]),
        "pb_kvcache_kept_positions": (st, [vp, vp, size_t, vp]),
        "pb_kvcache_window_score": (st, [vp, u32, vp]),
        "pb_kvcache_score": (st, [vp, u32, vp]),
        "pb_kvcache_sink_count": (size_t, [vp]),
        "pb_kvcache_memory_bytes": (size_t, [vp]),
        "pb_kvcache_head_reduce": (st, [vp, size_t, size_t, size_t, u32, vp]),
        "pb_kvcache_prefill_workspace_size": (st, [vp, size_t, vp]),
        "pb_kvcache_prefill": (st, [vp, vp, size_t, size_t, u32, vp, size_t,
                                    vp, size_t, vp, size_t, vp]),
        "pb_profile_size": (st, [vp, vp]),
        "pb_profile_create": (st, [vp, vp, vp]),
        "pb_profile_destroy": (None, [vp]),
        "pb_profile_memory_bytes": (size_t, [vp]),
        "pb_profile_reset": (st, [vp]),
        "pb_profile_add_row": (st, [vp, u32, vp, size_t]),
        "pb_profile_layer_rows": (st, [vp, u32, vp]),
        "pb_profile_entropy": (st, [vp, u32, vp, vp]),
        "pb_profile_mass": (st, [vp, u32, u32, vp]),
        "pb_profile_mass_curve": (st, [vp, u32, vp, size_t]),
        "pb_profile_mass_k": (st, [vp, u32, u32, vp]),
        "pb_profile_weights": (st, [vp, u32, u32, vp, size_t]),
        "pb_profile_fit_ratio": (st, [vp, size_t, u32, vp, vp]),
    }
    # The layer group (pyramidkv_group.h); a library without it has none of
    # these symbols and the package's Group raises on use.
    group = {
        "pb_kvcache_group_plan": (st, [vp, vp, vp]),
        "pb_kvcache_group_size": (st, [vp, vp, vp]),
        "pb_kvcache_group_create": (st, [vp, vp, vp, vp]),
        "pb_kvcache_group_destroy": (None, [vp]),
        "pb_kvcache_group_info": (st, [vp, vp]),
        "pb_kvcache_group_head": (vp, [vp, u32]),
        "pb_kvcache_group_kept_total": (u64, [vp]),
        "pb_kvcache_group_memory_bytes": (size_t, [vp]),
        "pb_kvcache_group_reset": (st, [vp]),
        "pb_kvcache_group_observe": (st, [vp, u32, vp, size_t, vp]),
        "pb_kvcache_group_evict": (st, [vp, u64, vp, size_t, vp, size_t, vp]),
        "pb_kvcache_group_prefill_workspace_size": (st, [vp, size_t, vp]),
        "pb_kvcache_group_prefill": (st, [vp, vp, size_t, size_t, size_t, u64,
                                          vp, size_t, vp, size_t, vp, size_t,
                                          vp]),
    }
    if hasattr(L, "pb_kvcache_group_create"):
        protos.update(group)
    # The group's one-call step came after the group itself.
    if hasattr(L, "pb_kvcache_group_step"):
        protos["pb_kvcache_group_step"] = (st, [vp, u32, vp, size_t, vp, u64,
                                                vp, size_t, vp, size_t, vp])
    # The runtime helpers (pyramidkv_runtime.h), likewise optional.
    runtime = {
        "pb_kvcache_evict_to_share": (st, [vp, vp, size_t, vp]),
        "pb_kvcache_evict_slots": (st, [vp, u32, vp, vp, size_t, vp]),
        "pb_kvcache_compact_rows": (st, [vp, size_t, size_t, vp, size_t,
                                         size_t, vp, size_t, size_t]),
        "pb_qk_size": (st, [vp, vp]),
        "pb_qk_create": (st, [vp, vp, vp]),
        "pb_qk_destroy": (None, [vp]),
        "pb_qk_attention": (st, [vp, vp, size_t, size_t, size_t, vp, size_t,
                                 size_t, vp]),
        "pb_qk_observe": (st, [vp, vp, u32, vp, size_t, vp, size_t, size_t]),
        "pb_qk_prefill": (st, [vp, vp, vp, size_t, size_t, size_t, vp, size_t,
                               size_t, u32, vp, size_t, vp, size_t, vp]),
    }
    if hasattr(L, "pb_qk_create"):
        protos.update(runtime)
    # CAKE's layer preference and per-head shares (pyramidkv_preference.h).
    if hasattr(L, "pb_cake_weights"):
        protos.update({
            "pb_cake_layer_preference": (st, [vp, size_t, size_t, size_t,
                                              size_t, ctypes.c_double,
                                              ctypes.c_double, vp, vp, vp]),
            "pb_cake_weights": (st, [vp, size_t, vp, size_t]),
            "pb_profile_head_shares": (st, [vp, u32, u32, u32, u32, u32, vp,
                                            size_t]),
        })
    for name, (res, args) in protos.items():
        f = getattr(L, name)
        f.restype = res
        f.argtypes = args


def status_str(status):
    """pb_status_str: the library's message for a status value."""
    return lib().pb_status_str(int(status)).decode()


def check(status, function):
    if status:
        raise PyramidKVError(status, function)


def check_fields(status, function, fields, build, size_function):
    """check() for a call made with the caller's ``fields`` (a dict, None
    values left out): a PB_ERR_PARAM names the refused fields
    (refused_fields), probed with the library's sizing query
    ``size_function`` over the struct ``build(fields)`` makes."""
    if not status:
        return
    fields = {k: v for k, v in fields.items() if v is not None}

    def accepts(rest):
        n = size_t(0)
        return getattr(lib(), size_function)(
            ctypes.byref(build(rest)), ctypes.byref(n)) == 0
    raise refused_fields(status, function, fields, accepts)


# -------------------------------------------------------------- arrays ---

def float_array(a, name, dtype, ndim=None):
    """``a`` as a C-contiguous ndarray of ``dtype`` without copying an
    ndarray: a numpy array of another dtype raises TypeError, a
    non-contiguous one ValueError (convert explicitly with
    numpy.ascontiguousarray). Other sequences of numbers (int or float)
    are converted; of anything else (bools, strings, objects) TypeError."""
    if not isinstance(a, np.ndarray):
        try:
            b = np.asarray(a)
        except (TypeError, ValueError) as e:
            raise TypeError("%s: not convertible to %s (%s)"
                            % (name, np.dtype(dtype), e)) from None
        if b.dtype.kind not in "iuf":
            raise TypeError("%s: numbers expected, not %s"
                            % (name, "bools" if b.dtype.kind == "b"
                               else "dtype %s" % b.dtype))
        a = np.ascontiguousarray(b, dtype=dtype)
    if a.dtype != dtype:
        raise TypeError("%s: dtype must be %s, not %s"
                        % (name, np.dtype(dtype), a.dtype))
    if not a.flags.c_contiguous:
        raise ValueError("%s: the array must be C-contiguous "
                         "(numpy.ascontiguousarray)" % name)
    if ndim is not None and a.ndim not in ndim:
        raise ValueError("%s: expected %s dimension(s), got shape %s"
                         % (name, " or ".join(map(str, ndim)), a.shape))
    return a


def f32_array(a, name, ndim=None):
    """float_array of float32."""
    return float_array(a, name, np.float32, ndim)


def u32_array(a, name, out=False):
    """``a`` as a C-contiguous 1-D uint32 ndarray the library reads (or,
    with ``out``, writes) in place: a numpy array of another dtype raises
    TypeError, as does anything but an ndarray for ``out``; a sequence is
    checked element by element (int_array) and converted."""
    if not isinstance(a, np.ndarray):
        if out:
            raise TypeError("%s: a writable numpy uint32 array expected, not "
                            "%r" % (name, type(a).__name__))
        a = int_array(a, name, 0xFFFFFFFF).astype(np.uint32)
    if a.dtype != np.uint32:
        raise TypeError("%s: dtype must be uint32, not %s" % (name, a.dtype))
    if not a.flags.c_contiguous:
        raise ValueError("%s: the array must be C-contiguous" % name)
    if a.ndim != 1:
        raise ValueError("%s: expected one dimension, got shape %s"
                         % (name, a.shape))
    if out and not a.flags.writeable:
        raise ValueError("%s: the array must be writable" % name)
    return a


def addr(a):
    """The data address of an ndarray (numpy gives an empty array a valid
    address too, so an empty row is not mistaken for NULL)."""
    return a.__array_interface__["data"][0]
