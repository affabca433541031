#include "bench/attention_bench.h"

#include <fmt/format.h>
#include <omp.h>

#include <string>
#include <utility>
#include <vector>

#include "bench/bench.h"
#include "bench/generate_bench.h"
#include "ops/attention_plan.h"
#include "ops/backend.h"
#include "ops/backend_registry.h"
#include "ops/decode_keys.h"
#include "ops/ops.h"
#include "util/float_formats.h"
#include "util/process_stats.h"
#include "util/rng.h"

namespace sps {

namespace {

struct AttentionTiming {
  int64_t pairs = 0;
  double forward_seconds = 0, backward_seconds = 0;
};

// `layout` holds host arrays; they and the tile plan (when `with_plan`) go to the backend.
AttentionTiming time_attention(const ops::Backend<float>& backend, ops::AttentionLayout layout,
                               bool with_plan, int repeats) {
  const int64_t slots = layout.batch * layout.streams * layout.tokens;
  const int64_t hd = layout.heads * layout.head_dim;
  std::vector<float> host_qkv(slots * 3 * hd), host_dout(slots * hd);
  Rng rng(11);
  for (auto& x : host_qkv) x = float(2 * rng.uniform() - 1);
  for (auto& x : host_dout) x = float(2 * rng.uniform() - 1);
  ops::DeviceBuffer<float> qkv(backend), out(backend), dout(backend), dqkv(backend), lse(backend);
  qkv.upload(host_qkv.data(), host_qkv.size());
  dout.upload(host_dout.data(), host_dout.size());
  out.reset(slots * hd);
  dqkv.reset(slots * 3 * hd);
  lse.reset(slots * layout.heads);
  const int64_t tokens = layout.batch * layout.tokens;
  ops::DeviceBuffer<int32_t> doc(backend), doc_start(backend);
  ops::DeviceBuffer<ops::TileKind> kinds(backend);
  ops::AttentionTilePlan plan;
  if (with_plan) {
    const int64_t tile = backend.attention_tile();
    ops::plan_attention_tiles(plan, layout, tile, tile);
    kinds.upload(plan.kinds.data(), plan.kinds.size());
    layout.tile_kinds = kinds.data();
    layout.tile = tile;
    layout.tile_pairs = plan.computed_pairs;
  }
  doc.upload(layout.doc, tokens);
  doc_start.upload(layout.doc_start, tokens);
  layout.doc = doc.data();
  layout.doc_start = doc_start.data();
  AttentionTiming timing;
  std::vector<double> forward, backward;
  for (int r = 0; r <= repeats; ++r) {  // run 0 warms up caches and scratch
    const double t0 = now_seconds();
    timing.pairs = backend.attention_forward(out.data(), lse.data(), qkv.data(), layout);
    wait_for_backend(backend, dqkv.data());
    const double t1 = now_seconds();
    backend.attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                               layout);
    wait_for_backend(backend, dqkv.data());
    const double t2 = now_seconds();
    if (r > 0) forward.push_back(t1 - t0), backward.push_back(t2 - t1);
  }
  timing.forward_seconds = median(forward);
  timing.backward_seconds = median(backward);
  return timing;
}

}  // namespace

void run_attention_bench(const ops::Device& device, ops::Precision precision, int64_t tokens,
                         int64_t window, int64_t heads, int64_t head_dim, int repeats) {
  const ops::Backend<float>& backend = ops::backend_for(device, precision);
  const bool on_cpu = ops::capabilities(device).host_memory;
  const int64_t tile = backend.attention_tile();
  std::vector<int32_t> doc(tokens, 0), doc_start(tokens, 0);
  fmt::print("attention  T={} w={} H={} D={}  {}  median of {}  ", tokens, window, heads, head_dim,
             on_cpu ? fmt::format("threads {}", omp_get_max_threads())
                    : device.name() + " " + ops::precision_name(precision),
             repeats);
  if (tile > 0)
    fmt::print("(tile plan of {} × {} tokens)\n", tile, tile);
  else
    fmt::print("({})\n", ops::backend_entry(device).attention_blocks);
  fmt::print("flops: forward 4·pairs·D, backward 10·pairs·D (with the Q·Kᵀ recompute)\n");
  fmt::print("{:<14} {:>14} {:>9} {:>10} {:>10} {:>10} {:>10}\n", "family", "pairs", "/dense",
             "fwd ms", "fwd GF/s", "bwd ms", "bwd GF/s");
  // (streams, with the tile plan): standard and sps, and sps on the reference kernels too
  // where the backend's kernels read a plan.
  std::vector<std::pair<int64_t, bool>> rows = {{1, tile > 0}, {2, tile > 0}};
  if (tile > 0) rows.push_back({2, false});
  for (const auto& [streams, with_plan] : rows) {
    ops::AttentionLayout layout;
    layout.batch = 1;
    layout.tokens = tokens;
    layout.streams = streams;
    layout.persistent_stream = 0;
    layout.window = window;
    layout.heads = heads;
    layout.head_dim = head_dim;
    layout.doc = doc.data();
    layout.doc_start = doc_start.data();
    const AttentionTiming t = time_attention(backend, layout, with_plan, repeats);
    const double slots = double(streams * tokens);
    const double dense = slots * (slots + 1) / 2 * double(heads);
    const double flops = double(t.pairs) * double(head_dim);
    const std::string name = std::string(streams == 1 ? "standard" : "sps") +
                             (tile > 0 && !with_plan ? " reference" : "");
    fmt::print("{:<14} {:>14} {:>9.3f} {:>10.2f} {:>10.1f} {:>10.2f} {:>10.1f}\n", name, t.pairs,
               double(t.pairs) / dense, t.forward_seconds * 1e3,
               4 * flops / t.forward_seconds / 1e9, t.backward_seconds * 1e3,
               10 * flops / t.backward_seconds / 1e9);
  }
  if (on_cpu)
    fmt::print("sgemm 1024^3 reference: {:.1f} GFLOP/s\n", measure_sgemm_gflops(1024, repeats));
}

namespace {

// The median seconds of one step through all layers, after one warm-up.
double time_decode(const ops::Backend<float>& backend, ops::DecodeAttentionLayout layout,
                   bool bf16_cache, int64_t layers, int repeats) {
  const int64_t B = layout.batch, H = layout.heads, D = layout.head_dim, Q = layout.queries;
  const int64_t persistent = B * H * layout.persistent_capacity * D;
  const int64_t ring = std::max<int64_t>(1, B * H * layout.ring_capacity * D);
  Rng rng(12);
  const auto random = [&](int64_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = float(2 * rng.uniform() - 1);
    return v;
  };
  // Per layer: persistent K, V, ring K, V, on the backend, in f32 or in bf16.
  std::vector<ops::DeviceBuffer<float>> f32;
  std::vector<ops::DeviceBuffer<uint16_t>> bf16;
  for (int64_t l = 0; l < layers; ++l)
    for (const int64_t n : {persistent, persistent, ring, ring}) {
      const std::vector<float> values = random(n);
      if (bf16_cache) {
        std::vector<uint16_t> bits(n);
        for (int64_t i = 0; i < n; ++i) bits[i] = float_to_bf16(values[i]);
        bf16.emplace_back(backend).upload(bits.data(), bits.size());
      } else {
        f32.emplace_back(backend).upload(values.data(), values.size());
      }
    }
  const std::vector<float> host_qkv = random(B * Q * 3 * H * D);
  ops::DeviceBuffer<float> qkv(backend), out(backend);
  qkv.upload(host_qkv.data(), host_qkv.size());
  out.reset(B * Q * H * D);
  std::vector<int64_t> counts(3 * B);
  for (int64_t b = 0; b < B; ++b) {
    counts[b] = layout.persistent_end[b];
    counts[B + b] = layout.ring_len ? layout.ring_len[b] : 0;
    counts[2 * B + b] = layout.ring_next ? layout.ring_next[b] : 0;
  }
  ops::DeviceBuffer<int64_t> device_counts(backend);  // [3, B], as the decoder passes them
  device_counts.upload(counts.data(), counts.size());
  layout.persistent_end = device_counts.data();
  layout.ring_len = layout.ring_len ? device_counts.data() + B : nullptr;
  layout.ring_next = layout.ring_next ? device_counts.data() + 2 * B : nullptr;
  std::vector<double> seconds;
  for (int r = 0; r <= repeats; ++r) {  // run 0 warms up
    const double t0 = now_seconds();
    for (int64_t l = 0; l < layers; ++l) {
      if (bf16_cache)
        backend.attention_decode_bf16_cache(out.data(), qkv.data(), bf16[4 * l].data(),
                                            bf16[4 * l + 1].data(), bf16[4 * l + 2].data(),
                                            bf16[4 * l + 3].data(), layout);
      else
        backend.attention_decode(out.data(), qkv.data(), f32[4 * l].data(), f32[4 * l + 1].data(),
                                 f32[4 * l + 2].data(), f32[4 * l + 3].data(), layout);
    }
    wait_for_backend(backend, out.data());
    if (r > 0) seconds.push_back(now_seconds() - t0);
  }
  return median(seconds);
}

}  // namespace

void run_decode_attention_bench(const ops::Device& device, int64_t batch, int64_t tokens,
                                int64_t window, int64_t heads, int64_t head_dim, bool bf16_cache,
                                int64_t layers, int repeats) {
  const ops::Backend<float>& backend = ops::backend_for(device, ops::Precision::fp32);
  const bool on_cpu = ops::capabilities(device).host_memory;
  const double copy = on_cpu ? measure_copy_bandwidth() : measure_device_copy_bandwidth(backend);
  if (on_cpu) {  // the kernels line of `sps --version`: which build of the attention runs
    const std::string kernels = ops::backend_entry(device).describe();
    fmt::print("{}\n", kernels.substr(0, kernels.find('\n')));
  }
  fmt::print(
      "decode attention  B={} cached rows={} w={} H={} D={} layers={} kv {}  {}  median of {}\n",
      batch, tokens, window, heads, head_dim, layers, bf16_cache ? "bf16" : "f32",
             on_cpu ? fmt::format("threads {}", omp_get_max_threads()) : device.name(), repeats);
  fmt::print("{:<10} {:>12} {:>10} {:>10} {:>12}\n", "family", "pairs", "ms", "GB/s",
             "of copy BW");
  const int64_t ring = std::min(window, tokens);
  std::vector<int64_t> ends(batch, tokens), ring_len(batch, ring), ring_next(batch, 0);
  for (const int64_t queries : {1, 2}) {
    ops::DecodeAttentionLayout layout;
    layout.batch = batch;
    layout.tokens = 1;
    layout.queries = queries;
    layout.heads = heads;
    layout.head_dim = head_dim;
    layout.window = queries == 2 ? window : 0;
    layout.persistent_capacity = tokens;
    layout.ring_capacity = queries == 2 ? ring : 0;
    layout.persistent_end = ends.data();
    layout.ring_len = layout.ring_capacity > 0 ? ring_len.data() : nullptr;
    layout.ring_next = layout.ring_capacity > 0 ? ring_next.data() : nullptr;
    const int64_t pairs = layers * ops::decode_attention_pairs(layout);
    const double seconds = time_decode(backend, layout, bf16_cache, layers, repeats);
    // K and V of every cached row in use, each read once.
    const double bytes = double(layers) * double(batch) * double(heads) *
                         double(tokens + layout.ring_capacity) * double(head_dim) * 2 *
                         (bf16_cache ? 2 : 4);
    fmt::print("{:<10} {:>12} {:>10.3f} {:>10.1f} {:>11.0f}%\n",
               queries == 1 ? "standard" : "sps", pairs, seconds * 1e3, bytes / seconds / 1e9,
               100 * bytes / seconds / copy);
  }
  fmt::print("copy bandwidth {:.1f} GB/s (bytes read + written)\n", copy / 1e9);
}

}  // namespace sps
