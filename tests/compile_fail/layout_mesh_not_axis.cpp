// expect: every argument must be a tessera::axis
#include <tessera/layout/layout.hpp>
using namespace tessera;
mesh<axis<"dp", 2>, int>* m = nullptr;
constexpr int n = mesh<axis<"dp", 2>, int>::ndim;
int main() {}
