// The few libtorch CUDA calls tch does not reach (see shim.rs): a pool stream made
// current for the libtorch ops that follow (per-env host training), a device-side wait
// between two streams, and graph capture of libtorch ops (at::cuda::CUDAGraph, with its
// private memory pool). Every call catches what libtorch throws and returns 1, leaving
// the message for hl_last_error: no C++ exception crosses into Rust. Events and syncs go
// through c10's device-generic Event and Stream (libc10_cuda's own code), so this file
// calls no CUDA runtime function itself and links no cudart.

#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/Event.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <string>

namespace {

thread_local std::string last_error;

template <class F>
int guarded(F f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "an unknown C++ exception";
  }
  return 1;
}

using Stream = c10::cuda::CUDAStream;

}  // namespace

extern "C" {

const char* hl_last_error() { return last_error.c_str(); }

// A stream from libtorch's pool on `device`, or libtorch's current one there.
int hl_stream_new(int device, int current, void** out) {
  return guarded([&] {
    auto index = static_cast<c10::DeviceIndex>(device);
    *out = new Stream(current ? c10::cuda::getCurrentCUDAStream(index) : c10::cuda::getStreamFromPool(false, index));
  });
}

void hl_stream_free(void* stream) { delete static_cast<Stream*>(stream); }

// libtorch's ops on the stream's device go to `stream` from now on (on this thread).
int hl_stream_set_current(void* stream) {
  return guarded([&] { c10::cuda::setCurrentCUDAStream(*static_cast<Stream*>(stream)); });
}

// `waiter` waits, on the device, for the work queued on `on` so far.
int hl_stream_wait(void* waiter, void* on) {
  return guarded([&] {
    c10::Event event(c10::DeviceType::CUDA);
    event.record(static_cast<Stream*>(on)->unwrap());
    event.block(static_cast<Stream*>(waiter)->unwrap());
  });
}

int hl_stream_synchronize(void* stream) {
  return guarded([&] { static_cast<Stream*>(stream)->unwrap().synchronize(); });
}

int hl_graph_new(void** out) {
  return guarded([&] { *out = new at::cuda::CUDAGraph(); });
}

void hl_graph_free(void* graph) { delete static_cast<at::cuda::CUDAGraph*>(graph); }

// Captures the libtorch ops that follow on the current stream (not the default one).
// Thread-local mode: other threads (worker threads training their own hosts, libtorch's
// autograd thread) may go on making CUDA calls while this one captures.
int hl_graph_capture_begin(void* graph) {
  return guarded([&] {
    static_cast<at::cuda::CUDAGraph*>(graph)->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
  });
}

int hl_graph_capture_end(void* graph) {
  return guarded([&] { static_cast<at::cuda::CUDAGraph*>(graph)->capture_end(); });
}

int hl_graph_replay(void* graph) {
  return guarded([&] { static_cast<at::cuda::CUDAGraph*>(graph)->replay(); });
}

}  // extern "C"
