// option_set: aliases, early options, forbidden keys, the nearest-key suggestion.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <tessera/train/cli.hpp>

#include "failure.hpp"

namespace {
using namespace tessera;
using testing_support::failure_of;
using testing_support::has;

struct fields {
  std::int64_t steps = 10;
  double lr = 8e-4;
  std::string file;
  bool quiet = false;
};

train::option_set make(fields& f) {
  train::option_set o("prog");
  o.add("training.steps", &f.steps, "steps").add("optimizer.lr", &f.lr, "lr");
  o.add_flag("training.quiet", &f.quiet, "less output");
  o.alias("steps", "training.steps").alias("lr", "optimizer.lr").alias("quiet", "training.quiet");
  return o;
}

bool parse(train::option_set& o, std::vector<const char*> args) {
  args.insert(args.begin(), "prog");
  return o.parse(static_cast<int>(args.size()), args.data());
}
}  // namespace

TEST_CASE("aliases: an alias and its key set one field, the last one given wins") {
  fields f;
  auto o = make(f);
  CHECK(parse(o, {"--steps", "3"}));
  CHECK(f.steps == 3);
  CHECK(parse(o, {"--training.steps", "4", "--steps=5"}));
  CHECK(f.steps == 5);
  CHECK(parse(o, {"--steps", "6", "--training.steps", "7"}));
  CHECK(f.steps == 7);
  CHECK(parse(o, {"--quiet"}));
  CHECK(f.quiet);
  o.set("lr", "0.5");  // set() takes aliases too
  CHECK(f.lr == 0.5);
  // Errors name the flag as the user spelled it.
  CHECK(has(failure_of<error>([&] { parse(o, {"--steps", "ten"}); }), "option --steps: 'ten' is not an integer"));
  CHECK(has(failure_of<error>([&] { parse(o, {"--training.steps", "x"}); }), "option --training.steps: 'x'"));
  CHECK(o.kind_of("steps") == train::value_kind::integer);
  CHECK(o.kind_of("optimizer.lr") == train::value_kind::number);
  CHECK(o.kind_of("quiet") == train::value_kind::flag);
  CHECK(!o.kind_of("nope"));
  CHECK(o.alias_target("steps") == "training.steps");
  CHECK(o.alias_target("training.steps").empty());
}

TEST_CASE("aliases: shown in the help on their option's line; defined once") {
  fields f;
  auto o = make(f);
  const std::string h = o.help();
  CHECK(has(h, "--training.steps, --steps N"));
  CHECK(has(h, "--optimizer.lr, --lr X"));
  CHECK(has(failure_of<error>([&] { o.alias("steps", "training.steps"); }), "defined twice"));
  CHECK(has(failure_of<error>([&] { o.alias("x", "no.such"); }), "unknown option --no.such"));
  CHECK(has(failure_of<error>([&] { o.add("steps", &f.steps, "again"); }), "defined twice"));
}

TEST_CASE("unknown keys name the nearest known key") {
  fields f;
  auto o = make(f);
  const std::string m = failure_of<error>([&] { parse(o, {"--stepz", "3"}); });
  CHECK(has(m, "unknown option --stepz (did you mean --steps?)"));
  CHECK(has(m, "run prog --help"));
  CHECK(has(failure_of<error>([&] { o.set("training.stpes", "1"); }), "did you mean --training.steps?"));
  CHECK(has(failure_of<error>([&] { o.set("stpes", "1"); }), "did you mean --steps?"));  // a swap is one edit
  // The same last component in another section.
  CHECK(o.nearest("training.lr") == "optimizer.lr");
  CHECK(o.nearest("zzzzzzzz").empty());
  CHECK(!has(failure_of<error>([&] { parse(o, {"--zzzzzzzz", "1"}); }), "did you mean"));
  CHECK(o.nearest("stepz", /*keys_only=*/true).empty());  // only the alias is near
}

TEST_CASE("forbidden keys fail with the program's message, as keys or whole sections") {
  fields f;
  auto o = make(f);
  o.forbid("mesh.tp", "is fixed").forbid("policy.*", "is a policy, fixed");
  CHECK(failure_of<error>([&] { parse(o, {"--mesh.tp", "2"}); }) == "mesh.tp is fixed");
  CHECK(failure_of<error>([&] { o.set("policy.anything", "1"); }) == "policy.anything is a policy, fixed");
  CHECK(failure_of<error>([&] { o.set("mesh.tp", "1"); }) == "mesh.tp is fixed");
  CHECK(has(failure_of<error>([&] { o.set("mesh.dp", "1"); }), "unknown option --mesh.dp"));
  CHECK(o.forbidden("policy.x"));
  CHECK(!o.forbidden("policy"));
  CHECK(has(o.help(), "not options (fixed at compile time):\n  mesh.tp policy.*"));
  CHECK(has(failure_of<error>([&] { o.forbid("training.steps", "no"); }), "both an option and forbidden"));
}

TEST_CASE("early options run first wherever they stand; later flags override them") {
  fields f;
  auto o = make(f);
  std::vector<std::string> loaded;
  o.add_early("config", &f.file, "file", [&](train::option_set& s, const std::string& v) {
    loaded.push_back(v);
    s.set("training.steps", "100");  // what a config file would do
    s.set("optimizer.lr", "0.25");
  });
  CHECK(parse(o, {"--steps", "7", "--config", "a.toml"}));
  CHECK(loaded == std::vector<std::string>{"a.toml"});
  CHECK(f.file == "a.toml");
  CHECK(f.steps == 7);   // the flag wins over the file
  CHECK(f.lr == 0.25);   // the file wins over the default
  CHECK(parse(o, {"--config=b.toml", "--config", "c.toml"}));
  CHECK(loaded == std::vector<std::string>{"a.toml", "b.toml", "c.toml"});
  CHECK(f.file == "c.toml");
  // An unknown flag fails before the file is read.
  CHECK(has(failure_of<error>([&] { parse(o, {"--config", "d.toml", "--nope", "1"}); }), "unknown option --nope"));
  CHECK(loaded.size() == 3);
  // --help wins over everything.
  CHECK(!parse(o, {"--config", "e.toml", "--help"}));
  CHECK(loaded.size() == 3);
}

TEST_CASE("number options refuse inf and nan up front, in every spelling") {
  for (const char* v : {"inf", "-inf", "INF", "infinity", "nan", "NaN", "-nan", "nan(0x1)"}) {
    CAPTURE(v);
    fields f;
    auto o = make(f);
    CHECK(failure_of<error>([&] { parse(o, {"--lr", v}); }) ==
          "option --lr: '" + std::string(v) + "' is not a finite number");
    const std::string eq = std::string("--optimizer.lr=") + v;
    CHECK(failure_of<error>([&] { parse(o, {eq.c_str()}); }) ==
          "option --optimizer.lr: '" + std::string(v) + "' is not a finite number");
    CHECK(failure_of<error>([&] { o.set("lr", v); }) ==
          "option --lr: '" + std::string(v) + "' is not a finite number");
    CHECK(f.lr == 8e-4);  // untouched
  }
  // Out of double's range: not a number at all (stod reports the overflow).
  fields f;
  auto o = make(f);
  CHECK(failure_of<error>([&] { parse(o, {"--lr", "1e999"}); }) == "option --lr: '1e999' is not a number");
  // The largest finite values still pass (a range check is validate()'s business).
  CHECK(parse(o, {"--lr", "1e300"}));
  CHECK(f.lr == 1e300);
}
