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

  /// Bytes of what the split backward's I keeps for W (0 outside I..W).
  std::int64_t deferred_bytes() const {
    std::int64_t n = 4 * static_cast<std::int64_t>(head_dxf.numel() + embed_dres.numel());
    for (const auto& b : deferred) n += b.bytes();
    return n;
  }
};
using llama_activations = basic_llama_activations<>;

}  // namespace tessera
