"""Only where setuptools builds: its build/ and *.egg-info/ folders go to a
temporary directory, removed at exit, so `pip install bench/python` leaves
nothing in the source tree. The package's metadata is pyproject.toml's."""
import atexit
import shutil
import tempfile

from setuptools import setup

_scratch = tempfile.mkdtemp(prefix="pyramidkv-build-")
atexit.register(shutil.rmtree, _scratch, True)
setup(options={"build": {"build_base": _scratch + "/build"},
               "egg_info": {"egg_base": _scratch}})
