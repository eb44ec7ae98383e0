// expect: tessera::dist_tensor: the second argument must be a layout
#include <tessera/tensor/dist_tensor.hpp>
tessera::dist_tensor<float, int>* p = nullptr;
int main() { return sizeof(tessera::dist_tensor<float, int>) > 0 ? 0 : 1; }
