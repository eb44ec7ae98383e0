// expect: an axis needs a non-empty name
#include <tessera/layout/layout.hpp>
using namespace tessera;
axis<"", 2> a;
int main() {}
