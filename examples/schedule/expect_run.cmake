# Runs TOOL with ARGS (a ;-list), then checks its exit status (RC) and that its output
# matches the regular expression EXPECT. Used by the tessera-schedule tests.
execute_process(COMMAND ${TOOL} ${ARGS} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL RC)
  message(FATAL_ERROR "exit status ${_rc}, expected ${RC}\n${_out}${_err}")
endif()
if(NOT "${_out}${_err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}':\n${_out}${_err}")
endif()
