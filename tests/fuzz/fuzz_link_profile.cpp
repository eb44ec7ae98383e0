// Link profiles (plan/link_profile.hpp; `tessera-plan --links FILE`): any file gives a
// cost model whose every constant is in its range (check_cost_model), which plans a
// transition on the profile's 2 x 2 mesh to a finite time, and which the writer writes
// and the reader reads back equal; or tessera::error naming the file. toml++ is compiled
// into this harness header-only with its assertions on (as in fuzz_toml_config), so an
// input that reaches one of its defects aborts here.
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include <tessera/layout/parse.hpp>
#include <tessera/plan/link_profile.hpp>
#include <tessera/plan/planner.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera;
  const auto path = fuzz_support::write_input("links.toml", data, size);
  const std::vector<std::string_view> names{"dp", "tp"};
  cost_model cm;
  if (!fuzz_support::value_or_error([&] { cm = read_link_profile(path.string(), names); }, path.string())) return 0;
  fuzz_support::require(!check_cost_model(cm, 2), "a profile read gives an unusable model: " + cost_model_text(cm, 2));
  // it plans, to a finite time, with copies counted or not
  const mesh_shape m{2, {2, 2}};
  const std::array<std::string_view, 2> axes{"dp", "tp"};
  const layout_spec from = parse_layout("S(0),S(1)", axes, 2), to = parse_layout("S(1),R", axes, 2);
  fuzz_support::value_or_error([&] {
    const plan_result r = make_plan(parse_layout("P,S(0)", axes, 2), to, m, shape_t{64, 48}, 4, cm);
    fuzz_support::require(r.error == plan_error::none, std::string("no plan: ") + std::string(describe(r.error)));
    fuzz_support::require(std::isfinite(r.time_us) && r.time_us >= 0, "a plan time that is not finite");
    const plan_result s = make_plan(from, parse_layout("S(1),S(0)", axes, 2), m, shape_t{1 << 20, 1 << 10}, 4, cm);
    fuzz_support::require(s.error == plan_error::none && std::isfinite(s.time_us), "the swap does not plan");
  });
  // written and read back: the same constants
  const auto again = fuzz_support::scratch() / "links_again.toml";
  write_link_profile(again.string(), link_profile_text(cm, names, "fuzz"));
  const cost_model back = read_link_profile(again.string(), names);
  bool same = back.base_us == cm.base_us && back.copy_GBps == cm.copy_GBps && back.coll_scale == cm.coll_scale &&
              back.coll_base_us == cm.coll_base_us;
  for (std::size_t a = 0; a < names.size(); ++a) same = same && back.GBps[a] == cm.GBps[a] && back.hop_us[a] == cm.hop_us[a];
  fuzz_support::require(same, "the profile written does not read back equal:\n" + link_profile_text(cm, names, "read") +
                                  "\n" + link_profile_text(back, names, "read back"));
  return 0;
}
