// TOML run configurations (train/config.hpp): any file gives a loaded configuration or
// tessera::error naming the file. toml++ is compiled into this harness header-only with
// its assertions on, so an input that reaches one of its defects aborts here.
#include <tessera/train/config.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz_support::write_input("config.toml", data, size);
  tessera::train::run_config c;
  tessera::train::option_set o("train_llama");
  tessera::train::bind(o, c);
  if (fuzz_support::value_or_error([&] { tessera::train::load_toml(path.string(), o); }, path.string()))
    fuzz_support::value_or_error([&] { tessera::train::validate(c); });
  return 0;
}
