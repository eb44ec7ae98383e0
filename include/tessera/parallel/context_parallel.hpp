// tessera/parallel/context_parallel.hpp: context parallel (ring attention) as a policy of
// parallelize<...> -- the fourth dimension of TorchTitan's 4D.
//
//   using P = tessera::parallelize<tessera::fsdp<"dp">,
//                                  tessera::context_parallel<"cp", tessera::cp_rotation<tessera::cp_rotate::ring>>>;
//
// Every sequence is split over the `cp` axis: tokens, labels and RoPE positions by one rule
// (cp_positions below), so each rank's residual stream, norms, linears and loss work on
// T / cp tokens with their global positions, and only attention sees other ranks' tokens
// (parallel/cp_attention.hpp). Options:
//   cp_rotation<cp_rotate::allgather>  K/V all-gathered once per attention, dK/dV
//                                      reduce-scattered (PyTorch's default; default here)
//   cp_rotation<cp_rotate::ring>       K/V passed to rank + 1 while the current block
//                                      computes; dK/dV travel back around the ring
//   cp_balance<cp_balancing::head_tail>  the sequence cut into 2 x cp chunks, rank r
//                                      holding chunks r and 2cp-1-r (default: equal causal work)
//   cp_balance<cp_balancing::none>     cp contiguous chunks
//   cp_balance<cp_balancing::per_document>  head-tail inside each packed document (every
//                                      row its own split; needs cp_documents; its default)
//   cp_documents<Eos>                  packed documents: attention causal within each
//                                      document and nothing across (TorchTitan's
//                                      block_causal mask); a document ends with token Eos
//                                      (which belongs to it). Balanced per document unless
//                                      cp_balance names the sequence's head_tail or none
// Parameters and gradients: the cp ranks hold the same parameters (FSDP shards them over
// dp_shard x cp, TorchTitan's flattened dp_shard_cp), and a parameter's gradient is a sum
// over the cp ranks' tokens, reduced over cp with the batch axes (parallel/layouts.hpp).
// The loss is the mean over all tokens: summed over the batch axes and cp.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <tessera/core/fixed_string.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/parallel/policies.hpp>

namespace tessera {

/// The names of context_parallel's options' values.
namespace cp_rotate {
inline constexpr cp_rotation_kind allgather = cp_rotation_kind::allgather;
inline constexpr cp_rotation_kind ring = cp_rotation_kind::ring;
}  // namespace cp_rotate
namespace cp_balancing {
inline constexpr cp_balance_kind head_tail = cp_balance_kind::head_tail;
inline constexpr cp_balance_kind none = cp_balance_kind::none;
inline constexpr cp_balance_kind per_document = cp_balance_kind::per_document;
}  // namespace cp_balancing

/// context_parallel option: how K/V reach the other ranks' queries.
template <cp_rotation_kind R>
struct cp_rotation {};
/// context_parallel option: how the sequence is cut for causal load balance.
template <cp_balance_kind B>
struct cp_balance {};
/// context_parallel option: attention masked to the documents of a packed sequence, each
/// ended by the token `Eos`.
template <std::int32_t Eos>
struct cp_documents {
  static_assert(Eos >= 0, "tessera::cp_documents<Eos>: Eos is a token id and must be >= 0");
};

namespace detail {
template <class O>
struct cp_option {
  static constexpr bool known = false, rotation = false, balance = false, documents = false, per_document = false;
};
template <cp_rotation_kind R>
struct cp_option<cp_rotation<R>> {
  static constexpr bool known = true, rotation = true, balance = false, documents = false, per_document = false;
  static constexpr void apply(cp_settings& s) { s.rotation = R; }
};
template <cp_balance_kind B>
struct cp_option<cp_balance<B>> {
  static constexpr bool known = true, rotation = false, balance = true, documents = false,
                        per_document = B == cp_balance_kind::per_document;
  static constexpr void apply(cp_settings& s) { s.balance = B; }
};
template <std::int32_t Eos>
struct cp_option<cp_documents<Eos>> {
  static_assert(sizeof(cp_documents<Eos>) > 0);  // instantiates the option: its own check fires
  static constexpr bool known = true, rotation = false, balance = false, documents = true, per_document = false;
  static constexpr void apply(cp_settings& s) { s.documents_eos = Eos; }
};
template <class... O>
constexpr cp_settings cp_options() {
  static_assert((cp_option<O>::known && ...),
                "tessera::context_parallel: unknown option; the options are cp_rotation<cp_rotate::allgather | ring>, "
                "cp_balance<cp_balancing::head_tail | none | per_document> and cp_documents<Eos>");
  static_assert((int{cp_option<O>::rotation} + ... + 0) <= 1 && (int{cp_option<O>::balance} + ... + 0) <= 1 &&
                    (int{cp_option<O>::documents} + ... + 0) <= 1,
                "tessera::context_parallel: an option is given twice; give each option at most once");
  static_assert(!(cp_option<O>::per_document || ...) || (cp_option<O>::documents || ...),
                "tessera::context_parallel: cp_balance<cp_balancing::per_document> balances packed documents and needs "
                "cp_documents<Eos>; add cp_documents<Eos>, or balance the sequence with cp_balancing::head_tail");
  cp_settings s;
  // packed documents are balanced per document unless a balance is named
  if ((cp_option<O>::documents || ...) && !(cp_option<O>::balance || ...)) s.balance = cp_balance_kind::per_document;
  if constexpr ((cp_option<O>::known && ...)) (cp_option<O>::apply(s), ...);
  return s;
}
}  // namespace detail

/// Context parallel over `Axis`: each sequence split over the axis, attention as ring
/// attention (all-gather or ring rotation), causal work balanced head-tail by default.
template <fixed_string Axis, class... Options>
struct context_parallel {
  static constexpr policy_desc desc{.kind = policy_kind::context_parallel,
                                    .axis = Axis.view(),
                                    .replicate_axis = {},
                                    .fsdp = {},
                                    .tp = {},
                                    .pp = {},
                                    .ac = {},
                                    .f8 = {},
                                    .cp = detail::cp_options<Options...>()};
};

namespace parallel {

/// The number the sequence length must be divisible by: 2 x cp under head-tail balancing,
/// of the sequence or per document (cp without), times tp under sequence parallel
/// (TorchTitan's rule: each cp part splits again over tp).
constexpr std::int64_t cp_seq_multiple(std::int64_t cp, cp_balance_kind b, std::int64_t tp_seq) {
  return (b == cp_balance_kind::none ? cp : 2 * cp) * (tp_seq > 1 ? tp_seq : 1);
}

/// The split of each cp part of a sequence over tp: tp's size under sequence parallel, else 1.
constexpr std::int64_t cp_tp_split(const parallel_spec& p, const mesh_shape& m) {
  return p.tp >= 0 && p.sequence_parallel ? m[p.tp] : 1;
}

/// Why a sequence of T tokens cannot be split over cp ranks ("" when it can): the words of
/// the start-up check, with the numbers and the fix.
inline std::string cp_seq_problem(std::int64_t T, std::int64_t cp, cp_balance_kind b, std::int64_t tp_seq) {
  const std::int64_t m = cp_seq_multiple(cp, b, tp_seq);
  if (T % m == 0) return {};
  // each factor with its value ("tp (2) x 2 x cp (2) = 8"), the product when there are two
  std::string why = std::string(b != cp_balance_kind::none ? "2 x " : "") + "cp (" + std::to_string(cp) + ")";
  if (tp_seq > 1) why = "tp (" + std::to_string(tp_seq) + ") x " + why;
  if (m != cp) why += " = " + std::to_string(m);
  return "context_parallel: seq_len (" + std::to_string(T) + ") is not divisible by " + why +
         "; choose a seq_len that is a multiple of " + std::to_string(m) +
         (b == cp_balance_kind::head_tail      ? " (head-tail balancing cuts each sequence into 2 x cp equal chunks)"
          : b == cp_balance_kind::per_document ? " (per-document balancing gives each cp rank 2 of 2 x cp equal shares)"
                                               : " (each cp rank holds an equal chunk)");
}

/// The document of each token of a packed sequence of T ids: the number of `eos` tokens
/// before it (a document ends with its eos).
inline void document_ids(std::int32_t* doc, const std::int32_t* ids, std::int64_t T, std::int32_t eos) {
  std::int32_t d = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    doc[t] = d;
    d += ids[t] == eos ? 1 : 0;
  }
}

/// The global positions, in order, of the tokens rank r of cp holds of a sequence of T:
/// head-tail chunks r and 2cp-1-r of T / 2cp tokens, or the contiguous chunk r of T / cp
/// (per_document balancing is per row: cp_document_positions).
inline std::vector<std::int64_t> cp_positions(std::int64_t T, std::int64_t cp, std::int64_t r, cp_balance_kind b) {
  std::vector<std::int64_t> p;
  if (b != cp_balance_kind::none) {
    const std::int64_t c = T / (2 * cp);
    for (std::int64_t t = 0; t < c; ++t) p.push_back(r * c + t);
    for (std::int64_t t = 0; t < c; ++t) p.push_back((2 * cp - 1 - r) * c + t);
  } else {
    const std::int64_t c = T / cp;
    for (std::int64_t t = 0; t < c; ++t) p.push_back(r * c + t);
  }
  return p;
}

/// Per-document head-tail balancing: appends to `out` the global positions, in order, of the
/// tokens rank r of cp holds of one packed sequence of T tokens with documents `doc`
/// (document_ids). Each document of L tokens is cut into 2 x cp contiguous chunks and rank r
/// takes chunks r and 2cp-1-r, so its causal work inside every document is the same as the
/// others' -- PyTorch's _PerDocumentHeadTailLoadBalancer when every L is a multiple of 2 x cp
/// (which PyTorch requires). Any L works here: the chunks hold L / 2cp tokens and the
/// L mod 2cp left over go one each to the chunk slots next in a count that runs on across
/// the row's documents, so every slot ends with the same number of tokens and every rank
/// with T / cp (T a multiple of 2 x cp).
inline void cp_document_positions(std::vector<std::int64_t>& out, const std::int32_t* doc, std::int64_t T,
                                  std::int64_t cp, std::int64_t r) {
  const std::int64_t slots = 2 * cp;
  std::int64_t extra = 0;  // left-over tokens handed out so far (the next goes to slot extra mod 2cp)
  for (std::int64_t s = 0; s < T;) {
    std::int64_t e = s + 1;
    while (e < T && doc[e] == doc[s]) ++e;
    const std::int64_t L = e - s, q = L / slots, m = L % slots, first = extra % slots;
    auto size_of = [&](std::int64_t k) { return q + ((k - first + slots) % slots < m ? 1 : 0); };
    std::int64_t begin = s;
    for (std::int64_t k = 0; k < slots; ++k) {
      const std::int64_t n = size_of(k);
      if (k == r || k == slots - 1 - r)
        for (std::int64_t t = begin; t < begin + n; ++t) out.push_back(t);
      begin += n;
    }
    extra += m;
    s = e;
  }
}

/// Floats of cp_attention's buffers (parallel/cp_attention.hpp) for a rank's batch [B, Tl] (Tl = T / cp tokens) with NH
/// query and NKV key/value heads of HD: the partial output and its lse, D, and the K/V
/// blocks -- allgather: K, V, dK, dV of all cp blocks; ring: two sets (held and arriving)
/// of K, V, dK, dV.
constexpr std::int64_t cp_attention_floats(const cp_settings& s, std::int64_t cp, std::int64_t B, std::int64_t Tl,
                                           std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
  const std::int64_t kvn = B * Tl * NKV * HD;
  const std::int64_t blocks = s.rotation == cp_rotation_kind::allgather ? 4 * cp * kvn : 8 * kvn;
  return B * Tl * NH * HD + 2 * B * NH * Tl + blocks;
}
constexpr std::int64_t cp_attention_floats(const cp_settings& s, std::int64_t cp, const llama_dims& d) {
  return cp_attention_floats(s, cp, d.B, d.T, d.heads, d.kv_heads, d.hd);
}

}  // namespace parallel
}  // namespace tessera
