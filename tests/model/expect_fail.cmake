# Runs EXE with ARGS (separated by |) and passes when it exits non-zero with output matching EXPECT.
# PREPARE_TOKENS, when set, is a file to fill first with 10 int32 tokens 0..9. EXPECT_RC, when
# set, is the exit status required (2: command-line misuse). EXPECT_ABSENT, when set, is a
# file the failed run must not have written (removed first).
if(PREPARE_TOKENS)
  execute_process(COMMAND ${PYTHON} -c
    "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<10i',*range(10)))" ${PREPARE_TOKENS})
endif()
if(PREPARE_EMPTY)
  file(WRITE ${PREPARE_EMPTY} "\n\n")
endif()
if(EXPECT_ABSENT)
  file(REMOVE ${EXPECT_ABSENT})
endif()
string(REPLACE "|" ";" _args "${ARGS}")
execute_process(COMMAND ${EXE} ${_args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit, got 0\n${out}${err}")
endif()
if(NOT "${EXPECT_RC}" STREQUAL "" AND NOT rc EQUAL EXPECT_RC)
  message(FATAL_ERROR "expected exit ${EXPECT_RC}, got ${rc}\n${out}${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit ${rc}, but the output does not match '${EXPECT}':\n${out}${err}")
endif()
if(EXPECT_ABSENT AND EXISTS ${EXPECT_ABSENT})
  message(FATAL_ERROR "the failed run wrote ${EXPECT_ABSENT}")
endif()
message(STATUS "exit ${rc} as expected: ${err}")
