// expect: tessera::dim: too many axes
#include <tessera/layout/layout.hpp>
using namespace tessera;
using D = dim<0, "a", "b", "c", "d", "e", "f", "g", "h", "i">;
constexpr auto x = D::item;
int main() {}
