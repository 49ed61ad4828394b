# Installs the build tree into a scratch prefix, then builds and runs a
# consumer through find_package(pyramidkv) and another through pkg-config.
# Usage: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DSCRATCH=... -DCC=...
#        [-DC_FLAGS=...] [-DEXE_LINKER_FLAGS=...] [-DSHARED_LINKER_FLAGS=...]
#        -P check_install.cmake
# The flags are those the library was built with (CMAKE_C_FLAGS and the
# linker flags, plus the PB_SANITIZER options): a consumer of a library
# built with -fsanitize=... must be compiled and linked with them too, as a
# real user of such a build would be.
file(REMOVE_RECURSE ${SCRATCH})
set(prefix ${SCRATCH}/prefix)

include(${CMAKE_CURRENT_LIST_DIR}/check_run.cmake)

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
file(GLOB_RECURSE libs ${prefix}/*/libpyramidkv.*)
list(GET libs 0 lib)
get_filename_component(libdir ${lib} DIRECTORY)

# CMake package.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install_consumer
    -B ${SCRATCH}/cmake-build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${CC} "-DCMAKE_C_FLAGS=${C_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}"
    "-DCMAKE_SHARED_LINKER_FLAGS=${SHARED_LINKER_FLAGS}")
run(${CMAKE_COMMAND} --build ${SCRATCH}/cmake-build)
run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir}
    ${SCRATCH}/cmake-build/install_consumer)

# pkg-config.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${libdir}/pkgconfig)
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs pyramidkv
                OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config does not find pyramidkv in ${libdir}/pkgconfig")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
separate_arguments(c_flags UNIX_COMMAND "${C_FLAGS}")
separate_arguments(link_flags UNIX_COMMAND "${EXE_LINKER_FLAGS}")
run(${CC} ${c_flags} ${SOURCE_DIR}/tests/install_consumer/install_consumer.c
    ${flags} ${link_flags} -o ${SCRATCH}/pc_consumer)
run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${SCRATCH}/pc_consumer)

# The installed program starts as a user runs it: no LD_LIBRARY_PATH, the
# library found through the executable's RPATH ($ORIGIN-relative), and a
# subcommand computes through it.
file(GLOB cli ${prefix}/bin/pyramidkv)
if(cli)
  unset(ENV{LD_LIBRARY_PATH})
  execute_process(COMMAND ${cli} --version RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^pyramidkv [0-9]+\\.[0-9]+\\.[0-9]+")
    message(FATAL_ERROR "installed pyramidkv --version: status ${rc}\n${out}\n${err}")
  endif()
  execute_process(COMMAND ${cli} plan --schedule uniform --budget 512 --layers 4 --json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "\"total\":[ \t]*2048")
    message(FATAL_ERROR "installed pyramidkv plan: status ${rc}\n${out}\n${err}")
  endif()
  # Moved with its prefix, it still finds its library.
  file(RENAME ${prefix} ${SCRATCH}/moved)
  execute_process(COMMAND ${SCRATCH}/moved/bin/pyramidkv --version
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(RENAME ${SCRATCH}/moved ${prefix})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "relocated pyramidkv --version: status ${rc}\n${err}")
  endif()
endif()
