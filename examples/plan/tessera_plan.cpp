#include <tessera/tessera.hpp>
int main() { return 0; }
