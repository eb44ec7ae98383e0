// tessera/kernels/cpu/embedding.hpp: token embedding lookup.
//   embedding_forward:  out[N,C] = wte[tokens[n], :]
//   embedding_backward: dwte[tokens[n], :] += dout[n, :]   (accumulates)
//   embedding_shard_*:  the same on a vocabulary shard (tensor parallel)
// Token ids are checked against V before any work; a bad id throws tessera::error naming it.
#pragma once

#include <cstdint>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/parallel.hpp>

namespace tessera::cpu {

inline void check_tokens(const std::int32_t* tokens, std::int64_t N, std::int64_t V,
                         const char* who) {
  for (std::int64_t i = 0; i < N; ++i)
    if (tokens[i] < 0 || tokens[i] >= V)
      throw error(std::string(who) + ": token id " + std::to_string(tokens[i]) + " at position " +
                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(V) +
                  "); check the tokenizer and the model's vocab_size");
}

/// Rows [v0, v0 + Vl) of a V-row table (a tensor-parallel vocabulary shard): tokens outside
/// the shard give zero rows, whose sum over the shards is the full lookup.
inline void embedding_shard_forward(float* out, const std::int32_t* tokens, const float* wte, std::int64_t N,
                                    std::int64_t V, std::int64_t v0, std::int64_t Vl, std::int64_t C) {
  check_tokens(tokens, N, V, "embedding_forward");
  parallel_for(N, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t t = tokens[i] - v0;
      float* o = out + i * C;
      if (t >= 0 && t < Vl) {
        const float* row = wte + t * C;
        for (std::int64_t c = 0; c < C; ++c) o[c] = row[c];
      } else {
        for (std::int64_t c = 0; c < C; ++c) o[c] = 0.0f;
      }
    }
  }, 16);
}

inline void embedding_shard_backward(float* dwte, const float* dout, const std::int32_t* tokens, std::int64_t N,
                                     std::int64_t V, std::int64_t v0, std::int64_t Vl, std::int64_t C) {
  check_tokens(tokens, N, V, "embedding_backward");
  parallel_for(C, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t i = 0; i < N; ++i) {
      const std::int64_t t = tokens[i] - v0;
      if (t < 0 || t >= Vl) continue;
      float* d = dwte + t * C;
      const float* g = dout + i * C;
      for (std::int64_t c = c0; c < c1; ++c) d[c] += g[c];
    }
  }, 16);
}

inline void embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                              std::int64_t N, std::int64_t V, std::int64_t C) {
  embedding_shard_forward(out, tokens, wte, N, V, 0, V, C);
}

/// Threads split the channels, so rows of repeated tokens never race.
inline void embedding_backward(float* dwte, const float* dout, const std::int32_t* tokens,
                               std::int64_t N, std::int64_t V, std::int64_t C) {
  embedding_shard_backward(dwte, dout, tokens, N, V, 0, V, C);
}

}  // namespace tessera::cpu
