# Fails when a file of the source tree cites the project's tracker by number
# (the word, an optional space and '#', then a digit). A maintainer who
# clones the repository cannot read the tracker: code and docs cite
# docs/spec.md sections or state the reason. CHANGELOG.md alone may name
# tracker items.
#
# Usage: cmake -DSOURCE_DIR=... -P check_no_tracker_refs.cmake
# Tracked files are searched with `git grep` when SOURCE_DIR is a git
# checkout, every file (build directories excepted) with grep otherwise.
#
# The pattern is put together from two halves so that this file, which
# must be searched like any other, does not match it.
set(half_a "iss")
set(half_b "ue ?#?[0-9]")
set(pattern "${half_a}${half_b}")

find_program(GIT git)
find_program(GREP grep)
if(GIT AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(
    COMMAND ${GIT} -C ${SOURCE_DIR} grep -n -I -i -E "${pattern}"
            -- . ":(exclude)CHANGELOG.md"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(how "git grep over the tracked files")
elseif(GREP)
  execute_process(
    COMMAND ${GREP} -r -n -I -i -E "${pattern}" .
            --exclude=CHANGELOG.md --exclude-dir=.git --exclude-dir=build
            --exclude-dir=build-*
    WORKING_DIRECTORY ${SOURCE_DIR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(how "grep -r over the source tree")
else()
  message(FATAL_ERROR "neither git nor grep found: cannot search the tree")
endif()

# grep and git grep: 0 = found, 1 = nothing found, anything else = error.
if(rc EQUAL 1)
  message(STATUS "no tracker citation (${how})")
elseif(rc EQUAL 0)
  message(FATAL_ERROR
    "tracker citations found (${how}); cite the docs/spec.md section or "
    "state the reason instead:\n${out}")
else()
  message(FATAL_ERROR "the search failed (${rc}): ${err}")
endif()
