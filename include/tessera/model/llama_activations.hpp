// tessera/model/llama_activations.hpp: what a Llama keeps between the forward of a batch and
// its backward (basic_llama_activations<K>, in kernel backend K's memory), and the token ids
// it keeps there.
// tessera-requires: openblas
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/model/llama_block.hpp>
#include <tessera/model/llama_checkpointing.hpp>
#include <tessera/model/llama_ends.hpp>
#include <tessera/model/llama_split_backward.hpp>
#include <tessera/tensor/memory.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

/// Token ids in memory space Space: a std::vector on the host, device memory elsewhere.
template <class Space>
using id_buffer = space_buffer<std::int32_t, Space>;

/// Keeps `ids` in `buf` (in K's memory).
template <class K>
void keep_ids(id_buffer<typename K::space>& buf, std::span<const std::int32_t> ids) {
  reserve_buffer<std::int32_t, typename K::space>(buf, ids.size());
  K::to_device(buf.data(), ids.data(), static_cast<std::int64_t>(ids.size()));
}

/// What the model keeps between the forward of one batch and its backward: the residual
/// streams and saved activations of blocks [first, last), and with the ends the ids, the
/// targets and the head's buffers. The model uses its own (all blocks, both ends) unless a
/// caller hands it another with use(): a pipeline stage keeps one per microbatch in flight.
template <class K = cpu_kernels>
struct basic_llama_activations {
  using space = typename K::space;
  std::int64_t first = 0, last = 0;  ///< the blocks whose activations are kept
  bool embedding = true, head = true;
  llama_dims dims;
  std::vector<basic_block_saved<space>> saved;  ///< blocks first..last-1
  std::vector<basic_block_deferred<space>> deferred;  ///< what each block's I keeps for its W (split backward)
  tensor<float, space> res;                      ///< residual streams in front of blocks first..last, [Nr, D] each
  basic_head_saved<space> head_buffers;
  tensor<float, space> head_dxf, embed_dres;  ///< what the head's and embedding's I keep for W (split backward)
  id_buffer<space> inputs, targets;
  bool have_dlogits = false;
  /// saved + residual + head buffers, as allocated (and the ids where they are in device
  /// memory: on the host they are std::vectors, which no memory tracker counts)
  std::int64_t bytes = 0;

  /// Made for blocks [first, last) of a batch of sizes d (model dim D), block l keeping the
  /// groups keep_of(l) (llama_ac.hpp); with the embedding's ids and the head's buffers when asked.
  template <class KeepOf>
  void allocate(const llama_dims& d, std::int64_t D, std::int64_t first_block, std::int64_t last_block, bool with_embedding,
                bool with_head, KeepOf&& keep_of) {
    K::synchronize();  // buffers of the last shape may still be read
    *this = basic_llama_activations{};
    first = first_block, last = last_block, embedding = with_embedding, head = with_head, dims = d;
    saved.resize(static_cast<std::size_t>(last - first));
    for (std::int64_t l = first; l < last; ++l) {
      const std::uint16_t keep = keep_of(l);
      allocate_kept(saved[static_cast<std::size_t>(l - first)], d, keep);
      bytes += 4 * block_kept_floats(d, keep);
    }
    res = tensor<float, space>({(last - first + 1) * d.Nr() * D});
    bytes += static_cast<std::int64_t>(res.numel()) * 4;
    if (head) {
      head_buffers.allocate(d);
      bytes += 4 * total_of(ends_saved_sizes(d));
    }
    if constexpr (!space::host_accessible) {  // the ids in the backend's memory
      if (embedding) inputs = id_buffer<space>(static_cast<std::size_t>(d.N()));
      if (head) targets = id_buffer<space>(static_cast<std::size_t>(d.N()));
      bytes += 4 * d.N() * ((embedding ? 1 : 0) + (head ? 1 : 0));
    }
  }
  /// Bytes of what the split backward's I keeps for W (0 outside I..W).
  std::int64_t deferred_bytes() const {
    std::int64_t n = 4 * static_cast<std::int64_t>(head_dxf.numel() + embed_dres.numel());
    for (const auto& b : deferred) n += b.bytes();
    return n;
  }
};
using llama_activations = basic_llama_activations<>;

}  // namespace tessera
