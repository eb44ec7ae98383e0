// expect: a static axis size must be positive
#include <tessera/tessera.hpp>
using namespace tessera;
using A = axis<"dp", 0>;
A a;
int main() {}
