# Runs a command and checks its exit code and output (for command-line tests).
#   cmake -DEXPECT_RC=<rc> -DEXPECT_TEXT=<text> -P run_expect.cmake -- <command> <args...>
# Passes when the exit code equals EXPECT_RC and the output (stdout + stderr) contains
# EXPECT_TEXT.
set(_cmd "")
set(_after OFF)
math(EXPR _last "${CMAKE_ARGC} - 1")
foreach(_i RANGE 1 ${_last})
  if(_after)
    list(APPEND _cmd "${CMAKE_ARGV${_i}}")
  elseif("${CMAKE_ARGV${_i}}" STREQUAL "--")
    set(_after ON)
  endif()
endforeach()
execute_process(COMMAND ${_cmd} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT "${_rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit code ${_rc}, expected ${EXPECT_RC}\n${_out}${_err}")
endif()
string(FIND "${_out}${_err}" "${EXPECT_TEXT}" _pos)
if(_pos EQUAL -1)
  message(FATAL_ERROR "output lacks '${EXPECT_TEXT}':\n${_out}${_err}")
endif()
