// tessera/core/atomic_file.hpp: write a file so that a crash never leaves a half-written
// file under its final name -- the one "temporary file, flush, rename" of the library.
//
// write_file_atomically(path, fill, what) opens "<path>.tmp.<pid>" in the same folder, lets
// `fill` write into it, flushes and fsyncs it, and renames it onto `path` (atomic on POSIX
// file systems). On any failure the temporary file is removed, the file at `path` (if any)
// is left as it was, and tessera::error names the file and says what failed, prefixed by
// `what` ("safetensors", "checkpoint", ...).
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include <tessera/core/error.hpp>

namespace tessera {

/// The temporary name write_file_atomically uses for `path` (same folder, so the rename
/// never crosses file systems).
inline std::filesystem::path atomic_temp_path(const std::filesystem::path& path) {
  return path.string() + ".tmp." + std::to_string(static_cast<long>(::getpid()));
}

/// Flushes a file's data to the disk (fsync); false when that failed.
inline bool sync_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

/// Writes `path` through a temporary file: `fill(std::ofstream&)` writes the content.
template <class Fill>
void write_file_atomically(const std::filesystem::path& path, Fill&& fill, std::string_view what,
                           bool sync = false) {
  const std::filesystem::path tmp = atomic_temp_path(path);
  const std::string w(what);
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw error(w + ": cannot create '" + tmp.string() + "' (does the folder exist and is it writable?)");
    try {
      fill(out);
    } catch (...) {
      out.close();
      std::filesystem::remove(tmp, ec);
      throw;
    }
    out.flush();
    if (!out) {
      out.close();
      std::filesystem::remove(tmp, ec);
      throw error(w + ": writing '" + tmp.string() + "' failed (disk full?); '" + path.string() +
                  "' is unchanged");
    }
  }
  if (sync && !sync_file(tmp)) {
    std::filesystem::remove(tmp, ec);
    throw error(w + ": flushing '" + tmp.string() + "' to the disk failed; '" + path.string() + "' is unchanged");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw error(w + ": cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + why);
  }
}

/// Writes `content` to `path` through a temporary file (write_file_atomically).
inline void write_text_atomically(const std::filesystem::path& path, std::string_view content, std::string_view what,
                                  bool sync = false) {
  write_file_atomically(
      path, [&](std::ofstream& out) { out.write(content.data(), static_cast<std::streamsize>(content.size())); },
      what, sync);
}

}  // namespace tessera
