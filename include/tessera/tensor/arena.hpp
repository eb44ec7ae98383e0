// tessera/tensor/arena.hpp: one allocation for all parameters of a model (as llm.c).
//
// An arena_layout lists named slots (shape each) and gives each a 64-byte-aligned offset
// in one flat buffer. An arena<T, Space> allocates that buffer once (tracked, zeroed) and
// hands out views. Parameters, gradients and the two AdamW moments of a model use four
// arenas of the SAME layout, so an optimizer or a gradient-norm kernel runs over the flat
// buffers in one call; the padding between slots stays zero in all four and is harmless
// (AdamW of a zero parameter with zero gradient stays zero).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/tensor/tensor.hpp>

namespace tessera {

/// One named tensor inside an arena.
struct arena_slot {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t offset = 0;  // in elements from the start of the arena
  std::size_t numel = 0;
};

/// The slots of an arena and their offsets. `align` is in elements.
class arena_layout {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  explicit arena_layout(std::size_t align_elems = 16) : align_(align_elems ? align_elems : 1) {}

  /// Appends a slot; returns its index. Names must be unique.
  std::size_t add(std::string name, std::span<const std::int64_t> shape) {
    check(find(name) == npos, "arena_layout::add: duplicate slot name '" + name + "'");
    arena_slot s;
    s.name = std::move(name);
    s.shape.assign(shape.begin(), shape.end());
    s.numel = 1;
    for (auto e : shape) {
      check(e >= 0, "arena_layout::add: negative extent in slot '" + s.name + "'");
      s.numel *= static_cast<std::size_t>(e);
    }
    s.offset = total_;
    total_ += (s.numel + align_ - 1) / align_ * align_;
    slots_.push_back(std::move(s));
    return slots_.size() - 1;
  }
  std::size_t add(std::string name, std::initializer_list<std::int64_t> shape) {
    return add(std::move(name), std::span<const std::int64_t>(shape.begin(), shape.size()));
  }
  /// Index of the slot named `name`, or npos.
  std::size_t find(std::string_view name) const noexcept {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].name == name) return i;
    return npos;
  }
  const std::vector<arena_slot>& slots() const noexcept { return slots_; }
  std::size_t size() const noexcept { return slots_.size(); }
  /// Elements of the flat buffer, padding included.
  std::size_t total() const noexcept { return total_; }
  /// Elements of all slots, padding excluded (the parameter count).
  std::size_t numel() const noexcept {
    std::size_t n = 0;
    for (const auto& s : slots_) n += s.numel;
    return n;
  }

 private:
  std::size_t align_;
  std::size_t total_ = 0;
  std::vector<arena_slot> slots_;
};

/// One flat, zeroed allocation holding every slot of a layout.
template <element_type T, memory_space Space = host_space>
class arena {
 public:
  arena() = default;
  explicit arena(arena_layout layout) : layout_(std::move(layout)), buf_({std::int64_t(layout_.total())}) {}

  T* data() noexcept { return buf_.data(); }
  const T* data() const noexcept { return buf_.data(); }
  /// Elements of the flat buffer, padding included.
  std::size_t size() const noexcept { return layout_.total(); }
  const arena_layout& layout() const noexcept { return layout_; }

  tensor_view<T, Space> operator[](std::size_t i) {
    check(i < layout_.size(), "arena: slot index out of range");
    const auto& s = layout_.slots()[i];
    return tensor_view<T, Space>(buf_.data() + s.offset, std::span<const std::int64_t>(s.shape));
  }
  tensor_view<const T, Space> operator[](std::size_t i) const {
    check(i < layout_.size(), "arena: slot index out of range");
    const auto& s = layout_.slots()[i];
    return tensor_view<const T, Space>(buf_.data() + s.offset,
                                       std::span<const std::int64_t>(s.shape));
  }
  /// The slot named `name`; throws tessera::error naming it when absent.
  tensor_view<T, Space> operator[](std::string_view name) {
    const std::size_t i = layout_.find(name);
    check(i != arena_layout::npos, "arena: no slot named '" + std::string(name) + "'");
    return (*this)[i];
  }
  /// Zeroes the whole buffer (host spaces).
  void zero() noexcept requires(Space::host_accessible) {
    if (buf_.data()) std::memset(static_cast<void*>(buf_.data()), 0, buf_.bytes());
  }

 private:
  arena_layout layout_;
  tensor<T, Space> buf_;
};

}  // namespace tessera
