# Runs one compile-fail case: COMPILER, INCLUDE_DIR, SUPPORT_DIR (tests/support: helpers a
# case may include) and SOURCE are given with -D; PCH, where given, is the precompiled header
# of the header the case includes first, under PCH_ROOT (tests/compile_fail/CMakeLists.txt),
# used when it is there.
# Passes when the compile fails and its diagnostics contain the text after `// expect: `
# on the first line of SOURCE. Further lines at the top of the file may add:
#   // expect-also: <text>     more text that must appear (e.g. the culprit's name)
#   // expect-gcc: <text>      text that must appear when COMPILER is g++
#   // expect-clang: <text>    text that must appear when COMPILER is clang++
#   // max-errors: <n>         at most n lines containing "error:" (no pile of follow-ons)
file(READ ${SOURCE} _text)
string(REGEX MATCH "^// expect: ([^\n]*)" _m "${_text}")
if(NOT _m)
  message(FATAL_ERROR "${SOURCE}: the first line must be `// expect: <diagnostic text>`")
endif()
set(_expects "${CMAKE_MATCH_1}")
get_filename_component(_cc ${COMPILER} NAME)
if(_cc MATCHES "clang")
  set(_family clang)
else()
  set(_family gcc)
endif()
string(REGEX MATCHALL "\n// expect-(also|gcc|clang): [^\n]*" _more "${_text}")
foreach(_line IN LISTS _more)
  string(REGEX MATCH "// expect-(also|gcc|clang): ([^\n]*)" _x "${_line}")
  if(CMAKE_MATCH_1 STREQUAL "also" OR CMAKE_MATCH_1 STREQUAL _family)
    list(APPEND _expects "${CMAKE_MATCH_2}")
  endif()
endforeach()
set(_max "")
if(_text MATCHES "\n// max-errors: ([0-9]+)")
  set(_max ${CMAKE_MATCH_1})
endif()
set(_pch "")
if(DEFINED PCH AND EXISTS "${PCH}")
  if(_family STREQUAL clang)
    set(_pch -include-pch ${PCH})
  else()
    # g++ looks for <header>.gch beside each header it searches for, in the -I order
    set(_pch -Winvalid-pch -I${PCH_ROOT})
  endif()
endif()
execute_process(
  COMMAND ${COMPILER} -std=c++20 -fsyntax-only ${_pch} -I${INCLUDE_DIR} -I${SUPPORT_DIR} ${SOURCE}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
list(GET _expects 0 _first)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must fail with: ${_first}")
endif()
foreach(_expect IN LISTS _expects)
  string(FIND "${_out}${_err}" "${_expect}" _pos)
  if(_pos EQUAL -1)
    message(FATAL_ERROR "${SOURCE} failed to compile, but without the expected text\n"
                        "expected: ${_expect}\ngot:\n${_out}${_err}")
  endif()
endforeach()
if(NOT _max STREQUAL "")
  string(REGEX MATCHALL "error: " _errors "${_out}${_err}")
  list(LENGTH _errors _n)
  if(_n GREATER _max)
    message(FATAL_ERROR "${SOURCE}: ${_n} errors, at most ${_max} expected (follow-on errors pile up)\n${_out}${_err}")
  endif()
endif()
message(STATUS "rejected as expected: ${_first}")
