# Runs the pyramidkv program once and checks its exit status and output;
# used by tests/runner/CMakeLists.txt for what a cmocka test cannot see
# (the process exit code, the very last output line).
#
#   -DCLI=<program> -DARGS=<args separated by |> -DEXPECT_RC=<n>
#   [-DEXPECT_REGEX=<regex the combined output must match>]
#   [-DLAST_LINE_REGEX=<regex for the last stdout line>]
#   [-DMIN_PASSED=<n: the summary must report at least n passed cases>]
#   [-DVECTOR_DIR=<dir>: the argument @VECTORS@ expands to its *.json files]
string(REPLACE "|" ";" args "${ARGS}")
if(DEFINED VECTOR_DIR)
  file(GLOB vector_files "${VECTOR_DIR}/*.json")
  list(SORT vector_files)
  set(expanded "")
  foreach(a IN LISTS args)
    if(a STREQUAL "@VECTORS@")
      list(APPEND expanded ${vector_files})
    else()
      list(APPEND expanded "${a}")
    endif()
  endforeach()
  set(args ${expanded})
endif()
execute_process(COMMAND ${CLI} ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}\n--- output:\n${all}")
endif()
if(DEFINED EXPECT_REGEX AND NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}'\n--- output:\n${all}")
endif()
if(DEFINED LAST_LINE_REGEX OR DEFINED MIN_PASSED)
  string(REGEX REPLACE "\n$" "" trimmed "${out}")
  string(REGEX REPLACE "^.*\n" "" last "${trimmed}")
  if(DEFINED LAST_LINE_REGEX AND NOT last MATCHES "${LAST_LINE_REGEX}")
    message(FATAL_ERROR "last line '${last}' does not match '${LAST_LINE_REGEX}'")
  endif()
  if(DEFINED MIN_PASSED)
    if(NOT last MATCHES "^([0-9]+) passed, [0-9]+ failed$")
      message(FATAL_ERROR "last line '${last}' is not 'N passed, M failed'")
    endif()
    if(CMAKE_MATCH_1 LESS MIN_PASSED)
      message(FATAL_ERROR "only ${CMAKE_MATCH_1} cases passed, expected >= ${MIN_PASSED}")
    endif()
  endif()
endif()
