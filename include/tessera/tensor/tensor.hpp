// tessera/tensor/tensor.hpp: a strided view and a small owning tensor.
//
//   tensor_view<T, Space>  pointer + shape + strides (in elements), rank <= max_tensor_rank,
//                          non-owning; slicing, selecting, transposing and reshaping make
//                          new views; printing as CuTe does, "(4,6):(6,1)".
//   tensor<T, Space>       owns a contiguous row-major buffer allocated through Space (so it
//                          is counted by memory_tracker<Space>); zero-filled on the host.
// T is the element type (float, bf16, f8_e4m3fn, f8_e5m2; const-qualified for read-only
// views), so the dtype is part of the type: dtype_of<T>.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include <tessera/core/config.hpp>
#include <tessera/core/error.hpp>
#include <tessera/tensor/dtype.hpp>
#include <tessera/tensor/memory.hpp>

namespace tessera {

template <class T>
concept tensor_element = element_type<std::remove_const_t<T>>;

/// Row-major strides of a shape.
inline std::array<std::int64_t, max_tensor_rank> contiguous_strides(
    std::span<const std::int64_t> shape) {
  std::array<std::int64_t, max_tensor_rank> st{};
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}

template <tensor_element T, memory_space Space = host_space>
class tensor_view {
 public:
  using element_type = T;
  using space = Space;

  tensor_view() = default;
  /// A contiguous row-major view of `shape` at `data`.
  tensor_view(T* data, std::span<const std::int64_t> shape) : data_(data) {
    set_shape(shape);
    strides_ = contiguous_strides(shape);
  }
  tensor_view(T* data, std::initializer_list<std::int64_t> shape)
      : tensor_view(data, std::span<const std::int64_t>(shape.begin(), shape.size())) {}
  /// A view with explicit strides (in elements).
  tensor_view(T* data, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides)
      : data_(data) {
    set_shape(shape);
    check(strides.size() == shape.size(), "tensor_view: shape and strides differ in rank");
    for (std::size_t i = 0; i < strides.size(); ++i) strides_[i] = strides[i];
  }
  /// A mutable view converts to a read-only one. (A template: on a view of const T, nvcc
  /// would warn that a conversion to its own type is never used.)
  template <class U = T>
    requires(std::is_same_v<U, T> && !std::is_const_v<U>)
  operator tensor_view<const U, Space>() const {  // NOLINT: implicit by design
    return tensor_view<const U, Space>(data_, shape(), strides());
  }

  T* data() const noexcept { return data_; }
  int rank() const noexcept { return rank_; }
  /// Extent of dimension d; negative d counts from the end.
  std::int64_t size(int d) const { return shape_[norm(d)]; }
  std::int64_t stride(int d) const { return strides_[norm(d)]; }
  std::span<const std::int64_t> shape() const noexcept { return {shape_.data(), std::size_t(rank_)}; }
  std::span<const std::int64_t> strides() const noexcept {
    return {strides_.data(), std::size_t(rank_)};
  }
  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= shape_[i];
    return n;
  }
  static constexpr tessera::dtype dtype() noexcept { return dtype_of<std::remove_const_t<T>>; }
  bool is_contiguous() const noexcept {
    std::int64_t s = 1;
    for (int i = rank_; i-- > 0;) {
      if (shape_[i] != 1 && strides_[i] != s) return false;
      s *= shape_[i];
    }
    return true;
  }

  /// Element access on host-accessible spaces: v(i, j, k).
  template <std::integral... I>
  T& operator()(I... idx) const
    requires(Space::host_accessible)
  {
    check(sizeof...(I) == static_cast<std::size_t>(rank_), "tensor_view: wrong number of indices");
    const std::int64_t ix[] = {static_cast<std::int64_t>(idx)..., 0};
    std::int64_t off = 0;
    for (int i = 0; i < rank_; ++i) off += ix[i] * strides_[i];
    return data_[off];
  }

  /// Elements [begin, end) of dimension d (same rank).
  tensor_view slice(int d, std::int64_t begin, std::int64_t end) const {
    d = norm(d);
    check(0 <= begin && begin <= end && end <= shape_[d], "tensor_view::slice: range out of bounds");
    tensor_view r = *this;
    r.data_ = data_ + begin * strides_[d];
    r.shape_[d] = end - begin;
    return r;
  }
  /// Index i of dimension d (rank - 1).
  tensor_view select(int d, std::int64_t i) const {
    d = norm(d);
    check(0 <= i && i < shape_[d], "tensor_view::select: index out of bounds");
    tensor_view r = *this;
    r.data_ = data_ + i * strides_[d];
    for (int k = d; k + 1 < rank_; ++k) {
      r.shape_[k] = shape_[k + 1];
      r.strides_[k] = strides_[k + 1];
    }
    --r.rank_;
    return r;
  }
  /// Swaps two dimensions (no copy).
  tensor_view transpose(int a, int b) const {
    a = norm(a);
    b = norm(b);
    tensor_view r = *this;
    std::swap(r.shape_[a], r.shape_[b]);
    std::swap(r.strides_[a], r.strides_[b]);
    return r;
  }
  /// A new shape over the same contiguous elements; one extent may be -1 (inferred).
  tensor_view reshape(std::initializer_list<std::int64_t> shape) const {
    check(is_contiguous(), "tensor_view::reshape: the view is not contiguous; copy it first");
    std::array<std::int64_t, max_tensor_rank> s{};
    std::int64_t known = 1;
    int infer = -1, i = 0;
    check(shape.size() <= max_tensor_rank, "tensor_view::reshape: rank above max_tensor_rank");
    for (auto e : shape) {
      if (e == -1) {
        check(infer < 0, "tensor_view::reshape: more than one -1 extent");
        infer = i;
      } else {
        known *= e;
      }
      s[i++] = e;
    }
    if (infer >= 0) s[infer] = known == 0 ? 0 : numel() / known;
    std::int64_t n = 1;
    for (int k = 0; k < i; ++k) n *= s[k];
    check(n == numel(), "tensor_view::reshape: the new shape has a different number of elements");
    return tensor_view(data_, std::span<const std::int64_t>(s.data(), std::size_t(i)));
  }

  /// CuTe-style "(4,6):(6,1)".
  std::string layout_string() const {
    std::string a(1, '('), b(1, '(');
    for (int i = 0; i < rank_; ++i) {
      if (i) {
        a.push_back(',');
        b.push_back(',');
      }
      a.append(std::to_string(shape_[i]));
      b.append(std::to_string(strides_[i]));
    }
    a.append("):");
    a.append(b);
    a.push_back(')');
    return a;
  }

 private:
  int norm(int d) const {
    if (d < 0) d += rank_;
    check(0 <= d && d < rank_, "tensor_view: dimension out of range");
    return d;
  }
  void set_shape(std::span<const std::int64_t> shape) {
    check(shape.size() <= max_tensor_rank, "tensor_view: rank above max_tensor_rank (8)");
    rank_ = static_cast<int>(shape.size());
    for (int i = 0; i < rank_; ++i) {
      check(shape[i] >= 0, "tensor_view: negative extent");
      shape_[i] = shape[i];
    }
  }

  T* data_ = nullptr;
  int rank_ = 0;
  std::array<std::int64_t, max_tensor_rank> shape_{}, strides_{};
};

/// An owning, contiguous, row-major tensor. Move-only.
template <element_type T, memory_space Space = host_space>
class tensor {
 public:
  tensor() = default;
  explicit tensor(std::span<const std::int64_t> shape) {
    std::int64_t n = 1;
    for (auto e : shape) n *= e;
    numel_ = n;
    data_ = static_cast<T*>(Space::allocate(bytes()));
    if constexpr (Space::host_accessible)
      if (data_) std::memset(static_cast<void*>(data_), 0, bytes());
    view_ = tensor_view<T, Space>(data_, shape);
  }
  tensor(std::initializer_list<std::int64_t> shape)
      : tensor(std::span<const std::int64_t>(shape.begin(), shape.size())) {}
  tensor(tensor&& o) noexcept { swap(o); }
  tensor& operator=(tensor&& o) noexcept {
    tensor(std::move(o)).swap(*this);
    return *this;
  }
  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;
  ~tensor() { Space::deallocate(data_, bytes()); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::int64_t numel() const noexcept { return numel_; }
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(numel_) * sizeof(T); }
  int rank() const noexcept { return view_.rank(); }
  std::int64_t size(int d) const { return view_.size(d); }
  std::span<const std::int64_t> shape() const noexcept { return view_.shape(); }
  static constexpr tessera::dtype dtype() noexcept { return dtype_of<T>; }
  tensor_view<T, Space> view() noexcept { return view_; }
  tensor_view<const T, Space> view() const noexcept { return view_; }
  operator tensor_view<T, Space>() noexcept { return view_; }  // NOLINT: implicit by design
  operator tensor_view<const T, Space>() const noexcept { return view_; }  // NOLINT
  std::span<T> span() noexcept requires(Space::host_accessible) {
    return {data_, static_cast<std::size_t>(numel_)};
  }
  std::span<const T> span() const noexcept requires(Space::host_accessible) {
    return {data_, static_cast<std::size_t>(numel_)};
  }
  template <std::integral... I>
  T& operator()(I... idx) requires(Space::host_accessible) { return view_(idx...); }
  template <std::integral... I>
  const T& operator()(I... idx) const requires(Space::host_accessible) { return view_(idx...); }

  void swap(tensor& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(numel_, o.numel_);
    std::swap(view_, o.view_);
  }

 private:
  T* data_ = nullptr;
  std::int64_t numel_ = 0;
  tensor_view<T, Space> view_;
};

}  // namespace tessera
