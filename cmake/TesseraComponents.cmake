# Finds tessera's optional dependencies (MPI, CUDA, NCCL, OpenBLAS, SentencePiece, toml++,
# Google Benchmark) and defines one INTERFACE target per component.
# Used both by the build tree and by the installed package config. None is required:
# a component whose dependency is missing is simply absent (TESSERA_HAS_<C> is OFF).

# The optional components, each with what provides it (configure's summary names it when
# missing): one list for the targets, the summary, the header check and the package test.
set(TESSERA_COMPONENTS mpi nccl cuda cudnn openblas sentencepiece tomlplusplus benchmark)
set(TESSERA_COMPONENT_HINT_mpi "libopenmpi-dev")
set(TESSERA_COMPONENT_HINT_nccl "NCCL and the CUDA toolkit")
set(TESSERA_COMPONENT_HINT_cuda "the CUDA toolkit")
set(TESSERA_COMPONENT_HINT_cudnn "cuDNN 9 and the cuDNN frontend's headers: bash .ci/setup.sh")
set(TESSERA_COMPONENT_HINT_openblas "libopenblas-dev")
set(TESSERA_COMPONENT_HINT_sentencepiece "libsentencepiece-dev")
set(TESSERA_COMPONENT_HINT_tomlplusplus "libtomlplusplus-dev")
set(TESSERA_COMPONENT_HINT_benchmark "libbenchmark-dev")

# this file's folder (in the source tree: cmake/, beside build/deps where .ci/setup.sh puts the
# cuDNN frontend's headers)
set(_tessera_components_dir ${CMAKE_CURRENT_LIST_DIR})

macro(tessera_find_components)
  find_package(MPI QUIET COMPONENTS CXX)
  set(TESSERA_HAS_MPI ${MPI_CXX_FOUND})

  find_package(CUDAToolkit QUIET)
  set(TESSERA_HAS_CUDA ${CUDAToolkit_FOUND})

  set(TESSERA_HAS_NCCL OFF)
  if(CUDAToolkit_FOUND)
    find_path(TESSERA_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    find_library(TESSERA_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
    if(TESSERA_NCCL_INCLUDE_DIR AND TESSERA_NCCL_LIBRARY)
      set(TESSERA_HAS_NCCL ON)
    endif()
  endif()

  # cuDNN's fused attention (kernels/cuda/cudnn_attention.hpp): cudnn.h beside the toolkit's
  # headers and the cuDNN frontend's (header-only; .ci/setup.sh puts them in build/deps). The
  # frontend opens cuDNN when first used (dlopen), so a program does not need cuDNN to start.
  set(TESSERA_HAS_CUDNN OFF)
  if(CUDAToolkit_FOUND)
    find_path(TESSERA_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    find_path(TESSERA_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
              HINTS ${_tessera_components_dir}/../build/deps/cudnn-frontend-1.32.0/include)
    if(TESSERA_CUDNN_INCLUDE_DIR AND TESSERA_CUDNN_FRONTEND_INCLUDE_DIR)
      set(TESSERA_HAS_CUDNN ON)
    endif()
  endif()

  set(TESSERA_HAS_OPENBLAS OFF)
  find_path(TESSERA_OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
  find_library(TESSERA_OPENBLAS_LIBRARY NAMES openblas)
  if(TESSERA_OPENBLAS_INCLUDE_DIR AND TESSERA_OPENBLAS_LIBRARY)
    set(TESSERA_HAS_OPENBLAS ON)
  endif()

  set(TESSERA_HAS_SENTENCEPIECE OFF)
  find_path(TESSERA_SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
  find_library(TESSERA_SENTENCEPIECE_LIBRARY sentencepiece)
  find_library(TESSERA_SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train)
  if(TESSERA_SENTENCEPIECE_INCLUDE_DIR AND TESSERA_SENTENCEPIECE_LIBRARY AND TESSERA_SENTENCEPIECE_TRAIN_LIBRARY)
    set(TESSERA_HAS_SENTENCEPIECE ON)
  endif()

  # toml++ (train/config.hpp): its CMake package (Debian ships one, building a shared
  # library), else its pkg-config file.
  set(TESSERA_HAS_TOMLPLUSPLUS OFF)
  find_package(tomlplusplus QUIET)
  if(TARGET tomlplusplus::tomlplusplus)
    set(TESSERA_HAS_TOMLPLUSPLUS ON)
    set(TESSERA_TOMLPLUSPLUS_TARGET tomlplusplus::tomlplusplus)
  else()
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(TESSERA_TOMLPLUSPLUS QUIET IMPORTED_TARGET tomlplusplus)
      if(TESSERA_TOMLPLUSPLUS_FOUND)
        set(TESSERA_HAS_TOMLPLUSPLUS ON)
        set(TESSERA_TOMLPLUSPLUS_TARGET PkgConfig::TESSERA_TOMLPLUSPLUS)
      endif()
    endif()
  endif()

  # Google Benchmark (tessera/bench/transition.hpp: a layout transition as a benchmark).
  set(TESSERA_HAS_BENCHMARK OFF)
  find_package(benchmark QUIET)
  if(TARGET benchmark::benchmark)
    set(TESSERA_HAS_BENCHMARK ON)
  endif()
endmacro()

# _tessera_component(<c> [INCLUDES dirs...] LIBS libs... [DEFINES macros...]): tessera::<c> with
# TESSERA_HAS_<C>=1 (and the macros),
# linking `core`; IMPORTED when `imported` (both tessera_define_component_targets' variables).
function(_tessera_component c)
  cmake_parse_arguments(A "" "" "INCLUDES;LIBS;DEFINES" ${ARGN})
  string(TOUPPER "${c}" C)
  if(NOT TESSERA_HAS_${C} OR TARGET tessera::${c})
    return()
  endif()
  if(imported)
    add_library(tessera::${c} INTERFACE IMPORTED)
    set(t tessera::${c})
  else()
    add_library(tessera_${c} INTERFACE)
    add_library(tessera::${c} ALIAS tessera_${c})
    set(t tessera_${c})
  endif()
  if(A_INCLUDES)
    target_include_directories(${t} SYSTEM INTERFACE ${A_INCLUDES})
  endif()
  target_link_libraries(${t} INTERFACE ${core} ${A_LIBS})
  target_compile_definitions(${t} INTERFACE TESSERA_HAS_${C}=1 ${A_DEFINES})
endfunction()

# Defines a target tessera::<c> for each component that was found, linking <core>. In the
# build tree (and under add_subdirectory) it is tessera_<c>, aliased; from the installed
# package (IMPORTED) it is an IMPORTED target, as tessera::tessera is there, so that a
# consumer's own export set may name it (install(EXPORT) refuses targets that are neither
# exported nor imported).
function(tessera_define_component_targets core)
  set(imported OFF)
  if(ARGN STREQUAL "IMPORTED")
    set(imported ON)
  endif()
  _tessera_component(mpi LIBS MPI::MPI_CXX)
  _tessera_component(cuda LIBS CUDA::cudart CUDA::cublas CUDA::cublasLt)
  _tessera_component(cudnn INCLUDES ${TESSERA_CUDNN_INCLUDE_DIR} ${TESSERA_CUDNN_FRONTEND_INCLUDE_DIR}
                     LIBS CUDA::cudart ${CMAKE_DL_LIBS} DEFINES NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING)
  # and the unit that compiles it (host compiler) and registers it for the CUDA units
  # (kernels/cuda/attention_library.hpp, "How a program links it"): from the installed package a
  # source each target that links tessera::cudnn compiles; in a build tree an object library
  # compiled once (24 s of g++), whose object each such target links
  if(TARGET tessera::cudnn)
    set(_unit ${_tessera_components_dir}/cudnn_attention_unit.cpp)
    if(imported)
      target_sources(tessera::cudnn INTERFACE ${_unit})
    elseif(NOT TARGET tessera_cudnn_unit)
      add_library(tessera_cudnn_unit OBJECT EXCLUDE_FROM_ALL ${_unit})
      target_include_directories(tessera_cudnn_unit SYSTEM PRIVATE ${TESSERA_CUDNN_INCLUDE_DIR}
                                 ${TESSERA_CUDNN_FRONTEND_INCLUDE_DIR})
      target_compile_definitions(tessera_cudnn_unit PRIVATE TESSERA_HAS_CUDNN=1 NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING)
      target_link_libraries(tessera_cudnn_unit PRIVATE ${core} CUDA::cudart)
      # a front-end check of its own where the build asks for one (TESSERA_FRONTEND_ONLY: CI's
      # clang++ pass, whose targets that link tessera::cudnn are front-end checks too and never
      # use the object; compiled in full there it was the pass's costliest unit, 76 s at -O1)
      if(TESSERA_FRONTEND_ONLY AND "tessera_cudnn_unit" MATCHES "${TESSERA_FRONTEND_ONLY}")
        target_compile_options(tessera_cudnn_unit PRIVATE -fsyntax-only)
        set_target_properties(tessera_cudnn_unit PROPERTIES EXCLUDE_FROM_ALL OFF)
      else()
        target_sources(tessera_cudnn INTERFACE $<TARGET_OBJECTS:tessera_cudnn_unit>)
      endif()
    endif()
  endif()
  _tessera_component(nccl INCLUDES ${TESSERA_NCCL_INCLUDE_DIR} LIBS CUDA::cudart ${TESSERA_NCCL_LIBRARY})
  _tessera_component(openblas INCLUDES ${TESSERA_OPENBLAS_INCLUDE_DIR} LIBS ${TESSERA_OPENBLAS_LIBRARY})
  _tessera_component(sentencepiece INCLUDES ${TESSERA_SENTENCEPIECE_INCLUDE_DIR}
                     LIBS ${TESSERA_SENTENCEPIECE_LIBRARY} ${TESSERA_SENTENCEPIECE_TRAIN_LIBRARY})
  _tessera_component(tomlplusplus LIBS ${TESSERA_TOMLPLUSPLUS_TARGET})
  _tessera_component(benchmark LIBS benchmark::benchmark)
endfunction()
