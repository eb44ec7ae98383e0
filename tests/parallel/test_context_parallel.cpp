// Context parallel (issue 14): a recipe with context_parallel gives one rank's loss and
// every gradient on the same global batch -- both rotations, balanced and not, MHA and GQA,
// sequence lengths that are not powers of two, alone and composed with FSDP, TP + SP,
// pipelines, checkpointing and Float8.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>
#include <string>

#include <tessera/comm/threads.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/train/parallel_llama.hpp>

#include "recipe_check.hpp"
#include "recipes_tiny.hpp"
#include "reference.hpp"

using namespace tessera;
using namespace equivalence;

namespace {
template <cp_rotation_kind Rot, cp_balance_kind Bal>
void check_cp(int cp, std::int64_t T, const char* what) {
  using R = tiny_recipes::cp_only<Rot, Bal>;
  check_recipe<R>(cp, make_batch(2, T, static_cast<std::uint32_t>(T + cp)), 2e-5, typename R::mesh(cp), 1e-6, what);
}
}  // namespace

TEST_CASE("context_parallel: both rotations, balanced and contiguous, cp 2 and 3, T = 12 and 24 equal one rank") {
  for (int cp : {2, 3})
    for (std::int64_t T : {12, 24}) {
      CAPTURE(cp);
      CAPTURE(T);
      check_cp<cp_rotate::allgather, cp_balancing::head_tail>(cp, T, "allgather, head-tail");
      check_cp<cp_rotate::ring, cp_balancing::head_tail>(cp, T, "ring, head-tail");
      check_cp<cp_rotate::allgather, cp_balancing::none>(cp, T, "allgather, contiguous");
      check_cp<cp_rotate::ring, cp_balancing::none>(cp, T, "ring, contiguous");
    }
}

TEST_CASE("context_parallel: head-tail positions, and a sequence length cp cannot split") {
  CHECK(parallel::cp_positions(8, 2, 0, cp_balancing::head_tail) == std::vector<std::int64_t>{0, 1, 6, 7});
  CHECK(parallel::cp_positions(8, 2, 1, cp_balancing::head_tail) == std::vector<std::int64_t>{2, 3, 4, 5});
  CHECK(parallel::cp_positions(6, 3, 2, cp_balancing::none) == std::vector<std::int64_t>{4, 5});
  CHECK(parallel::cp_seq_problem(12, 2, cp_balancing::head_tail, 1).empty());
  CHECK(parallel::cp_seq_problem(10, 2, cp_balancing::head_tail, 1) ==
        "context_parallel: seq_len (10) is not divisible by 2 x cp (2) = 4; choose a seq_len that is a multiple of 4 "
        "(head-tail balancing cuts each sequence into 2 x cp equal chunks)");
  CHECK(parallel::cp_seq_problem(12, 2, cp_balancing::head_tail, 2) ==
        "context_parallel: seq_len (12) is not divisible by tp (2) x 2 x cp (2) = 8; choose a seq_len that is a multiple "
        "of 8 (head-tail balancing cuts each sequence into 2 x cp equal chunks)");
  CHECK(parallel::cp_seq_problem(6, 4, cp_balancing::none, 2) ==
        "context_parallel: seq_len (6) is not divisible by tp (2) x cp (4) = 8; choose a seq_len that is a multiple "
        "of 8 (each cp rank holds an equal chunk)");
  CHECK(parallel::cp_seq_problem(6, 4, cp_balancing::none, 1) ==
        "context_parallel: seq_len (6) is not divisible by cp (4); choose a seq_len that is a multiple of 4 (each cp "
        "rank holds an equal chunk)");
  // at start-up, with the numbers
  using R = tiny_recipes::cp_only<cp_rotate::ring, cp_balancing::head_tail>;
  comm::run_threads(2, [&](comm::threads_communicator& c) {
    device_mesh<R::mesh> dm(R::mesh(2), c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(1);
    const batch b = make_batch(2, 10, 1);
    CHECK_THROWS_WITH(pm.forward(b.in, b.tg, b.B, b.T), doctest::Contains("seq_len (10) is not divisible by 2 x cp (2) = 4"));
  });
}

TEST_CASE("context_parallel composes: FSDP over dp x cp, FSDP x TP + SP, pipeline + checkpointing, 4-D") {
  check_recipe<tiny_recipes::cp_fsdp_ring>(4, make_batch(4, 12, 21), 2e-5, {}, 1e-6, "fsdp x cp (ring) + full AC");
  check_recipe<tiny_recipes::cp_fsdp_tp>(8, make_batch(4, 24, 22), 2e-5, {}, 1e-6, "fsdp x cp x tp+sp");
  check_recipe<tiny_recipes::cp_pp_ring_op>(4, make_batch(2, 12, 23), 2e-5, {}, 1e-6, "pp x cp + selective op AC");
  check_recipe<tiny_recipes::cp_4d>(16, make_batch(8, 24, 24), 2e-5, {}, 1e-6, "pp x dp x cp x tp (16 ranks)");
}

namespace {
/// One rank with the documents' mask: the plain model whose attention runs the block
/// kernels on each row as one block, with the row's document ids (a reference written
/// apart from parallel/cp_attention.hpp).
struct document_hooks : serial_hooks {
  const std::vector<std::int32_t>* ids = nullptr;
  std::vector<std::int64_t> pos;
  std::vector<std::int32_t> doc;
  std::vector<float> ob, lb, D;
  cpu::token_span row(std::int64_t b, std::int64_t T) {
    pos.resize(static_cast<std::size_t>(T));
    doc.resize(pos.size());
    for (std::int64_t t = 0; t < T; ++t) pos[static_cast<std::size_t>(t)] = t;
    parallel::document_ids(doc.data(), ids->data() + b * T, T, tiny_recipes::doc_eos);
    return {pos.data(), doc.data(), T};
  }
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const llama_dims& d) {
    const std::int64_t qn = d.T * d.heads * d.hd, kn = d.T * d.kv_heads * d.hd, ln = d.heads * d.T;
    ob.assign(static_cast<std::size_t>(qn), 0.0f), lb.assign(static_cast<std::size_t>(ln), 0.0f);
    std::fill(out, out + d.B * qn, 0.0f);
    std::fill(lse, lse + d.B * ln, -std::numeric_limits<float>::infinity());
    for (std::int64_t b = 0; b < d.B; ++b) {
      const cpu::token_span s = row(b, d.T);
      cpu::attention_block_forward(ob.data(), lb.data(), q + b * qn, k + b * kn, v + b * kn, s, s, 1, d.heads,
                                   d.kv_heads, d.hd);
      cpu::attention_merge(out + b * qn, lse + b * ln, ob.data(), lb.data(), 1, d.T, d.heads, d.hd);
    }
  }
  void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                          const float* v, const float* out, const float* lse, const llama_dims& d) {
    const std::int64_t qn = d.T * d.heads * d.hd, kn = d.T * d.kv_heads * d.hd, ln = d.heads * d.T;
    std::fill(dq, dq + d.B * qn, 0.0f), std::fill(dk, dk + d.B * kn, 0.0f), std::fill(dv, dv + d.B * kn, 0.0f);
    D.resize(static_cast<std::size_t>(ln));
    for (std::int64_t b = 0; b < d.B; ++b) {
      const cpu::token_span s = row(b, d.T);
      cpu::attention_delta(D.data(), dout + b * qn, out + b * qn, 1, d.T, d.heads, d.hd);
      cpu::attention_block_backward(dq + b * qn, dk + b * kn, dv + b * kn, dout + b * qn, q + b * qn, k + b * kn,
                                    v + b * kn, lse + b * ln, D.data(), s, s, 1, d.heads, d.kv_heads, d.hd);
    }
  }
};

/// A batch whose rows hold several documents each, their ends crossing the cp chunks.
batch documents_batch(std::int64_t B, std::int64_t T, std::uint32_t seed) {
  batch b = make_batch(B, T, seed);
  for (auto& x : b.in)
    if (x == tiny_recipes::doc_eos) x = 6;  // only the planted ends
  for (std::int64_t r = 0; r < B; ++r)
    for (std::int64_t t = 3 + 4 * r; t < T; t += 7 + 2 * r) b.in[static_cast<std::size_t>(r * T + t)] = tiny_recipes::doc_eos;
  return b;
}

template <class R>
void check_documents(int world, const batch& b, typename R::mesh mesh, const char* what) {
  document_hooks h;
  h.ids = &b.in;
  const reference ref = serial(R::model::config, b, h);
  const reference plain = serial(R::model::config, b);
  double moved = 0;  // the mask matters: the gradients differ from the causal model's
  for (std::size_t i = 0; i < ref.grads.size(); ++i) moved = std::max(moved, max_rel(ref.grads[i], plain.grads[i]));
  CHECK(moved > 1e-2);
  check_recipe_against<R>(ref, world, b, 2e-5, mesh, 1e-6, what);
}
}  // namespace

TEST_CASE("context_parallel with documents: each row's documents masked, as one rank with the block-causal mask") {
  using namespace tiny_recipes;
  const batch b = documents_batch(2, 24, 31);
  check_documents<cp_docs<cp_rotate::allgather, cp_balancing::head_tail>>(2, b, cp_docs<cp_rotate::allgather, cp_balancing::head_tail>::mesh(2), "documents, allgather, head-tail, cp 2");
  check_documents<cp_docs<cp_rotate::ring, cp_balancing::head_tail>>(3, b, cp_docs<cp_rotate::ring, cp_balancing::head_tail>::mesh(3), "documents, ring, head-tail, cp 3");
  check_documents<cp_docs<cp_rotate::ring, cp_balancing::none>>(2, b, cp_docs<cp_rotate::ring, cp_balancing::none>::mesh(2), "documents, ring, contiguous, cp 2");
  check_documents<cp_docs<cp_rotate::allgather, cp_balancing::none>>(1, b, cp_docs<cp_rotate::allgather, cp_balancing::none>::mesh(1), "documents, cp 1");
}

TEST_CASE("context_parallel with documents balanced per document: every row its own split, as one rank") {
  using namespace tiny_recipes;
  // the rows' documents (lengths 4, 7, 7, 6 and 8, 9, 7) are not multiples of 2 x cp
  const batch b = documents_batch(2, 24, 34);
  check_documents<cp_docs<cp_rotate::allgather, cp_balancing::per_document>>(2, b, cp_docs<cp_rotate::allgather, cp_balancing::per_document>::mesh(2), "documents per document, allgather, cp 2");
  check_documents<cp_docs<cp_rotate::ring, cp_balancing::per_document>>(3, b, cp_docs<cp_rotate::ring, cp_balancing::per_document>::mesh(3), "documents per document, ring, cp 3");
  check_documents<cp_docs<cp_rotate::ring, cp_balancing::per_document>>(2, documents_batch(3, 36, 35), cp_docs<cp_rotate::ring, cp_balancing::per_document>::mesh(2), "documents per document, ring, cp 2, T 36");
  check_documents<cp_docs_mha>(2, b, cp_docs_mha::mesh(2), "documents per document, MHA (debug model), ring, cp 2");
  // cp_documents alone balances per document
  static_assert(recipe_traits<cp_docs_fsdp_tp>::spec.context.balance == cp_balancing::per_document);
  check_documents<cp_docs_fsdp_tp>(8, documents_batch(4, 24, 32), {}, "documents per document, fsdp x cp x tp+sp");
  check_documents<cp_docs_pp>(4, documents_batch(2, 24, 33), {}, "documents per document, pp x cp (ring), 2 microbatches");
}

TEST_CASE("context_parallel: per-document head-tail positions") {
  // two documents of 4 and 8 tokens on cp 2: 4 chunks each, rank r takes chunks r and 3 - r
  const std::vector<std::int32_t> doc{0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<std::int64_t> p0, p1;
  parallel::cp_document_positions(p0, doc.data(), 12, 2, 0);
  parallel::cp_document_positions(p1, doc.data(), 12, 2, 1);
  CHECK(p0 == std::vector<std::int64_t>{0, 3, 4, 5, 10, 11});
  CHECK(p1 == std::vector<std::int64_t>{1, 2, 6, 7, 8, 9});
  // any document lengths: every token on exactly one rank, T / cp tokens each, and inside
  // every document the ranks' causal work (the keys each token sees) even
  std::mt19937 g(7);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t cp = 1 + trial % 4, T = 2 * cp * (1 + static_cast<std::int64_t>(g() % 24));
    std::vector<std::int32_t> d(static_cast<std::size_t>(T));
    std::int32_t n = 0;
    for (auto& x : d) x = n, n += g() % 9 == 0 ? 1 : 0;
    std::vector<int> owner(d.size(), -1);
    std::vector<std::int64_t> work(static_cast<std::size_t>(cp * (n + 1)), 0), start(static_cast<std::size_t>(n + 1), -1);
    for (std::int64_t t = 0; t < T; ++t)
      if (start[static_cast<std::size_t>(d[static_cast<std::size_t>(t)])] < 0) start[static_cast<std::size_t>(d[static_cast<std::size_t>(t)])] = t;
    for (std::int64_t r = 0; r < cp; ++r) {
      std::vector<std::int64_t> p;
      parallel::cp_document_positions(p, d.data(), T, cp, r);
      REQUIRE(static_cast<std::int64_t>(p.size()) == T / cp);
      CHECK(std::is_sorted(p.begin(), p.end()));
      for (std::int64_t t : p) {
        CHECK(owner[static_cast<std::size_t>(t)] == -1);
        owner[static_cast<std::size_t>(t)] = static_cast<int>(r);
        const auto doc_of = static_cast<std::size_t>(d[static_cast<std::size_t>(t)]);
        work[static_cast<std::size_t>(r * (n + 1)) + doc_of] += t - start[doc_of] + 1;
      }
    }
    CHECK(std::count(owner.begin(), owner.end(), -1) == 0);
    for (std::int32_t k = 0; k <= n; ++k) {
      std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = 0, len = 0;
      for (std::int64_t t = 0; t < T; ++t) len += d[static_cast<std::size_t>(t)] == k ? 1 : 0;
      for (std::int64_t r = 0; r < cp; ++r)
        lo = std::min(lo, work[static_cast<std::size_t>(r * (n + 1) + k)]), hi = std::max(hi, work[static_cast<std::size_t>(r * (n + 1) + k)]);
      // a multiple of 2 x cp: equal work (PyTorch's case); else the chunks start up to 2cp - 1
      // tokens apart from even and a rank holds up to 2 left-over tokens (each sees <= len keys)
      const std::int64_t q = len / (2 * cp);
      if (len % (2 * cp) == 0) CHECK_MESSAGE(hi == lo, "document ", k, " of ", len, " tokens on cp ", cp);
      else CHECK_MESSAGE(hi - lo <= 4 * (q + 1) * (2 * cp - 1) + 2 * len, "document ", k, " of ", len, " tokens on cp ", cp);
    }
  }
  CHECK(parallel::cp_seq_problem(10, 2, cp_balancing::per_document, 1) ==
        "context_parallel: seq_len (10) is not divisible by 2 x cp (2) = 4; choose a seq_len that is a multiple of 4 "
        "(per-document balancing gives each cp rank 2 of 2 x cp equal shares)");
}

#include <tessera/parallel/activation_checkpoint.hpp>

#include "training_check.hpp"

namespace {
template <class... AC>
struct debug_cp_ring {
  static constexpr std::string_view name = "debug_cp_ring";
  using model = training_check::smallmodel;  // the same bits at any size: the small one
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"cp">>;
  using parallelize =
      tessera::parallelize<fsdp<"dp">, context_parallel<"cp", cp_rotation<cp_rotate::ring>>, AC...>;
};
}  // namespace

TEST_CASE("context_parallel with activation checkpointing: bit-identical to no checkpointing") {
  // the recompute runs the same ring (same blocks, same order): the same bits
  namespace tc = training_check;
  const auto toks = tc::tokens();
  const auto none = tc::threads_curve<debug_cp_ring<>>(4, toks, tc::bit_identity_steps);
  CHECK(none == tc::threads_curve<debug_cp_ring<activation_checkpointing<ac::full>>>(4, toks, tc::bit_identity_steps));
  CHECK(none == tc::threads_curve<debug_cp_ring<activation_checkpointing<ac::selective_layer<2>>>>(
                    4, toks, tc::bit_identity_steps));
}
