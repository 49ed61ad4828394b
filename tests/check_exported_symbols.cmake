# Fails when the shared library exports a symbol that does not start with pb_.
# Usage: cmake -DLIB=path/to/libpyramidkv.so -P check_exported_symbols.cmake
execute_process(COMMAND nm -D --defined-only ${LIB}
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(count 0)
foreach(line ${lines})
  if(line MATCHES "^[0-9a-fA-F]+ [A-Za-z] (.+)$")
    set(sym ${CMAKE_MATCH_1})
    # AddressSanitizer exports an ODR indicator, __odr_asan.<name>, beside
    # each exported global (a build with -fsanitize=address in
    # CMAKE_C_FLAGS): it names one of ours, so the name after it counts.
    if(sym MATCHES "^__odr_asan[.](.+)$")
      set(sym ${CMAKE_MATCH_1})
    endif()
    if(NOT sym MATCHES "^pb_")
      message(FATAL_ERROR "exported symbol without the pb_ prefix: ${sym}")
    endif()
    math(EXPR count "${count}+1")
  endif()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no exported symbols found in ${LIB}")
endif()
message(STATUS "${count} exported symbols, all pb_")
