"""The trace writer under its old name: pyramidkv_trace is the
``pyramidkv.trace`` module of the Python package (bench/python/pyramidkv/
trace.py), re-exported here so scripts that import pyramidkv_trace keep
working. Needs numpy only; the C library is not loaded."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                os.pardir, "python"))
from pyramidkv.trace import *  # noqa: E402,F401,F403
