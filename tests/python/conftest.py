"""Shared fixtures of the Python package's tests (tests/python): where the
pyramidkv program, the struct-layout program and the golden vectors are.
ctest sets PYTHONPATH to the build tree's package and these variables."""
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))


def _program(var, what):
    """The path in environment variable var; skips the test where unset."""
    path = os.environ.get(var)
    if not path:
        pytest.skip(f"{var} ({what}) is not set")
    return path


@pytest.fixture
def cli():
    return _program("PYRAMIDKV_BIN", "the pyramidkv program")


@pytest.fixture
def layout_bin():
    return _program("PB_STRUCT_LAYOUT", "tests/python/struct_layout")


@pytest.fixture
def vectors_dir():
    return os.path.join(ROOT, "vectors")
