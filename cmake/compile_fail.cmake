# Runs one compile-fail case: COMPILER, INCLUDE_DIR and SOURCE are given with -D.
# Passes when the compile fails and its diagnostics contain the text after `// expect: `
# on the first line of SOURCE.
file(READ ${SOURCE} _text)
string(REGEX MATCH "^// expect: ([^\n]*)" _m "${_text}")
if(NOT _m)
  message(FATAL_ERROR "${SOURCE}: the first line must be `// expect: <diagnostic text>`")
endif()
set(_expect "${CMAKE_MATCH_1}")
execute_process(
  COMMAND ${COMPILER} -std=c++20 -fsyntax-only -I${INCLUDE_DIR} ${SOURCE}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must fail with: ${_expect}")
endif()
string(FIND "${_out}${_err}" "${_expect}" _pos)
if(_pos EQUAL -1)
  message(FATAL_ERROR "${SOURCE} failed to compile, but without the expected text\n"
                      "expected: ${_expect}\ngot:\n${_out}${_err}")
endif()
message(STATUS "rejected as expected: ${_expect}")
