// The few libtorch CUDA calls tch does not reach (see shim.rs): a pool stream made
// current for the libtorch ops that follow (per-env host training), a device-side wait
// between two streams, and graph capture of libtorch ops (at::cuda::CUDAGraph, with its
// private memory pool; the graph is kept so that its launches can be counted). Every call
// catches what libtorch throws and returns 1, leaving the message for hl_last_error: no
// C++ exception crosses into Rust. Events and syncs go
// through c10's device-generic Event and Stream (libc10_cuda's own code), so this file
// calls no CUDA runtime function itself and links no cudart.

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/Event.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <mutex>
#include <string>
#include <vector>

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

// Graphs share the device's default generator state: its registered graphs (a plain set),
// its capture flag and offsets. Hosts stepped on several threads (`--backend threads`)
// capture, replay and drop their graphs concurrently, so every graph call holds this lock.
std::recursive_mutex graph_lock;

// libtorch's graph, made safe to destroy and to end. Its destructor unregisters it from
// every generator state it holds, and throws (so the process aborts: a destructor may not
// throw) when one of them never registered it: a capture_begin that threw halfway (say, on
// a stream already capturing) leaves exactly that. The capture's end goes back to the stream
// the capture began on, so that no stream is left capturing when the captured work switched
// streams; the switch is then an error of its own.
struct Graph : at::cuda::CUDAGraph {
  // The captured graph is kept after its instantiation (see end), so that hl_graph_raw can
  // hand it to the driver to count its launches.
  Graph() : at::cuda::CUDAGraph(/*keep_graph=*/true) {}

  ~Graph() {
    std::vector<c10::intrusive_ptr<at::CUDAGeneratorState>> unregistered;
    for (auto& [state, increment] : captured_generator_states_) {
      if (state->registered_graphs_.count(this) == 0) unregistered.push_back(state);
    }
    for (auto& state : unregistered) captured_generator_states_.erase(state);
  }

  void end() {
    auto current = c10::cuda::getCurrentCUDAStream(capture_stream_.device_index());
    if (current == capture_stream_) {
      capture_end();
      // Kept graphs are not instantiated by capture_end: do it here, at the capture, as
      // libtorch does for graphs it does not keep (the first replay then only launches).
      instantiate();
      return;
    }
    c10::cuda::setCurrentCUDAStream(capture_stream_);
    capture_end();
    c10::cuda::setCurrentCUDAStream(current);
    TORCH_CHECK(false, "the captured work switched the current CUDA stream; a graph is captured on one stream");
  }
};

}  // namespace

extern "C" {

const char* hl_last_error() { return last_error.c_str(); }

// A stream made outside libtorch (by cudarc: one per host, never shared), as libtorch's.
int hl_stream_external(void* cu_stream, int device, void** out) {
  return guarded([&] {
    *out = new Stream(c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(cu_stream),
                                                      static_cast<c10::DeviceIndex>(device)));
  });
}

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

// The CUDA stream itself (a cudaStream_t, the driver's CUstream), for a launch of our own
// kernels onto it (a capture on it records them).
int hl_stream_raw(void* stream, void** out) {
  return guarded([&] { *out = static_cast<void*>(static_cast<Stream*>(stream)->stream()); });
}

int hl_stream_synchronize(void* stream) {
  return guarded([&] { static_cast<Stream*>(stream)->unwrap().synchronize(); });
}

int hl_graph_new(void** out) {
  return guarded([&] { *out = new Graph(); });
}

void hl_graph_free(void* graph) {
  std::lock_guard<std::recursive_mutex> held(graph_lock);
  delete static_cast<Graph*>(graph);
}

// Captures the libtorch ops that follow on the current stream (not the default one).
// Thread-local mode: other threads (worker threads training their own hosts, libtorch's
// autograd thread) may go on making CUDA calls while this one captures.
// The lock is held from a capture's begin to its end (both on the capturing thread).
int hl_graph_capture_begin(void* graph) {
  graph_lock.lock();
  int rc = guarded([&] { static_cast<Graph*>(graph)->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal); });
  if (rc != 0) graph_lock.unlock();
  return rc;
}

int hl_graph_capture_end(void* graph) {
  int rc = guarded([&] { static_cast<Graph*>(graph)->end(); });
  graph_lock.unlock();
  return rc;
}

// The captured graph itself (a cudaGraph_t, the driver's CUgraph), valid while `graph` is.
int hl_graph_raw(void* graph, void** out) {
  std::lock_guard<std::recursive_mutex> held(graph_lock);
  return guarded([&] { *out = static_cast<void*>(static_cast<Graph*>(graph)->raw_cuda_graph()); });
}

int hl_graph_replay(void* graph) {
  std::lock_guard<std::recursive_mutex> held(graph_lock);
  return guarded([&] { static_cast<Graph*>(graph)->replay(); });
}

}  // extern "C"
