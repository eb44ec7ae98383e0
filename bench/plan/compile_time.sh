#!/usr/bin/env bash
# Measures what planning at compile time costs: the front-end time (-fsyntax-only) of
#   base:      the plan headers and one layout, no plan
#   one plan:  + one plan_t (A* search in constant evaluation)
#   16 plans:  + 16 different plan_t on a 3-D mesh
#   all pairs: tests/plan/test_plan_all_pairs.cpp (4096 pairs of a 3-D mesh, one
#              multi-target search per source; 2744 legal plans checked by static_assert)
# for g++ and clang++, median of 3 runs each. Usage: bash bench/plan/compile_time.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/base.cpp" <<'CPP'
#include <tessera/plan/plan.hpp>
using M = tessera::mesh<tessera::axis<"pp", 2>, tessera::axis<"dp", 2>, tessera::axis<"tp", 2>>;
using A = tessera::layout_t<M, 2, tessera::shard<0>, tessera::shard<1>, tessera::replicate>;
int main() { return A::rank == 2 ? 0 : 1; }
CPP
cat > "$tmp/one.cpp" <<'CPP'
#include <tessera/plan/plan.hpp>
using namespace tessera;
using M = mesh<axis<"pp", 2>, axis<"dp", 2>, axis<"tp", 2>>;
using A = layout_t<M, 2, shard<0>, shard<1>, replicate>;
using B = layout_t<M, 2, shard<1>, shard<0>, partial<>>;
using P = plan_t<layout_t<M, 2, shard<0>, shard<1>, partial<>>, layout_t<M, 2, shard<1>, replicate, shard<0>>, float, extents<1024, 1024>>;
static_assert(P::size > 0);
int main() { return 0; }
CPP
{
  echo '#include <tessera/plan/plan.hpp>'
  echo 'using namespace tessera;'
  echo 'using M = mesh<axis<"pp", 2>, axis<"dp", 2>, axis<"tp", 2>>;'
  echo 'template <class... P> struct L { using type = layout_t<M, 2, P...>; };'
  echo 'using Pl = std::tuple<'
  ps=("shard<0>" "shard<1>" "replicate" "partial<>")
  n=0
  for a in 0 1 2 3; do for b in 0 1 2 3; do
    src="layout_t<M, 2, ${ps[$a]}, ${ps[$b]}, replicate>"
    dst="layout_t<M, 2, ${ps[$b]}, shard<0>, shard<1>>"
    [ "${ps[$a]}" = "partial<>" ] || [ "${ps[$b]}" = "partial<>" ] && dst="layout_t<M, 2, replicate, shard<0>, shard<1>>"
    n=$((n+1)); sep=","; [ $n = 16 ] && sep=""
    echo "  plan_t<$src, $dst, float, extents<1024, 1024>>$sep"
  done; done
  echo '>;'
  echo 'template <class T> struct sizes;'
  echo 'template <class... P> struct sizes<std::tuple<P...>> { static constexpr int n = (P::size + ...); };'
  echo 'static_assert(sizes<Pl>::n > 0);'
  echo 'int main() { return 0; }'
} > "$tmp/sixteen.cpp"
sed -i 's/#include <tessera\/plan\/plan.hpp>/#include <tuple>\n#include <tessera\/plan\/plan.hpp>/' "$tmp/sixteen.cpp"

median() { sort -n | sed -n 2p; }
measure() {  # compiler file extra...
  local cxx=$1 file=$2; shift 2
  for i in 1 2 3; do
    /usr/bin/time -f %e "$cxx" -std=c++20 -fsyntax-only -I"$root/include" "$@" "$file" 2>&1 >/dev/null | tail -1
  done | median
}
printf "%-10s %10s %10s %10s %10s\n" compiler base "one plan" "16 plans" "all pairs"
for cxx in g++ clang++; do
  printf "%-10s %9ss %9ss %9ss %9ss\n" "$cxx" "$(measure $cxx "$tmp/base.cpp")" "$(measure $cxx "$tmp/one.cpp")" \
    "$(measure $cxx "$tmp/sixteen.cpp")" "$(measure $cxx "$root/tests/plan/test_plan_all_pairs.cpp" -I/usr/include)"
done
