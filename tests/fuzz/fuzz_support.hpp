// What every harness of tests/fuzz shares: the promise check and scratch files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include <tessera/core/error.hpp>

namespace fuzz_support {

/// A broken promise: print why and abort, so that libFuzzer keeps the input as a crash.
[[noreturn]] inline void broken(const std::string& why) {
  std::fprintf(stderr, "tessera fuzz: promise broken: %s\n", why.c_str());
  std::abort();
}
inline void require(bool ok, const std::string& why) {
  if (!ok) broken(why);
}

/// Runs `f`; the input may be refused only with tessera::error (or a class derived from it)
/// with a non-empty message that starts with `source` (the file or text it names). Returns
/// whether `f` ran to the end.
template <class F>
bool value_or_error(F&& f, std::string_view source = {}) {
  try {
    f();
    return true;
  } catch (const tessera::error& e) {
    const std::string_view m = e.what();
    require(!m.empty(), "tessera::error with an empty message");
    if (!source.empty() && m.find(source) == std::string_view::npos)
      broken("the error does not name '" + std::string(source) + "': " + std::string(m));
    return false;
  } catch (const std::exception& e) {
    broken(std::string("an exception other than tessera::error escaped: ") + e.what());
  } catch (...) {
    broken("a non-standard exception escaped");
  }
}

/// A scratch folder of this process (harnesses that read files write the input there).
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : std::filesystem::temp_directory_path();
    auto d = base / ("tessera-fuzz-" + std::to_string(static_cast<long>(::getpid())));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
inline std::filesystem::path write_input(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const auto p = scratch() / name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  require(static_cast<bool>(out), "cannot write the scratch file " + p.string());
  return p;
}

}  // namespace fuzz_support
