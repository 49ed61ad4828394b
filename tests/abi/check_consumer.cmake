# Runs the old-header consumer and compares its output with the output the
# same program gave against the 0.1.0 library, byte for byte.
# Usage: cmake -DPROGRAM=... -DEXPECTED=... -DOUTPUT=... -P check_consumer.cmake
execute_process(COMMAND ${PROGRAM} OUTPUT_FILE ${OUTPUT} RESULT_VARIABLE rc
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUTPUT} ${EXPECTED}
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  find_program(DIFF diff)
  if(DIFF)
    execute_process(COMMAND ${DIFF} -u ${EXPECTED} ${OUTPUT}
                    OUTPUT_VARIABLE delta)
  endif()
  message(FATAL_ERROR "a program built against the 0.1.0 headers gets other "
          "results from this library than from 0.1.0 (- 0.1.0, + now):\n"
          "${delta}")
endif()
message(STATUS "same results as with 0.1.0 (${EXPECTED})")
