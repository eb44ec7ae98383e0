# Warnings as errors for everything tessera builds itself (tests, examples, benchmarks).
add_library(tessera_warnings INTERFACE)
target_compile_options(tessera_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror>)

# TESSERA_EMULATION_FLAGS: compile flags added, after the build type's, to the two programs
# whose runs are mostly emulated CUDA threads' arithmetic (test_cuda_attention_emulated and
# test_cuda_llama_emulated: the flash-attention kernels' every thread as host code). CI's g++
# pass compiles everything at -Og and gives these two -O1: at -Og they compile in 21 and 15 s
# less and run 16 and 17 s longer (11 -> 27 s, 27 -> 44 s). The other programs that run the
# emulation (test_kernels_emulated, test_cuda_emulation, test_comm_nccl_emulated, the other
# gpu_emulated.* programs, train_llama_emulated) take the build type's flags: at -Og their
# compiles are 35-40% shorter (emulated_cuda_recipes.cpp 158 -> 96 s) and their runs a few
# seconds longer at most (gpu_emulated.cuda_recipes 40 -> 50 s; docs/performance.md, "CI").
# Empty for users' builds.
set(TESSERA_EMULATION_FLAGS "" CACHE STRING "Compile flags added to the two emulated GPU tests that run the flash-attention kernels (CI: -O1)")
function(tessera_emulation_flags target)
  foreach(_flag IN LISTS TESSERA_EMULATION_FLAGS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${_flag}>)
  endforeach()
endfunction()

# tessera_cuda_emulation(<target> [NCCL]): <target>'s CUDA code compiled by the host compiler
# against the CUDA emulation (tests/support/emulated_cuda first on the include path, the
# blocks' threads as fibers; docs/cuda.md, "The GPU tests on the host"), with NCCL emulated
# between thread ranks when NCCL is given.
function(tessera_cuda_emulation target)
  cmake_parse_arguments(E "NCCL" "" "" ${ARGN})
  target_include_directories(${target} BEFORE PRIVATE ${PROJECT_SOURCE_DIR}/tests/support/emulated_cuda
                             ${PROJECT_SOURCE_DIR}/tests/support)
  target_compile_definitions(${target} PRIVATE TESSERA_CUDA_EMULATION=1 TESSERA_EMULATION_FIBERS=1)
  if(E_NCCL)
    target_compile_definitions(${target} PRIVATE TESSERA_HAS_NCCL=1)
  endif()
  target_link_libraries(${target} PRIVATE tessera_warnings ${TESSERA_BOOST_CONTEXT_LIBRARY})
endfunction()

# tessera_add_subdirectories(<dir>): adds every immediate subfolder of <dir> that holds a
# CMakeLists.txt, so that each area of the project owns its own folder and list file.
function(tessera_add_subdirectories dir)
  file(GLOB _children RELATIVE ${dir} CONFIGURE_DEPENDS ${dir}/*/CMakeLists.txt)
  list(SORT _children)
  foreach(_c IN LISTS _children)
    get_filename_component(_d ${_c} DIRECTORY)
    add_subdirectory(${dir}/${_d})
  endforeach()
endfunction()

# tessera_add_cli_test(<name> RC <exit code> TEXT <expected text> COMMAND <cmd> <args...>)
# A command-line test: the exit code must equal RC and the output contain TEXT.
function(tessera_add_cli_test name)
  cmake_parse_arguments(T "" "RC;TEXT" "COMMAND" ${ARGN})
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DEXPECT_RC=${T_RC} "-DEXPECT_TEXT=${T_TEXT}"
            -P ${PROJECT_SOURCE_DIR}/cmake/run_expect.cmake -- ${T_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS cli)
endfunction()

# tessera_enable_cuda_language(): enables CMake's CUDA language when nvcc is found
# (CMAKE_CUDA_COMPILER, CUDACXX, the path, or /usr/local/cuda/bin), for sm_80 and sm_90 unless
# CMAKE_CUDA_ARCHITECTURES says otherwise; sets TESSERA_CUDA_LANGUAGE to ON or OFF. A macro:
# enable_language must run in the directory's scope, not a function's.
macro(tessera_enable_cuda_language)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  set(TESSERA_CUDA_LANGUAGE OFF)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100; H100 / H200
    endif()
    enable_language(CUDA)
    set(TESSERA_CUDA_LANGUAGE ON)
  endif()
endmacro()
