# Runs EXE with ARGS (separated by |) and passes when it exits 0 with stdout matching EXPECT
# (stderr is not matched: --help and results go to stdout). FRESH, when set, is a folder
# removed first; EXPECT_FILE, when set, is a file the run must have written.
if(FRESH)
  file(REMOVE_RECURSE ${FRESH})
endif()
string(REPLACE "|" ";" _args "${ARGS}")
execute_process(COMMAND ${EXE} ${_args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit 0, got ${rc}\n${out}${err}")
endif()
if(NOT "${out}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit 0, but stdout does not match '${EXPECT}':\n${out}\nstderr:\n${err}")
endif()
if(EXPECT_FILE AND NOT EXISTS ${EXPECT_FILE})
  message(FATAL_ERROR "exit 0, but the run did not write ${EXPECT_FILE}:\n${out}${err}")
endif()
message(STATUS "exit 0 as expected")
