# Installs tessera into a scratch prefix and builds a consumer project against it with
# find_package, then builds the same consumer with add_subdirectory. -D: SOURCE_DIR,
# BINARY_DIR (tessera's build tree), WORK (scratch folder), CXX, and CUDNN_FRONTEND (the
# cuDNN frontend's headers, where tessera::cudnn was found).
file(REMOVE_RECURSE ${WORK})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${out}${err}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${WORK}/prefix)
# the cuDNN frontend's headers where tessera's build found them (.ci/setup.sh's build/deps,
# which the installed package's search does not look in): tessera::cudnn then, and its program
set(_frontend "")
if(CUDNN_FRONTEND)
  set(_frontend -DTESSERA_CUDNN_FRONTEND_INCLUDE_DIR=${CUDNN_FRONTEND})
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package/consumer -B ${WORK}/pkg -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_PREFIX_PATH=${WORK}/prefix -DTESSERA_VIA=package ${_frontend})
run(${CMAKE_COMMAND} --build ${WORK}/pkg)
run(${WORK}/pkg/consumer)
if(CUDNN_FRONTEND)
  run(${WORK}/pkg/consumer_cudnn)
  message(STATUS "the package's tessera::cudnn registered cuDNN's attention in a consumer's program")
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/package/consumer -B ${WORK}/sub -DCMAKE_CXX_COMPILER=${CXX}
    -DTESSERA_VIA=subdirectory -DTESSERA_SOURCE_DIR=${SOURCE_DIR})
run(${CMAKE_COMMAND} --build ${WORK}/sub --target consumer)
run(${WORK}/sub/consumer)
message(STATUS "find_package and add_subdirectory consumers built and ran")
