"""pyramidkv: Python bindings of libpyramidkv over ctypes (standard library
only, no compiler at import), numpy arrays in and out.

    import pyramidkv as pk
    shares, total = pk.schedule_shares("arithmetic", 32, 512, ratio=4)
    with pk.KVCache(budget=128, scorer="window", recent_window=16) as c:
        c.observe(1, np.array([1.0], np.float32))
        victims = c.evict()

The shared library libpyramidkv.so.0 is loaded on the first call (not at
import): from PYRAMIDKV_LIBRARY if set, else the path the CMake build or
install recorded beside the package, else beside the package, else the
dynamic loader's search. ``pyramidkv.trace`` (the trace writer) and
``pyramidkv.press`` (torch; imports torch) are submodules. docs/python.md
describes every call.
"""
from ._lib import (LibraryNotFound, PyramidKVError, STATUS_NAMES,  # noqa: F401
                   library_path, status_str)
from .kvcache import (HEAD_REDUCE, POOLS, PREFILL_SCOPES, ROW_STORES,  # noqa: F401
                      SCORERS, UINT32_MAX, VTABLES, ClosedError, KVCache,
                      Layer, config_size, head_reduce)
from .group import Group, group_plan, group_size  # noqa: F401
from .group import available as group_available  # noqa: F401
from . import runtime  # noqa: F401
from .runtime import QK, compact_rows, evict_slots, evict_to_share  # noqa: F401
from .profile import (Profile, cake_layer_preference, cake_weights,  # noqa: F401
                      fit_ratio, profile_size)
from .schedule import (KINDS, Plan, kind_name, kind_value, kinds, plan,  # noqa: F401
                       pyramid_budget, pyramid_budgets, pyramid_total,
                       schedule_shares)

__version__ = "0.2.0"


def version():
    """(pb_version_number(), pb_version_string()) of the loaded library."""
    from ._lib import lib
    L = lib()
    return int(L.pb_version_number()), L.pb_version_string().decode()
