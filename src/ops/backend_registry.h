#pragma once
// Every backend this binary knows, one entry each: its name (what --device and system.device
// spell), whether this build and machine can use it, what it can do, the commands it runs
// and how to open it. A backend is its own folder (src/ops/<name>/) that defines its entry
// (`<name>::registry_entry()`), listed once in backend_registry.cpp; the layers above ask an
// entry's capabilities, never a backend's name.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/device.h"
#include "ops/ops.h"  // Precision

namespace sps::ops {

template <typename T>
class Backend;

// What the layers above adapt to.
struct BackendCapabilities {
  // Its memory is the host's and its threads are the process's OpenMP team: the benchmarks
  // measure BLAS and host copies beside it, and memory plans count its buffers as the host's.
  bool host_memory = false;
  // It multiplies projection weights packed in a weight type (--weight-type bf16 or int8).
  bool packed_weights = false;
  // Its decoders can hold the KV cache in bf16 (--kv-type bf16).
  bool bf16_kv_cache = false;
  // Its training attention computes in bf16 under --precision bf16 (bench attention's bf16).
  bool bf16_attention = false;
  // LM-head rows computed at once: few where a chunk's logits should stay in the caches,
  // many where each chunk's GEMMs should be large enough to be worth their launches.
  int64_t lm_head_rows = 256;
};

// A GEMM of another library that `sps bench gemm --precision bf16` times beside the backend's
// own: out[M, N] = in[M, K] · weightᵀ on operands already in its types and layouts.
struct ComparisonGemm {
  std::string name;  // its column: "oneDNN bf16"
  // The seconds of each of `runs` runs (the first warms up), empty where this machine has
  // none of it; *implementation names what ran.
  std::function<std::vector<double>(int64_t M, int64_t N, int64_t K, int runs, const float* in,
                                    const float* weight, std::string* implementation)>
      time;
};

struct BackendEntry {
  std::string name;         // "cpu", "cuda"
  std::string title;        // in messages: "the CUDA backend does not run …"
  std::string device_noun;  // what one of its devices is called ("GPU")
  // "name:N" picks device N; "name" alone is device 0, or under a job launcher the device of
  // the process's local rank. A backend that is not indexed is one device.
  bool indexed = false;
  BackendCapabilities capabilities;
  // The commands it runs (`sps train`, …), empty for every one, and the document that says
  // what it runs.
  std::vector<std::string> commands;
  std::string guide;
  // How its training attention is blocked, for `sps bench attention` ("tile 64, chunk 128");
  // a backend whose attention reads a tile plan (Backend::attention_tile()) says that instead.
  std::string attention_blocks;
  // The library its bf16 GEMMs are compared with (its version and instruction set), and that
  // library's GEMMs; none where it has no such comparison.
  std::function<std::string()> comparison_library;
  std::vector<ComparisonGemm> comparison_gemms;
  // Its devices usable here: how many, or 0 with *problem saying why (not built, no driver).
  std::function<int(std::string* problem)> devices;
  // Its lines of `sps --version`.
  std::function<std::string()> describe;
  // Device `index` (usable: require_usable_device checked it) with GEMM operands of
  // `precision`, made the calling thread's current device.
  std::function<const Backend<float>&(int index, Precision precision)> open;
};

// Every entry: the CPU first (the default and the reference), then the others.
const std::vector<BackendEntry>& backend_registry();
// The entry named `name`, or null.
const BackendEntry* find_backend(const std::string& name);
// The entry of `device` (parse_device only makes devices of known backends).
const BackendEntry& backend_entry(const Device& device);
inline const BackendCapabilities& capabilities(const Device& device) {
  return backend_entry(device).capabilities;
}

}  // namespace sps::ops
