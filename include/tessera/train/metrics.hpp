// tessera/train/metrics.hpp: per-step training metrics, the progress line and JSONL.
//
// The progress line follows TorchTitan's metrics logger (step, loss, grad norm, memory,
// tokens per second, MFU) with the learning rate added; the JSONL file holds one object
// per step with keys step, loss, grad_norm, lr, tokens_per_s, mfu, peak_memory_bytes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <fstream>
#include <string>

#include <sys/resource.h>

#include <tessera/core/error.hpp>

namespace tessera::train {

struct step_metrics {
  std::int64_t step = 0;  ///< 1-based, as TorchTitan prints it
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  double tokens_per_s = 0;
  double mfu = 0;  ///< fraction in [0, 1]
  std::int64_t peak_memory_bytes = 0;
};

/// Peak resident set size of this process in bytes (getrusage; Linux reports KiB).
inline std::int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<std::int64_t>(u.ru_maxrss) * 1024;
}

/// A JSON number; NaN and infinities (not JSON) are written as null.
inline std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

inline std::string to_json(const step_metrics& m) {
  return "{\"step\": " + std::to_string(m.step) + ", \"loss\": " + json_number(m.loss) +
         ", \"grad_norm\": " + json_number(m.grad_norm) + ", \"lr\": " + json_number(m.lr) +
         ", \"tokens_per_s\": " + json_number(m.tokens_per_s) +
         ", \"mfu\": " + json_number(m.mfu) +
         ", \"peak_memory_bytes\": " + std::to_string(m.peak_memory_bytes) + "}";
}

/// "1234567" -> "1,234,567".
inline std::string group_thousands(const std::string& digits) {
  std::string out;
  const std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[i];
    const std::size_t left = n - 1 - i;
    if (left > 0 && left % 3 == 0 && digits[i] != '-') out += ',';
  }
  return out;
}

/// The progress line, e.g.
/// `step:  10  loss:  6.1234  grad_norm:  0.8123  lr: 8.00e-04  memory:  0.21GiB  tps: 12,345  mfu: 51.20%`
inline std::string progress_line(const step_metrics& m) {
  const std::string tps =
      group_thousands(std::to_string(static_cast<long long>(std::llround(m.tokens_per_s))));
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step: %3lld  loss: %8.4f  grad_norm: %8.4f  lr: %.2e  memory: %6.2fGiB  "
                "tps: %s  mfu: %.2f%%",
                static_cast<long long>(m.step), m.loss, m.grad_norm, m.lr,
                static_cast<double>(m.peak_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                tps.c_str(), 100.0 * m.mfu);
  return buf;
}

/// Appends one JSON object per step to a file (created or truncated when opened; its folder
/// is created when missing, as TorchTitan creates its dump folder).
class jsonl_writer {
 public:
  jsonl_writer() = default;
  explicit jsonl_writer(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);  // failure: said below
    out_.open(path, std::ios::trunc);
    if (!out_)
      throw error("metrics: cannot create '" + path.string() +
                  "' (does the directory exist and is it writable?)");
  }
  bool is_open() const { return out_.is_open(); }
  void write(const step_metrics& m) {
    if (!out_.is_open()) return;
    out_ << to_json(m) << '\n';
    out_.flush();
    if (!out_) throw error("metrics: writing '" + path_.string() + "' failed");
  }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace tessera::train
