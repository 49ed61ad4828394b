"""Shared fixtures of the Python package's tests (tests/python): where the
pyramidkv program, the struct-layout program and the golden vectors are.
ctest sets PYTHONPATH to the build tree's package and these variables."""
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))


@pytest.fixture
def cli():
    path = os.environ.get("PYRAMIDKV_BIN")
    if not path:
        pytest.skip("PYRAMIDKV_BIN (the pyramidkv program) is not set")
    return path


@pytest.fixture
def layout_bin():
    path = os.environ.get("PB_STRUCT_LAYOUT")
    if not path:
        pytest.skip("PB_STRUCT_LAYOUT (tests/python/struct_layout) is not set")
    return path


@pytest.fixture
def vectors_dir():
    return os.path.join(ROOT, "vectors")
