// tessera/comm/any_communicator.hpp: a type-erased communicator (and request), so that
// code above the comm layer (device_mesh, dist_tensor) runs on any backend without being
// a template over it. One virtual call per collective.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <tessera/comm/communicator.hpp>
#include <tessera/core/source_location.hpp>
#include <utility>

namespace tessera::comm {

class any_request {
 public:
  any_request() = default;
  template <request R>
    requires(!std::is_same_v<std::remove_cvref_t<R>, any_request>)
  any_request(R r) : p_(std::make_unique<impl<R>>(std::move(r))) {}  // NOLINT: implicit by design

  void wait() {
    if (p_) p_->wait();
  }
  bool test() { return !p_ || p_->test(); }

 private:
  struct base {
    virtual ~base() = default;
    virtual void wait() = 0;
    virtual bool test() = 0;
  };
  template <class R>
  struct impl final : base {
    explicit impl(R x) : r(std::move(x)) {}
    void wait() override { r.wait(); }
    bool test() override { return r.test(); }
    R r;
  };
  std::unique_ptr<base> p_;
};

class any_communicator {
 public:
  using request_type = any_request;
  using loc_t = tessera::source_location;

  any_communicator() = default;
  template <communicator C>
    requires(!std::is_same_v<std::remove_cvref_t<C>, any_communicator>)
  explicit any_communicator(C c) : p_(std::make_shared<impl<C>>(std::move(c))) {}

  explicit operator bool() const noexcept { return static_cast<bool>(p_); }
  int rank() const { return p_->rank(); }
  int size() const { return p_->size(); }
  std::span<const int> world_ranks() const { return p_->world_ranks(); }
  std::string backend() const { return p_->backend(); }

  any_request all_gather(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    return p_->all_gather(in, out, n, t, l);
  }
  any_request reduce_scatter(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                             loc_t l = loc_t::current()) {
    return p_->reduce_scatter(in, out, n, t, op, l);
  }
  any_request all_reduce(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                         loc_t l = loc_t::current()) {
    return p_->all_reduce(in, out, n, t, op, l);
  }
  any_request all_to_all(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    return p_->all_to_all(in, out, n, t, l);
  }
  any_request broadcast(void* buf, std::size_t n, dtype t, int root, loc_t l = loc_t::current()) {
    return p_->broadcast(buf, n, t, root, l);
  }
  any_request barrier(loc_t l = loc_t::current()) { return p_->barrier(l); }
  any_request send(const void* buf, std::size_t n, dtype t, int peer, int tag = 0, loc_t l = loc_t::current()) {
    return p_->send(buf, n, t, peer, tag, l);
  }
  any_request recv(void* buf, std::size_t n, dtype t, int peer, int tag = 0, loc_t l = loc_t::current()) {
    return p_->recv(buf, n, t, peer, tag, l);
  }
  void group_start() { p_->group_start(); }
  void group_end() { p_->group_end(); }
  any_communicator split(std::span<const int> ranks, loc_t l = loc_t::current()) {
    any_communicator c;
    c.p_ = p_->split(ranks, l);
    return c;
  }

 private:
  struct base {
    virtual ~base() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::span<const int> world_ranks() const = 0;
    virtual std::string backend() const = 0;
    virtual any_request all_gather(const void*, void*, std::size_t, dtype, loc_t) = 0;
    virtual any_request reduce_scatter(const void*, void*, std::size_t, dtype, reduce_op, loc_t) = 0;
    virtual any_request all_reduce(const void*, void*, std::size_t, dtype, reduce_op, loc_t) = 0;
    virtual any_request all_to_all(const void*, void*, std::size_t, dtype, loc_t) = 0;
    virtual any_request broadcast(void*, std::size_t, dtype, int, loc_t) = 0;
    virtual any_request barrier(loc_t) = 0;
    virtual any_request send(const void*, std::size_t, dtype, int, int, loc_t) = 0;
    virtual any_request recv(void*, std::size_t, dtype, int, int, loc_t) = 0;
    virtual void group_start() = 0;
    virtual void group_end() = 0;
    virtual std::shared_ptr<base> split(std::span<const int>, loc_t) = 0;
  };
  template <class C>
  struct impl final : base {
    explicit impl(C x) : c(std::move(x)) {}
    int rank() const override { return c.rank(); }
    int size() const override { return c.size(); }
    std::span<const int> world_ranks() const override { return c.world_ranks(); }
    std::string backend() const override {
      if constexpr (requires { c.backend(); }) return c.backend();
      else return "?";
    }
    any_request all_gather(const void* i, void* o, std::size_t n, dtype t, loc_t l) override {
      return c.all_gather(i, o, n, t, l);
    }
    any_request reduce_scatter(const void* i, void* o, std::size_t n, dtype t, reduce_op op, loc_t l) override {
      return c.reduce_scatter(i, o, n, t, op, l);
    }
    any_request all_reduce(const void* i, void* o, std::size_t n, dtype t, reduce_op op, loc_t l) override {
      return c.all_reduce(i, o, n, t, op, l);
    }
    any_request all_to_all(const void* i, void* o, std::size_t n, dtype t, loc_t l) override {
      return c.all_to_all(i, o, n, t, l);
    }
    any_request broadcast(void* b, std::size_t n, dtype t, int root, loc_t l) override {
      return c.broadcast(b, n, t, root, l);
    }
    any_request barrier(loc_t l) override { return c.barrier(l); }
    any_request send(const void* b, std::size_t n, dtype t, int p, int tag, loc_t l) override {
      return c.send(b, n, t, p, tag, l);
    }
    any_request recv(void* b, std::size_t n, dtype t, int p, int tag, loc_t l) override {
      return c.recv(b, n, t, p, tag, l);
    }
    void group_start() override { c.group_start(); }
    void group_end() override { c.group_end(); }
    std::shared_ptr<base> split(std::span<const int> r, loc_t l) override {
      return std::make_shared<impl<C>>(c.split(r, l));
    }
    C c;
  };
  std::shared_ptr<base> p_;
};

static_assert(communicator<any_communicator>);

}  // namespace tessera::comm
