// tessera/tessera.hpp: everything in tessera that needs no external library.
// Backends that need MPI, NCCL, CUDA or OpenBLAS have their own headers and components.
#pragma once

// core
#include <tessera/core/config.hpp>
#include <tessera/core/dtype.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/extents.hpp>
#include <tessera/core/fixed_string.hpp>
#include <tessera/core/float8.hpp>
#include <tessera/core/json.hpp>
#include <tessera/core/reduce.hpp>
#include <tessera/core/source_location.hpp>
#include <tessera/core/trace.hpp>

// layout
#include <tessera/layout/layout.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/layout/parse.hpp>
#include <tessera/layout/placement.hpp>
#include <tessera/layout/print.hpp>

// plan
#include <tessera/plan/collective.hpp>
#include <tessera/plan/cost_model.hpp>
#include <tessera/plan/plan.hpp>
#include <tessera/plan/planner.hpp>
#include <tessera/plan/runs.hpp>

// comm (the mpi and nccl backends need their components: comm/mpi.hpp, comm/nccl.hpp)
#include <tessera/comm/any_communicator.hpp>
#include <tessera/comm/communicator.hpp>
#include <tessera/comm/flight_analyzer.hpp>
#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/flight_trace.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/comm/types.hpp>

// tensor
#include <tessera/tensor/arena.hpp>
#include <tessera/tensor/device_mesh.hpp>
#include <tessera/tensor/dist_tensor.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/memory.hpp>
#include <tessera/tensor/redistribute.hpp>
#include <tessera/tensor/tensor.hpp>

// kernels (those that need OpenBLAS: kernels/cpu/{matmul,attention,swiglu}.hpp)
#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>
#include <tessera/kernels/cpu/parallel.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/vocab_parallel.hpp>

// pipeline
#include <tessera/pipeline/executor.hpp>
#include <tessera/pipeline/pipeline.hpp>

// model (model/llama.hpp needs OpenBLAS)
#include <tessera/model/llama_ac.hpp>
#include <tessera/model/llama_arena.hpp>
#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/parallel/activation_checkpoint.hpp>
#include <tessera/parallel/layouts.hpp>
#include <tessera/parallel/policies.hpp>

// io (formats; io/tokenizer.hpp needs the sentencepiece component)
#include <tessera/io/hf_checkpoint.hpp>
#include <tessera/io/safetensors.hpp>
#include <tessera/io/token_file.hpp>

// train (train/trainer.hpp and train/sgemm_peak.hpp need OpenBLAS, train/tokenizer.hpp
// SentencePiece)
#include <tessera/train/cli.hpp>
#include <tessera/train/data.hpp>
#include <tessera/train/hf_checkpoint.hpp>
#include <tessera/train/lr_schedule.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/metrics.hpp>
#include <tessera/train/recipe.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/safetensors.hpp>
#include <tessera/train/traffic_estimator.hpp>
