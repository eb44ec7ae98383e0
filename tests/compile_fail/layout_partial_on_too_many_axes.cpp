// expect: tessera::partial_on: too many axes
#include <tessera/layout/layout.hpp>
using namespace tessera;
using D = partial_on<reduce::sum, "a", "b", "c", "d", "e", "f", "g", "h", "i">;
constexpr auto x = D::item;
int main() {}
