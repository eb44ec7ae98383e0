// expect: two axes have the same name; give every axis its own name
#include <tessera/layout/layout.hpp>
using namespace tessera;
constexpr int n = mesh<axis<"dp", 2>, axis<"dp", 4>>::ndim;
int main() {}
