// The CUDA runtime's streams and events under the host emulation (included by
// cuda_runtime_emulation.hpp, whose types and registry they use): every call runs when it is
// issued; the stream-order checker (cuda_stream_order.hpp) follows the streams' clocks through
// records, waits and synchronizations, so that work a GPU could reorder is found.
#pragma once

#include <cuda_runtime_emulation.hpp>

namespace tessera::cuda::emulation {
/// A new stream or event, registered in `live` (runtime::streams or runtime::events).
template <class T>
T* create_handle(std::set<const void*> runtime::*live) {
  auto& r = runtime::get();
  T* h = new T;
  std::lock_guard lock(r.m);
  (r.*live).insert(h);
  return h;
}
/// Releases a handle create_handle made; an unknown or released one is CUDA's error.
template <class T>
cudaError_t destroy_handle(std::set<const void*> runtime::*live, T* h) {
  auto& r = runtime::get();
  {
    std::lock_guard lock(r.m);
    if ((r.*live).erase(h) == 0) return fail(cudaErrorInvalidResourceHandle);
  }
  delete h;
  return cudaSuccess;
}
inline bool valid_event(cudaEvent_t e) { return live(&runtime::events, e); }
}  // namespace tessera::cuda::emulation
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  namespace emu = tessera::cuda::emulation;
  *s = emu::create_handle<emu::stream_state>(&emu::runtime::streams);
  (*s)->context = emu::order::new_stream(emu::current_device, (flags & cudaStreamNonBlocking) == 0);
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  namespace emu = tessera::cuda::emulation;
  return emu::destroy_handle(&emu::runtime::streams, s);
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  namespace emu = tessera::cuda::emulation;
  if (!emu::valid_stream(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  emu::order::host_waits_for(emu::context_of(s));
  return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  namespace emu = tessera::cuda::emulation;
  *e = emu::create_handle<emu::event_state>(&emu::runtime::events);
  (*e)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  namespace emu = tessera::cuda::emulation;
  return emu::destroy_handle(&emu::runtime::events, e);
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr) {
  namespace emu = tessera::cuda::emulation;
  if (!emu::valid_event(e) || !emu::valid_stream(s)) return emu::fail(cudaErrorInvalidResourceHandle);
  e->recorded = true;
  e->at = std::chrono::steady_clock::now();
  e->clock = emu::order::issue(emu::context_of(s), "cudaEventRecord", {});
  return cudaSuccess;
}
/// The stream's later work waits for the event's last record (none: nothing to wait for).
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned = 0) {
  namespace emu = tessera::cuda::emulation;
  if (!emu::valid_stream(s) || !emu::valid_event(e)) return emu::fail(cudaErrorInvalidResourceHandle);
  emu::order::stream_waits(emu::context_of(s), e->clock);
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  namespace emu = tessera::cuda::emulation;
  if (!emu::valid_event(e)) return emu::fail(cudaErrorInvalidResourceHandle);
  emu::order::host_waits_for(e->clock);
  return cudaSuccess;
}
inline cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  namespace emu = tessera::cuda::emulation;
  if (!emu::valid_event(start) || !emu::valid_event(end) || !start->timing || !end->timing)
    return emu::fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return emu::fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return cudaSuccess;
}
