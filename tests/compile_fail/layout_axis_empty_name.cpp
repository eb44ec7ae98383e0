// expect: an axis needs a non-empty name
#include <tessera/tessera.hpp>
using namespace tessera;
axis<"", 2> a;
int main() {}
