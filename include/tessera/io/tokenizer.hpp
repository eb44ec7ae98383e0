// tessera/io/tokenizer.hpp: SentencePiece tokenizer and the default fortunes corpus.
// tessera-requires: sentencepiece
//
// Needs libsentencepiece (Debian libsentencepiece-dev): link tessera::sentencepiece.
// Not part of the umbrella header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <tessera/core/error.hpp>

namespace tessera::io {

/// Where Debian's `fortunes` packages put their text.
inline constexpr const char* default_fortunes_dir = "/usr/share/games/fortunes";

/// Reads the English fortune files of a directory (every regular file without an extension,
/// as the .dat index and .u8 links have one), splits them at the `%` lines and returns the
/// fortunes in a fixed order (files sorted by name). Throws when nothing is found.
inline std::vector<std::string> read_fortunes(const std::filesystem::path& dir = default_fortunes_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw error("corpus: '" + dir.string() + "' is not a directory (install Debian's "
                "'fortunes' package, or pass --data FILE)");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file() && !e.path().has_extension()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line, cur;
    while (std::getline(in, line)) {
      if (line == "%") {
        if (!cur.empty()) out.push_back(cur);
        cur.clear();
      } else {
        cur += line;
        cur += '\n';
      }
    }
    if (!cur.empty()) out.push_back(cur);
  }
  if (out.empty()) throw error("corpus: no fortunes found under '" + dir.string() + "'");
  return out;
}

/// Reads a text file as one document per blank-line-separated paragraph (a file without
/// blank lines is one document). Throws on a missing or empty (whitespace-only) file.
inline std::vector<std::string> read_text_documents(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw error("corpus: cannot open '" + path.string() + "': no such file");
  std::ifstream in(path);
  std::string line, cur;
  std::vector<std::string> out;
  bool any_text = false;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      any_text = true;
      cur += line;
      cur += '\n';
    }
  }
  if (!cur.empty()) out.push_back(cur);
  if (!any_text) throw error("corpus: '" + path.string() + "' is empty (no text to train on)");
  return out;
}

/// A SentencePiece model: encode text to ids.
class tokenizer {
 public:
  /// Loads a SentencePiece .model file.
  explicit tokenizer(const std::filesystem::path& model_file) {
    const auto st = sp_.Load(model_file.string());
    if (!st.ok())
      throw error("tokenizer: cannot load SentencePiece model '" + model_file.string() +
                  "': " + st.ToString());
  }
  std::int64_t vocab_size() const { return sp_.GetPieceSize(); }
  int bos_id() const { return sp_.bos_id(); }
  int eos_id() const { return sp_.eos_id(); }

  std::vector<std::int32_t> encode(const std::string& text) const {
    std::vector<int> ids;
    const auto st = sp_.Encode(text, &ids);
    if (!st.ok()) throw error("tokenizer: encoding failed: " + st.ToString());
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<std::int32_t>& ids) const {
    std::string out;
    const auto st = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &out);
    if (!st.ok()) throw error("tokenizer: decoding failed: " + st.ToString());
    return out;
  }

  /// Encodes documents into one stream, each document preceded by BOS (when the model has
  /// one) and followed by EOS.
  std::vector<std::int32_t> encode_documents(const std::vector<std::string>& docs) const {
    std::vector<std::int32_t> out;
    for (const auto& d : docs) {
      if (bos_id() >= 0) out.push_back(bos_id());
      auto ids = encode(d);
      out.insert(out.end(), ids.begin(), ids.end());
      if (eos_id() >= 0) out.push_back(eos_id());
    }
    return out;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

/// Trains a byte-fallback BPE SentencePiece model of `vocab_size` pieces on `docs` and
/// writes it to `model_file` (via a temporary prefix, then renamed), unless that file
/// already exists: the model is trained once and cached. Returns the model file path.
inline std::filesystem::path train_bpe_once(const std::vector<std::string>& docs,
                                            std::int64_t vocab_size,
                                            const std::filesystem::path& model_file) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(model_file, ec)) return model_file;
  if (docs.empty()) throw error("tokenizer: cannot train on an empty corpus");
  if (model_file.has_parent_path()) std::filesystem::create_directories(model_file.parent_path(), ec);
  const std::string tmp_prefix =
      model_file.string() + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  const std::string corpus = tmp_prefix + ".txt";
  {
    std::ofstream out(corpus, std::ios::trunc);
    if (!out) throw error("tokenizer: cannot write '" + corpus + "'");
    for (const auto& d : docs) {
      std::string flat = d;  // one sentence per document: newlines become spaces
      for (char& c : flat)
        if (c == '\n' || c == '\r') c = ' ';
      out << flat << '\n';
    }
  }
  std::ostringstream args;
  args << "--input=" << corpus << " --model_prefix=" << tmp_prefix
       << " --vocab_size=" << vocab_size
       << " --model_type=bpe --byte_fallback=true --character_coverage=1.0"
          " --max_sentence_length=16384 --num_threads=2 --minloglevel=2"
          " --bos_id=1 --eos_id=2 --unk_id=0 --pad_id=-1";
  const auto st = sentencepiece::SentencePieceTrainer::Train(args.str());
  std::filesystem::remove(corpus, ec);
  std::filesystem::remove(tmp_prefix + ".vocab", ec);
  if (!st.ok()) {
    std::filesystem::remove(tmp_prefix + ".model", ec);
    throw error("tokenizer: SentencePiece training failed: " + st.ToString());
  }
  std::filesystem::rename(tmp_prefix + ".model", model_file, ec);
  if (ec) throw error("tokenizer: cannot rename the trained model to '" + model_file.string() + "'");
  return model_file;
}

}  // namespace tessera::io
