# GPU kernel benchmarks (ctest label `gpu`, `bench`): included by tests/gpu/CMakeLists.txt,
# which enables CUDA, so that they build with the GPU tests (and without Google Benchmark:
# the GPU machine may not have it); not a CMakeLists.txt, so bench/'s own list (built with
# Google Benchmark, without CUDA) does not add this folder. bench/gpu/run.sh runs them and
# keeps their Markdown.
add_executable(bench_gpu_kernels ${PROJECT_SOURCE_DIR}/bench/gpu/bench_kernels.cu)
target_compile_options(bench_gpu_kernels PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 -Werror=all-warnings>)
target_link_libraries(bench_gpu_kernels PRIVATE tessera::cuda tessera_warnings)
add_test(NAME gpu.bench_kernels COMMAND bench_gpu_kernels)
set_tests_properties(gpu.bench_kernels PROPERTIES LABELS "gpu;bench" SKIP_RETURN_CODE 77 TIMEOUT 600)

# The Llama on one GPU: step throughput and MFU of device_llama<cuda_kernels> (bench_llama.cu).
# The test runs the bf16 and Float8 rows (about 90 s on an H200) and the same with cuDNN's
# attention where it is built (tessera::cudnn; about 90 s more by estimate), each with one more step
# profiled by kernel where CUPTI is built (--profile: every GPU session so far wanted that
# table, and ran the program a second time for it); the f32 row (21.7 s a step there, 230 s
# with its warm-up and initialization) is `bench_gpu_llama --rows cuda`.
add_executable(bench_gpu_llama ${PROJECT_SOURCE_DIR}/bench/gpu/bench_llama.cu)
target_compile_options(bench_gpu_llama PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 -Werror=all-warnings>)
target_link_libraries(bench_gpu_llama PRIVATE tessera::cuda tessera::openblas tessera_warnings)
if(TARGET tessera::cudnn)  # cuDNN's attention rows and kernels (kernels/cuda/cudnn_attention.hpp)
  target_link_libraries(bench_gpu_kernels PRIVATE tessera::cudnn)
  target_link_libraries(bench_gpu_llama PRIVATE tessera::cudnn)
endif()
# --profile (GPU time by kernel, kernel_profile.hpp) where the toolkit has CUPTI
set(_tessera_llama_profile "")
if(TARGET CUDA::cupti)
  target_link_libraries(bench_gpu_llama PRIVATE CUDA::cupti)
  target_compile_definitions(bench_gpu_llama PRIVATE TESSERA_HAS_CUPTI=1)
  set(_tessera_llama_profile --profile)
endif()
add_test(NAME gpu.bench_llama COMMAND bench_gpu_llama --rows cuda-bf16,float8,cuda-bf16-cudnn,float8-cudnn
                                        ${_tessera_llama_profile})
set_tests_properties(gpu.bench_llama PROPERTIES LABELS "gpu;bench" SKIP_RETURN_CODE 77 TIMEOUT 600)

# Layout transitions on GPUs (Google Benchmark, where it is found): bench_comm_redistribute's
# table with dist_tensor in device memory over NCCL (tessera/bench/transition_cuda.hpp); plain
# C++, linked with the CUDA runtime and NCCL. Its emulated run is gpu_emulated.bench_transitions.
if(TARGET tessera::benchmark AND TARGET tessera::nccl)
  add_executable(bench_gpu_transitions ${PROJECT_SOURCE_DIR}/bench/gpu/bench_transitions.cpp)
  target_link_libraries(bench_gpu_transitions PRIVATE tessera::benchmark tessera::nccl tessera_warnings)
  add_test(NAME gpu.bench_transitions COMMAND bench_gpu_transitions)
  set_tests_properties(gpu.bench_transitions PROPERTIES LABELS "gpu;bench" SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
