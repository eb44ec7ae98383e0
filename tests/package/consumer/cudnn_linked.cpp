// A user's program on tessera::cudnn: the component's own unit (from the installed package,
// a source compiled into this target) registers cuDNN's attention before main.
#include <cstdio>

#include <tessera/kernels/cuda/attention_library.hpp>

int main() {
  if (!tessera::cuda::cudnn_linked()) {
    std::puts("tessera::cudnn linked, but cuDNN's attention was not registered");
    return 1;
  }
  return 0;
}
