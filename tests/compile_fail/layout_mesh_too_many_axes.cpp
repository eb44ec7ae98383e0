// expect: a mesh needs between 1 and 8 axes
#include <tessera/layout/layout.hpp>
using namespace tessera;
mesh<axis<"a",1>, axis<"b",1>, axis<"c",1>, axis<"d",1>, axis<"e",1>, axis<"f",1>, axis<"g",1>, axis<"h",1>, axis<"i",1>> m;
int main() {}
