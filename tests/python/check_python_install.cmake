# Installs the build tree into a scratch prefix and imports the installed
# pyramidkv package with a clean environment (no PYRAMIDKV_LIBRARY): it must
# load the installed libpyramidkv.so.0, not the build tree's. Then installs
# a copy of bench/python with pip (--no-deps --no-build-isolation, Debian's
# setuptools) into a scratch target and checks it loads the library named
# by PYRAMIDKV_LIBRARY, and that pip left no build/ or *.egg-info/ in the
# folder it built from.
# Usage: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DSCRATCH=... -DPYTHON=...
#        -DPY_DIR=... -P check_python_install.cmake
file(REMOVE_RECURSE ${SCRATCH})
set(prefix ${SCRATCH}/prefix)

include(${CMAKE_CURRENT_LIST_DIR}/../check_run.cmake)

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(probe "import pyramidkv as pk\nprint(pk.library_path())\nprint(pk.schedule_shares('arithmetic', 4, 64, ratio=4)[0].tolist())")
run(${CMAKE_COMMAND} -E env --unset=PYRAMIDKV_LIBRARY --unset=LD_LIBRARY_PATH
    PYTHONPATH=${prefix}/${PY_DIR} PYTHONDONTWRITEBYTECODE=1
    ${PYTHON} -c "${probe}")
if(NOT run_out MATCHES "^${prefix}/[^\n]*libpyramidkv.so.0\n\\[102, 76, 51, 25\\]")
  message(FATAL_ERROR "the installed package did not load the installed library:\n${run_out}")
endif()

# pip, offline, from a copy (pip builds in the source folder)
file(GLOB libs ${prefix}/*/libpyramidkv.so.0 ${prefix}/*/*/libpyramidkv.so.0)
list(GET libs 0 lib)
file(COPY ${SOURCE_DIR}/bench/python/ DESTINATION ${SCRATCH}/src
     PATTERN __pycache__ EXCLUDE)
run(${PYTHON} -m pip install --no-deps --no-build-isolation --no-index
    --disable-pip-version-check -q --target ${SCRATCH}/pip ${SCRATCH}/src)
# pip leaves nothing in the folder it built from (bench/python/setup.py).
file(GLOB left ${SCRATCH}/src/build ${SCRATCH}/src/*.egg-info)
if(left)
  message(FATAL_ERROR "pip install left in the source folder: ${left}")
endif()
run(${CMAKE_COMMAND} -E env PYRAMIDKV_LIBRARY=${lib}
    PYTHONPATH=${SCRATCH}/pip PYTHONDONTWRITEBYTECODE=1
    ${PYTHON} -c "${probe}")
if(NOT run_out MATCHES "^${lib}\n\\[102, 76, 51, 25\\]")
  message(FATAL_ERROR "the pip-installed package did not load ${lib}:\n${run_out}")
endif()
