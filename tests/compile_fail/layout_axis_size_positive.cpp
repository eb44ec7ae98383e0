// expect: a static axis size must be positive
#include <tessera/layout/layout.hpp>
using namespace tessera;
using A = axis<"dp", 0>;
A a;
int main() {}
