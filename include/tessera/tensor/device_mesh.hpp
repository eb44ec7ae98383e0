// tessera/tensor/device_mesh.hpp: a mesh bound to the communicator of its ranks (as
// PyTorch's DeviceMesh): mesh rank r is rank r of the world communicator, and the process
// group of every mesh axis or ordered (flattened) set of axes is made on first use.
//
//   tessera::comm::run_threads(8, [](auto& c) {
//     using M = tessera::mesh<tessera::axis<"dp", 2>, tessera::axis<"tp", 4>>;
//     tessera::device_mesh<M> dm(M{}, c);
//     auto& tp = dm.group(M::group<"tp">());      // the 4 ranks of this rank's tp group
//   });
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <tessera/comm/any_communicator.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/tensor/memory.hpp>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera {

template <class Mesh>
class device_mesh {
  static_assert(is_mesh_v<Mesh>, "tessera::device_mesh: the argument must be a tessera::mesh<...>");

 public:
  using mesh_type = Mesh;

  /// Binds `m` to `world`; world.size() must equal the mesh's number of ranks.
  template <comm::communicator C>
  device_mesh(Mesh m, C world) : mesh_(std::move(m)), world_(std::move(world)) {
    if (world_.size() != mesh_.world_size())
      throw error("tessera::device_mesh: mesh " + mesh_.str() + " has " + std::to_string(mesh_.world_size()) +
                  " ranks but the communicator has " + std::to_string(world_.size()) +
                  "; run with as many ranks as the mesh has");
    coords_ = mesh_.coords(world_.rank());
  }
  device_mesh(const device_mesh&) = delete;
  device_mesh& operator=(const device_mesh&) = delete;

  const Mesh& mesh() const noexcept { return mesh_; }
  const mesh_shape& shape() const noexcept { return mesh_.shape(); }
  int rank() const { return world_.rank(); }
  const coords_t& coords() const noexcept { return coords_; }
  comm::any_communicator& world() noexcept { return world_; }

  /// Scratch memory for `n` elements of T in slot `slot` (0..3) of memory space `Space`,
  /// reused across calls (grows only), so that collectives' staging buffers are not allocated
  /// and faulted in per call.
  template <class T, memory_space Space = host_space>
  T* scratch(int slot, std::size_t n) {
    if constexpr (std::is_same_v<Space, host_space>) {
      auto& v = scratch_[static_cast<std::size_t>(slot)];
      const std::size_t words = (n * sizeof(T) + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
      if (v.size() < words) v.resize(words);
      return reinterpret_cast<T*>(v.data());
    } else {
      space_scratch* s = nullptr;
      for (auto& x : other_scratch_)
        if (x.tag == &Space::name) s = &x;
      if (!s) s = &other_scratch_.emplace_back(&Space::name, &Space::deallocate);
      auto& [p, bytes] = s->slot[static_cast<std::size_t>(slot)];
      if (bytes < n * sizeof(T)) {
        Space::deallocate(p, bytes);
        p = nullptr, bytes = 0;
        p = Space::allocate(n * sizeof(T));
        bytes = n * sizeof(T);
      }
      return static_cast<T*>(p);
    }
  }

  /// The communicator of this rank's group along `g` (ranks in group order). The reference
  /// stays valid for the mesh's lifetime (making other groups later does not move it).
  comm::any_communicator& group(const axis_group& g) {
    for (auto& [key, c] : groups_)
      if (key == g) return c;
    const auto ranks64 = tessera::group_ranks(mesh_.shape(), g, world_.rank());
    std::vector<int> ranks(ranks64.begin(), ranks64.end());
    groups_.emplace_back(g, world_.split(std::span<const int>(ranks)));
    return groups_.back().second;
  }

 private:
  Mesh mesh_;
  comm::any_communicator world_;
  coords_t coords_{};
  std::deque<std::pair<axis_group, comm::any_communicator>> groups_;  // a deque: references stay valid
  std::array<std::vector<std::max_align_t>, 4> scratch_;
  // scratch of other memory spaces (device memory), one entry per space used
  struct space_scratch {
    space_scratch(const void* t, void (*f)(void*, std::size_t) noexcept) : tag(t), free(f) {}
    space_scratch(const space_scratch&) = delete;
    space_scratch& operator=(const space_scratch&) = delete;
    ~space_scratch() {
      for (auto& [p, bytes] : slot) free(p, bytes);
    }
    const void* tag;
    void (*free)(void*, std::size_t) noexcept;
    std::array<std::pair<void*, std::size_t>, 4> slot{};
  };
  std::deque<space_scratch> other_scratch_;
};

}  // namespace tessera
