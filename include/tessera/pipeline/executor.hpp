// tessera/pipeline/executor.hpp: runs a lowered schedule on a communicator.
//
// Each rank runs its own action list, in order, with user-supplied stage callbacks:
//   F(s, mb)   forward(s, mb, in, out)               out = stage s applied to in
//   I(s, mb)   backward_input(s, mb, grad_out, grad_in)
//   W(s, mb)   backward_weight(s, mb)                accumulate the stage's weight grads
//   B(s, mb)   backward(s, mb, grad_out, grad_in) when the callbacks have it (the whole
//              backward in one pass), else backward_input then backward_weight
//   SEND_*/RECV_*  move the activation (F) or input gradient (B) across ranks
// Between two stages on one rank the tensor is handed over locally (no send/recv).
// Tensors are f32 and of fixed size per microbatch: boundary(0) elements go into stage 0,
// boundary(s + 1) come out of stage s. The batch given to run() is split into m
// contiguous microbatches of boundary(0) elements; the last stage's outputs are gathered
// the same way. The last stage's backward_input gets an empty grad_out: it seeds the
// gradient of its own loss. The spans given to a callback are valid only during the call:
// forward keeps whatever its backward needs. Gradients accumulate inside the callbacks,
// over the microbatches, in the order of the schedule.
//
// Memory: the tensors between stages live in the memory space the callbacks type names
// (`using space = ...`, a tensor/memory.hpp data_space; the host's when it names none): the
// executor allocates them there, hands the callbacks spans of that memory, copies within it,
// and runs the space's fence before each send (the kernels that wrote the tensor have
// finished), so a stage on a GPU backend passes device buffers to a communicator that moves
// them (NCCL).
//
// Optional hooks for FSDP actions: unshard(s), reshard(s), reduce_grad(s); a callbacks
// type without them treats UNSHARD/RESHARD/REDUCE_GRAD as nothing to do (its stages hold
// their full parameters). Every failure of the executor is a tessera::error naming rank,
// step and action (exceptions of the callbacks themselves pass through unchanged).
// run() is const: the rank threads of one process may share one executor.
//
// Messages: SEND posts an asynchronous send and goes on (its buffer is freed once the send
// completes, at the latest at the end of run()); RECV waits for its tensor. Each tensor has
// its own tag (boundary, microbatch, direction; mod 32768, MPI's smallest tag limit):
// tags repeat only in very large schedules, where the verified order keeps them matched.
// On NCCL, which has no tags and whose send may block until the peer receives (NVIDIA/nccl
// #479, #783), a verified schedule runs as written: verify() runs it under exactly those
// semantics (a SEND and its RECV complete together, each rank in its own order), so every
// pair of ranks sends and receives the same tensors in the same order and none waits on a
// send that cannot be received.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <tessera/comm/communicator.hpp>
#include <tessera/core/error.hpp>
#include <tessera/pipeline/action.hpp>
#include <tessera/pipeline/schedule.hpp>
#include <tessera/pipeline/verify.hpp>
#include <tessera/tensor/memory.hpp>
#include <utility>
#include <vector>

namespace tessera::pipeline {

/// A failure while building or running an executor: bad schedule, sizes, or order.
class execution_error : public tessera::error {
 public:
  using tessera::error::error;
};

/// What a stage implementation provides (one object per rank, for that rank's stages).
template <class S>
concept stage_callbacks = requires(S& s, int stage, int mb, std::span<const float> in, std::span<float> out) {
  s.forward(stage, mb, in, out);
  s.backward_input(stage, mb, in, out);  // (grad_out, grad_in)
  s.backward_weight(stage, mb);
};

/// The memory space of a stage implementation's tensors: S::space, else the host's.
template <class S>
struct stage_space {
  using type = host_space;
};
template <class S>
  requires requires { typename S::space; }
struct stage_space<S> {
  using type = typename S::space;
};

/// Counts of one run() on one rank.
struct run_stats {
  int forwards = 0, backward_inputs = 0, backward_weights = 0;  ///< B counts as one I and one W
  int sends = 0, recvs = 0;
  std::size_t floats_sent = 0;
};

class executor {
 public:
  /// `lowered`: a schedule with its SEND/RECV actions (lower()). `boundary_sizes`:
  /// stages + 1 sizes, in floats per microbatch. Verifies the schedule; throws
  /// execution_error when it is invalid, not lowered, or the sizes do not fit.
  executor(schedule lowered, std::vector<std::size_t> boundary_sizes)
      : s_(std::move(lowered)), sizes_(std::move(boundary_sizes)) {
    const verify_result v = verify(s_);
    if (!v.ok) throw execution_error("tessera::pipeline::executor: invalid schedule: " + std::string(v.message()));
    if (sizes_.size() != static_cast<std::size_t>(s_.stages) + 1)
      throw execution_error("tessera::pipeline::executor: " + std::to_string(sizes_.size()) +
                            " boundary sizes given, expected stages + 1 = " + std::to_string(s_.stages + 1) +
                            " (the input of stage 0, then the output of each stage)");
    for (std::size_t i = 0; i < sizes_.size(); ++i)
      if (sizes_[i] == 0)
        throw execution_error("tessera::pipeline::executor: boundary size " + std::to_string(i) +
                              " is 0; every tensor between stages needs at least one element");
    bool comm = false;
    for (const auto& list : s_.actions)
      for (const action& a : list) comm = comm || is_comm(a.kind);
    for (int st = 0; st + 1 < s_.stages && !comm; ++st)
      if (s_.rank_of(st) != s_.rank_of(st + 1))
        throw execution_error("tessera::pipeline::executor: the schedule is not lowered (stage " + std::to_string(st) +
                              " on rank " + std::to_string(s_.rank_of(st)) + " feeds stage " + std::to_string(st + 1) +
                              " on rank " + std::to_string(s_.rank_of(st + 1)) +
                              " but there is no SEND/RECV); pass lower(schedule)");
  }

  const schedule& plan() const noexcept { return s_; }
  /// Floats per microbatch entering stage i (i = stages: the last stage's output).
  std::size_t boundary(int i) const { return sizes_.at(static_cast<std::size_t>(i)); }

  /// Runs this rank's actions once (one training step over m microbatches).
  /// `batch_in`: m * boundary(0) floats on the rank of stage 0 (ignored elsewhere);
  /// `batch_out`: m * boundary(stages) floats on the rank of the last stage, or empty
  /// when the outputs are not wanted (ignored elsewhere); both in the callbacks' memory.
  template <comm::communicator C, stage_callbacks S>
  run_stats run(C& comm, S& stages, std::span<const float> batch_in, std::span<float> batch_out) const;

 private:
  schedule s_;
  std::vector<std::size_t> sizes_;
};

namespace detail {

/// The request type of C's send (declval only: clang 14 cannot mangle a default
/// source_location argument inside a dependent decltype).
template <class C>
struct request_of {
  using type = decltype(std::declval<C&>().send(std::declval<const void*>(), std::size_t{}, comm::dtype::f32, 0, 0,
                                                std::declval<tessera::source_location>()));
};

template <class Req, class Buf>
struct in_flight {
  Buf buf;  // declared before req: the request is destroyed (waited) first
  Req req{};
  bool active = false;
};

inline std::string exec_where(int rank, int step, const action& a) {
  return "tessera::pipeline::executor: rank " + std::to_string(rank) + ", step " + std::to_string(step) + " (" +
         std::string(format(a).view()) + "): ";
}

}  // namespace detail

template <comm::communicator C, stage_callbacks S>
run_stats executor::run(C& comm, S& stages, std::span<const float> batch_in, std::span<float> batch_out) const {
  const int S_ = s_.stages, M = s_.microbatches, rank = comm.rank();
  if (comm.size() != s_.ranks)
    throw execution_error("tessera::pipeline::executor: rank " + std::to_string(rank) + ": the communicator has " +
                          std::to_string(comm.size()) + " ranks, the schedule " + std::to_string(s_.ranks));
  const auto Mz = static_cast<std::size_t>(M);
  if (s_.rank_of(0) == rank && batch_in.size() != Mz * sizes_.front())
    throw execution_error("tessera::pipeline::executor: rank " + std::to_string(rank) + ": the batch input has " +
                          std::to_string(batch_in.size()) + " floats, expected microbatches * boundary(0) = " +
                          std::to_string(Mz * sizes_.front()));
  const bool want_out = !batch_out.empty() && s_.rank_of(S_ - 1) == rank;
  if (want_out && batch_out.size() != Mz * sizes_.back())
    throw execution_error("tessera::pipeline::executor: rank " + std::to_string(rank) + ": the batch output has " +
                          std::to_string(batch_out.size()) + " floats, expected microbatches * boundary(stages) = " +
                          std::to_string(Mz * sizes_.back()) + " (or pass an empty span)");

  using req_t = typename detail::request_of<C>::type;
  using space = typename stage_space<S>::type;
  using buf_t = space_buffer<float, space>;  // a tensor between stages
  auto view = [](buf_t& b) { return std::span<float>(b.data(), b.size()); };
  auto cview = [](const buf_t& b) { return std::span<const float>(b.data(), b.size()); };
  const std::size_t pairs = static_cast<std::size_t>(S_) * Mz;
  auto idx = [&](int st, int mb) { return static_cast<std::size_t>(st) * Mz + static_cast<std::size_t>(mb); };
  // act[idx(s, mb)]: the input of F(s, mb); grad[idx(s, mb)]: the gradient of stage s's output.
  std::vector<buf_t> act(pairs), grad(pairs);
  std::vector<char> has_act(pairs, 0), has_grad(pairs, 0), done_i(pairs, 0);
  // Results waiting for their SEND: [0] activations out of stage s, [1] input grads of stage s.
  std::vector<buf_t> outbox[2] = {std::vector<buf_t>(pairs), std::vector<buf_t>(pairs)};
  std::vector<char> has_out[2] = {std::vector<char>(pairs, 0), std::vector<char>(pairs, 0)};
  using flight_t = detail::in_flight<req_t, buf_t>;
  std::vector<flight_t> sending[2] = {std::vector<flight_t>(pairs), std::vector<flight_t>(pairs)};
  std::vector<std::pair<int, std::size_t>> active;  // sends posted and not known complete
  run_stats st{};
  // One tag per tensor (boundary, microbatch, direction); both peers compute the same.
  auto tag_of = [&](int lower_stage, int mb, int dir) {
    return static_cast<int>((2 * idx(lower_stage, mb) + static_cast<std::size_t>(dir)) % 32768);
  };
  const auto& list = s_.actions[static_cast<std::size_t>(rank)];
  int step = 0;
  action a{};
  auto fail = [&](const std::string& what) -> void { throw execution_error(detail::exec_where(rank, step, a) + what); };
  auto local = [&, this](int stage) { return stage >= 0 && stage < S_ && s_.rank_of(stage) == rank; };

  auto backward_input = [&, this](int s, int mb, bool whole) {
    const std::size_t i = idx(s, mb);
    if (s + 1 < S_ && !has_grad[i])
      fail("the gradient of stage " + std::to_string(s) + "'s output for microbatch " + std::to_string(mb) +
           " is not here yet (stage " + std::to_string(s + 1) + " on rank " + std::to_string(s_.rank_of(s + 1)) +
           " must run its backward and the gradient reach this rank first)");
    if (done_i[i]) fail("this backward already ran");
    buf_t gin(sizes_[static_cast<std::size_t>(s)]);
    const std::span<const float> gout = s + 1 < S_ ? cview(grad[i]) : std::span<const float>();
    if constexpr (requires { stages.backward(s, mb, gout, view(gin)); }) {
      if (whole)
        stages.backward(s, mb, gout, view(gin));
      else
        stages.backward_input(s, mb, gout, view(gin));
    } else {
      stages.backward_input(s, mb, gout, view(gin));
      if (whole) stages.backward_weight(s, mb);
    }
    grad[i] = buf_t{};
    has_grad[i] = 0;
    done_i[i] = 1;
    ++st.backward_inputs;
    if (s == 0) return;
    if (local(s - 1)) {
      grad[idx(s - 1, mb)] = std::move(gin);
      has_grad[idx(s - 1, mb)] = 1;
    } else {
      outbox[1][i] = std::move(gin);
      has_out[1][i] = 1;
    }
  };
  auto post_send = [&, this](int dir, int s, int mb) {
    const std::size_t i = idx(s, mb);
    if (!has_out[dir][i]) fail("nothing to send: the action producing this tensor has not run on this rank");
    auto& f = sending[dir][i];
    f.buf = std::move(outbox[dir][i]);
    has_out[dir][i] = 0;
    const int peer = s_.rank_of(dir == 0 ? s + 1 : s - 1);
    space::fence();  // the kernels that wrote the tensor have finished
    f.req = comm::send(comm, cview(f.buf), peer, tag_of(dir == 0 ? s : s - 1, mb, dir));
    f.active = true;
    active.emplace_back(dir, i);
    ++st.sends;
    st.floats_sent += f.buf.size();
  };
  auto finish_send = [&](flight_t& f) {
    if (!f.active) return;
    f.req.wait();
    f.active = false;
    f.buf = buf_t{};
  };
  auto receive = [&, this](int dir, int s, int mb) {
    // dir 0: the input of stage s from stage s-1; dir 1: the output gradient of s from s+1.
    const std::size_t i = idx(s, mb);
    auto& dst = dir == 0 ? act[i] : grad[i];
    auto& flag = dir == 0 ? has_act[i] : has_grad[i];
    if (flag) fail("this tensor was already received");
    dst = buf_t(sizes_[static_cast<std::size_t>(dir == 0 ? s : s + 1)]);
    const int peer = s_.rank_of(dir == 0 ? s - 1 : s + 1);
    comm::recv(comm, view(dst), peer, tag_of(dir == 0 ? s - 1 : s, mb, dir)).wait();
    flag = 1;
    ++st.recvs;
  };

  for (; step < static_cast<int>(list.size()); ++step) {
    a = list[static_cast<std::size_t>(step)];
    const int s = a.stage, mb = a.mb;
    try {
      switch (a.kind) {
        case op::F: {
          const std::size_t i = idx(s, mb);
          std::span<const float> in;
          if (s == 0) {
            in = batch_in.subspan(static_cast<std::size_t>(mb) * sizes_[0], sizes_[0]);
          } else {
            if (!has_act[i])
              fail("the input of stage " + std::to_string(s) + " for microbatch " + std::to_string(mb) +
                   " is not here (stage " + std::to_string(s - 1) + " on rank " + std::to_string(s_.rank_of(s - 1)) +
                   " must run its forward and the activation reach this rank first)");
            in = cview(act[i]);
          }
          buf_t out(sizes_[static_cast<std::size_t>(s + 1)]);
          stages.forward(s, mb, in, view(out));
          ++st.forwards;
          act[i] = buf_t{};
          has_act[i] = 0;
          if (s + 1 == S_) {
            if (want_out)
              space::copy(batch_out.data() + static_cast<std::size_t>(mb) * sizes_.back(), out.data(),
                          out.size() * sizeof(float));
          } else if (local(s + 1)) {
            act[idx(s + 1, mb)] = std::move(out);
            has_act[idx(s + 1, mb)] = 1;
          } else {
            outbox[0][i] = std::move(out);
            has_out[0][i] = 1;
          }
          break;
        }
        case op::I: backward_input(s, mb, false); break;
        case op::B:
          backward_input(s, mb, true);
          ++st.backward_weights;
          break;
        case op::W:
          if (!done_i[idx(s, mb)]) fail("W before the I of the same stage and microbatch");
          stages.backward_weight(s, mb);
          ++st.backward_weights;
          break;
        case op::SEND_F: post_send(0, s, mb); break;
        case op::SEND_B: post_send(1, s, mb); break;
        case op::RECV_F: receive(0, s, mb); break;
        case op::RECV_B: receive(1, s, mb); break;
        case op::WAIT_SEND_F: finish_send(sending[0][idx(s, mb)]); break;
        case op::WAIT_SEND_B: finish_send(sending[1][idx(s, mb)]); break;
        case op::UNSHARD:
          if constexpr (requires { stages.unshard(s); }) stages.unshard(s);
          break;
        case op::RESHARD:
          if constexpr (requires { stages.reshard(s); }) stages.reshard(s);
          break;
        case op::REDUCE_GRAD:
          if constexpr (requires { stages.reduce_grad(s); }) stages.reduce_grad(s);
          break;
        case op::WAIT_REDUCE_GRAD: break;
      }
      // Free the buffers of sends that completed (never blocks).
      if (a.kind == op::SEND_F || a.kind == op::SEND_B || a.kind == op::RECV_F || a.kind == op::RECV_B)
        std::erase_if(active, [&](const std::pair<int, std::size_t>& k) {
          auto& f = sending[k.first][k.second];
          if (f.active && !f.req.test()) return false;
          f.active = false;
          f.buf = buf_t{};
          return true;
        });
    } catch (const comm::aborted&) {
      throw;
    } catch (const comm::error& e) {
      throw execution_error(detail::exec_where(rank, step, a) + e.what());
    }
  }
  a = action{};
  step = static_cast<int>(list.size());
  for (int dir = 0; dir < 2; ++dir)
    for (std::size_t i = 0; i < pairs; ++i) {
      if (has_out[dir][i])
        throw execution_error("tessera::pipeline::executor: rank " + std::to_string(rank) + ": a " +
                              (dir == 0 ? "forward output" : "input gradient") + " of stage " +
                              std::to_string(static_cast<int>(i / Mz)) + ", microbatch " +
                              std::to_string(static_cast<int>(i % Mz)) + " was never sent");
      try {
        finish_send(sending[dir][i]);
      } catch (const comm::aborted&) {
        throw;
      } catch (const comm::error& e) {
        throw execution_error("tessera::pipeline::executor: rank " + std::to_string(rank) + ", end of schedule: " + e.what());
      }
    }
  return st;
}

}  // namespace tessera::pipeline
