// expect: tessera::train::checkpointer: the model's parameters and the optimizer's moments are in a device's memory
// max-errors: 1
#include <device_like_kernels.hpp>
#include <tessera/model/device_llama.hpp>
#include <tessera/train/checkpoint.hpp>
constexpr auto size = sizeof(tessera::train::checkpointer<tessera::device_llama<device_like_kernels>>);
