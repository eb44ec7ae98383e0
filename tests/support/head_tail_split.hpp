// The token spans of context parallel's head-tail split over cp = 2 that the attention tests
// use (tests/gpu/test_cuda_attention.cu, tests/kernels/test_attention_emulated.cpp): 2 Tl
// tokens in 4 chunks, rank 0 holding chunks 0 and 3 and rank 1 chunks 1 and 2, packed
// documents of 23 tokens -- so rank 0's first chunk sees none of rank 1's keys, its last
// chunk sees some of them, and a block of 64 rows skips whole tiles of keys.
#pragma once

#include <cstdint>
#include <vector>

#include <tessera/kernels/cpu/ring_attention.hpp>

namespace tessera::testing {
struct head_tail_split {
  std::int64_t Tl;                  // tokens a rank
  std::vector<std::int64_t> p0, p1;  // positions of rank 0's and rank 1's tokens
  std::vector<std::int32_t> d0, d1;  // their documents

  explicit head_tail_split(std::int64_t tokens_a_rank) : Tl(tokens_a_rank) {
    const std::int64_t C = Tl / 2;
    for (std::int64_t i = 0; i < C; ++i) p0.push_back(i), p1.push_back(C + i);
    for (std::int64_t i = 0; i < C; ++i) p1.push_back(2 * C + i), p0.push_back(3 * C + i);
    for (std::int64_t i = 0; i < Tl; ++i)
      d0.push_back(static_cast<std::int32_t>(p0[i] / 23)), d1.push_back(static_cast<std::int32_t>(p1[i] / 23));
  }
  cpu::token_span rank0() const { return {p0.data(), d0.data(), Tl}; }
  cpu::token_span rank1() const { return {p1.data(), d1.data(), Tl}; }
  /// Whether rank 0's query t sees rank 1's key j.
  bool sees(std::int64_t t, std::int64_t j) const { return p1[j] <= p0[t] && d0[t] == d1[j]; }
};
}  // namespace tessera::testing
