# Configures the source tree twice with tests, tools and benches off: a
# shared build's install rules must install the pyramidkv package (its
# _libpath.py), a static build's must not (ctypes loads shared objects
# only). Configure only: nothing is compiled.
# Usage: cmake -DSOURCE_DIR=... -DSCRATCH=... -P check_python_builds.cmake
foreach(shared ON OFF)
  set(dir ${SCRATCH}/shared-${shared})
  file(REMOVE_RECURSE ${dir})
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${dir}
            -DBUILD_SHARED_LIBS=${shared} -DPB_BUILD_TESTS=OFF
            -DPB_BUILD_TOOLS=OFF -DPB_BUILD_BENCH=OFF
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configure (shared ${shared}) failed:\n${out}\n${err}")
  endif()
  file(GLOB_RECURSE scripts ${dir}/cmake_install.cmake)
  set(found OFF)
  foreach(s ${scripts})
    file(READ ${s} text)
    if(text MATCHES "site-packages/pyramidkv")
      set(found ON)
    endif()
  endforeach()
  if(NOT found STREQUAL shared)
    message(FATAL_ERROR "BUILD_SHARED_LIBS=${shared} with tests, tools and "
                        "benches off: installs the Python package: ${found}")
  endif()
  file(REMOVE_RECURSE ${dir})
endforeach()
message(STATUS "the shared build installs the package, the static one not")
