# The step runner of the install checks (check_install.cmake,
# python/check_python_install.cmake): run(COMMAND...) runs one command,
# stops the script with the command, its status and its output if it
# fails, prints its output otherwise and leaves it in run_out.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
  set(run_out "${out}" PARENT_SCOPE)
endfunction()
