#pragma once
// `sps bench generate`: the paper's efficiency protocol (docs/model.md §7) on this machine. For
// each model (a family of a config with random weights, or a checkpoint): B prompts of P tokens
// (seeded random windows of a token file, or random ids), prefill + greedy decode to N new
// tokens (EOS, PAD and PREDICT never chosen, so every row keeps one growing document),
// 1 warm-up run and `runs` timed runs (medians), in `rounds` sweeps over the models. Prints total
// tokens/s = B·(P+N)/time, decode tokens/s, prefill time, KV-cache bytes (allocated and in use at
// the end), the process's peak resident memory during the model's runs, each model's ratios to the
// first standard one, and decode speed as a fraction of two rooflines measured here: the
// memory-bandwidth bound (per step the weights and the cache rows in use are read once, at
// the copy bandwidth) and the compute bound (the step's FLOPs at the GEMM rate); on a GPU
// both rates are the GPU's own (a device copy, cuBLASLt).
// Prints numbers; asserts nothing.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/kv_cache.h"
#include "ops/backend.h"
#include "ops/device.h"

namespace sps {

struct GenerateBenchModel {
  std::string label;    // e.g. "sps w=64"
  ModelConfig config;
  std::string weights;  // safetensors file, or empty for random weights (init seed)
  ops::WeightType weight_type = ops::WeightType::f32;  // how the projections are held
  KvType kv_type = KvType::f32;                        // how the KV cache holds K and V
};

struct GenerateBenchOptions {
  std::vector<GenerateBenchModel> models;
  int64_t prompt_tokens = 128;  // P
  int64_t new_tokens = 128;     // N
  int64_t batch = 4;            // B
  int warmup = 1;
  int runs = 2;
  int rounds = 1;               // sweeps over all models; medians pool every round's runs
                                // (interleaving models evens out a shared machine's drift)
  bool interleave = false;      // hold every model at once and alternate them step by step:
                                // the fairest comparison on a busy machine (peak memory is
                                // then the process's, not per model)
  std::string token_file;       // prompts from here when set (uint16 unless meta.json says)
  std::string token_dtype;      // uint16 | uint32 (default: the folder's meta.json, else uint16)
  uint64_t seed = 1337;         // prompt windows and random weights
  int64_t prefill_rows = 1;     // rows per prefill forward (bounds activation memory)
  bool json = false;            // one JSON object per model instead of the table
  ops::Device device;           // the CPU unless --device says otherwise
};

void run_generate_bench(const GenerateBenchOptions& options);

// `count` prompts of P tokens: seeded random windows of a token file (dtype from
// `token_dtype`, else the folder's meta.json, else uint16), or random ids below EOS when
// `token_file` is empty. UserError when the file is short or holds PAD or PREDICT.
std::vector<int32_t> draw_bench_prompts(const std::string& token_file, const std::string& token_dtype,
                                        int64_t count, int64_t P, const ModelConfig& c, uint64_t seed);

// Copy bandwidth of this process's threads in bytes/s (bytes read + bytes written, as STREAM
// counts a copy), the best of a few copies of a buffer far larger than the caches.
double measure_copy_bandwidth();

// The same for a copy within `backend`'s memory (on a GPU: device to device), each copy
// timed to a download that waits for it.
double measure_device_copy_bandwidth(const ops::Backend<float>& backend);

}  // namespace sps
