// tessera/io/token_file.hpp: token files, raw little-endian int32 ids (llm.c's and
// nanoGPT's .bin data without a header). Readers map the file (mapped_token_file: one copy a
// node, in the page cache) or copy it (read_token_file), check the size and every id and throw
// tessera::error naming the file; the writer writes to a temporary name, then renames.
#pragma once

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tessera/core/atomic_file.hpp>
#include <tessera/core/error.hpp>

namespace tessera::io {

/// A token file mapped into memory, read-only: the ranks of a node that map one file share one
/// copy of it, in the kernel's page cache, instead of each holding the file (a pre-training
/// corpus is hundreds of GB). The constructor checks what read_token_file checks -- the size
/// and every id, so a bad id stops the run at start-up, not at the step that reads it -- and
/// throws tessera::error naming the file. Move-only; tokens() stays valid while it lives.
class mapped_token_file {
 public:
  mapped_token_file() = default;  // maps nothing: tokens() is empty
  explicit mapped_token_file(const std::filesystem::path& path, std::int64_t vocab_size = 0) {
    check(std::endian::native == std::endian::little,
          "tokens: tessera reads token files on little-endian hosts only");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw error("tokens: cannot open '" + path.string() + "': no such file");
    const auto bytes = std::filesystem::file_size(path, ec);
    if (ec) throw error("tokens: cannot read the size of '" + path.string() + "': " + ec.message());
    if (bytes == 0) throw error("tokens: '" + path.string() + "' is empty");
    if (bytes % 4 != 0)
      throw error("tokens: '" + path.string() + "' has " + std::to_string(bytes) +
                  " bytes, not a multiple of 4; expected raw little-endian int32 tokens");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw error("tokens: cannot open '" + path.string() + "': " + std::strerror(errno));
    void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    const int mmap_errno = errno;
    ::close(fd);
    if (m == MAP_FAILED) throw error("tokens: cannot map '" + path.string() + "': " + std::strerror(mmap_errno));
    data_ = static_cast<const std::int32_t*>(m), n_ = bytes / 4;
    try {
      check_ids(path, vocab_size);
    } catch (...) {
      unmap();
      throw;
    }
  }
  mapped_token_file(mapped_token_file&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  mapped_token_file& operator=(mapped_token_file&& o) noexcept {
    if (this != &o) unmap(), data_ = std::exchange(o.data_, nullptr), n_ = std::exchange(o.n_, 0);
    return *this;
  }
  ~mapped_token_file() { unmap(); }

  std::span<const std::int32_t> tokens() const noexcept { return {data_, n_}; }

 private:
  const std::int32_t* data_ = nullptr;
  std::size_t n_ = 0;

  void check_ids(const std::filesystem::path& path, std::int64_t vocab_size) const {
    ::madvise(const_cast<std::int32_t*>(data_), n_ * 4, MADV_SEQUENTIAL);  // a hint: one pass, in order
    for (std::size_t i = 0; i < n_; ++i)
      if (data_[i] < 0 || (vocab_size > 0 && data_[i] >= vocab_size))
        throw error("tokens: '" + path.string() + "': token " + std::to_string(i) + " is " + std::to_string(data_[i]) +
                    ", outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    ::madvise(const_cast<std::int32_t*>(data_), n_ * 4, MADV_NORMAL);  // then windows in any order
  }
  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<std::int32_t*>(data_), n_ * 4);
    data_ = nullptr, n_ = 0;
  }
};

/// Reads a file of raw little-endian int32 tokens into memory (mapped_token_file's checks).
/// Throws on a missing, empty or odd-sized file, and on negative ids or ids >= vocab_size
/// (when vocab_size > 0).
inline std::vector<std::int32_t> read_token_file(const std::filesystem::path& path, std::int64_t vocab_size = 0) {
  const mapped_token_file f(path, vocab_size);
  return {f.tokens().begin(), f.tokens().end()};
}

/// Tokens to train on: a mapped token file, or ids held in memory (a corpus just tokenized).
/// Converts to the span a train::batch_loader reads.
class token_data {
 public:
  token_data(mapped_token_file f) : file_(std::move(f)) {}                 // NOLINT: either source converts
  token_data(std::vector<std::int32_t> ids) : ids_(std::move(ids)) {}      // NOLINT
  std::span<const std::int32_t> span() const noexcept { return file_.tokens().empty() ? ids_ : file_.tokens(); }
  operator std::span<const std::int32_t>() const noexcept { return span(); }  // NOLINT
  std::size_t size() const noexcept { return span().size(); }

 private:
  mapped_token_file file_{};
  std::vector<std::int32_t> ids_;
};

/// Writes tokens as raw little-endian int32 (to a temporary name, then renamed).
inline void write_token_file(const std::filesystem::path& path,
                             std::span<const std::int32_t> tokens) {
  write_file_atomically(path, [&](std::ofstream& out) {
    out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size_bytes()));
  }, "tokens");
}

}  // namespace tessera::io
