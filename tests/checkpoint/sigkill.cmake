# The fault test of issue 16 under mpirun: a rank killed (SIGKILL) during an asynchronous
# save ends the job without a hang, leaves the previous complete checkpoint intact and the
# interrupted one uncommitted, and a rerun resumes from the intact one and reaches the
# uninterrupted run's losses (test_resume_mpi.cpp, phases fault and fault_resume).
# The uninterrupted run's curve is STRAIGHT, the straight.txt of the `save` phase
# (checkpoint.mpi_np4_save, a fixture of this test).
#   cmake -DMPIEXEC=... -DNP_FLAG=-np -DEXE=test_checkpoint_mpi -DFOLDER=dir -DSTRAIGHT=file -DLIMIT=300 -P sigkill.cmake
if(NOT EXISTS "${STRAIGHT}")
  message(FATAL_ERROR "no uninterrupted curve at ${STRAIGHT}: run checkpoint.mpi_np4_save first (ctest does, a fixture)")
endif()
file(REMOVE_RECURSE "${FOLDER}")
file(MAKE_DIRECTORY "${FOLDER}")
file(COPY_FILE "${STRAIGHT}" "${FOLDER}/straight.txt")
set(_mpi ${MPIEXEC} ${NP_FLAG} 4 --oversubscribe)
string(TIMESTAMP _t0 "%s")
execute_process(COMMAND ${_mpi} ${EXE} fault ${FOLDER} TIMEOUT ${LIMIT}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
string(TIMESTAMP _t1 "%s")
math(EXPR _took "${_t1} - ${_t0}")
message("the job with a rank killed at step 10 ended after ${_took} s, exit status ${_rc}:\n${_out}${_err}")
if("${_rc}" MATCHES "timeout")
  message(FATAL_ERROR "the job hung: still running after ${LIMIT} s")
endif()
if("${_rc}" STREQUAL "0")
  message(FATAL_ERROR "the job succeeded although rank 1 was killed")
endif()
string(FIND "${_out}${_err}" "signal 9" _sig)
if(_sig EQUAL -1)
  message(FATAL_ERROR "mpirun's output does not say that a rank was killed (signal 9)")
endif()
if(NOT EXISTS "${FOLDER}/step-5/metadata.json")
  message(FATAL_ERROR "the complete checkpoint of step 5 is gone")
endif()
if(EXISTS "${FOLDER}/step-10/metadata.json" OR EXISTS "${FOLDER}/step-10")
  message(FATAL_ERROR "the interrupted checkpoint of step 10 was committed")
endif()
execute_process(COMMAND ${_mpi} ${EXE} fault_resume ${FOLDER} TIMEOUT ${LIMIT}
                RESULT_VARIABLE _rc2 OUTPUT_VARIABLE _out2 ERROR_VARIABLE _err2)
message("the rerun:\n${_out2}${_err2}")
if(NOT "${_rc2}" STREQUAL "0")
  message(FATAL_ERROR "the rerun from step 5 failed (exit status ${_rc2})")
endif()
string(FIND "${_out2}" "PASSED" _pass)
if(_pass EQUAL -1)
  message(FATAL_ERROR "the rerun's losses differ from the uninterrupted run's")
endif()
file(REMOVE_RECURSE "${FOLDER}")
message("PASSED: step 5 intact, step 10 not committed, the rerun from step 5 equals the uninterrupted run")
