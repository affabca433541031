#include "bench/attention_bench.h"

#include <fmt/format.h>
#include <omp.h>

#include <vector>

#include "bench/bench.h"
#include "ops/cpu/attention_tiles.h"
#include "ops/ops.h"
#include "util/process_stats.h"
#include "util/rng.h"

namespace sps {

namespace {

struct AttentionTiming {
  int64_t pairs = 0;
  double forward_seconds = 0, backward_seconds = 0;
};

AttentionTiming time_attention(const ops::AttentionLayout& layout, int repeats) {
  const int64_t slots = layout.batch * layout.streams * layout.tokens;
  const int64_t hd = layout.heads * layout.head_dim;
  std::vector<float> qkv(slots * 3 * hd), out(slots * hd), dout(slots * hd), dqkv(slots * 3 * hd),
      lse(slots * layout.heads);
  Rng rng(11);
  for (auto& x : qkv) x = float(2 * rng.uniform() - 1);
  for (auto& x : dout) x = float(2 * rng.uniform() - 1);
  AttentionTiming timing;
  std::vector<double> forward, backward;
  for (int r = 0; r <= repeats; ++r) {  // run 0 warms up caches and scratch
    const double t0 = now_seconds();
    timing.pairs = ops::attention_forward(out.data(), lse.data(), qkv.data(), layout);
    const double t1 = now_seconds();
    ops::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), layout);
    const double t2 = now_seconds();
    if (r > 0) forward.push_back(t1 - t0), backward.push_back(t2 - t1);
  }
  timing.forward_seconds = median(forward);
  timing.backward_seconds = median(backward);
  return timing;
}

}  // namespace

void run_attention_bench(int64_t tokens, int64_t window, int64_t heads, int64_t head_dim,
                         int repeats) {
  std::vector<int32_t> doc(tokens, 0), doc_start(tokens, 0);
  fmt::print("attention  T={} w={} H={} D={}  threads {}  median of {}  (tile {}, chunk {})\n",
             tokens, window, heads, head_dim, omp_get_max_threads(), repeats,
             ops::kAttentionQueryTile, ops::kAttentionKeyChunk);
  fmt::print("flops: forward 4·pairs·D, backward 10·pairs·D (with the Q·Kᵀ recompute)\n");
  fmt::print("{:<9} {:>14} {:>9} {:>10} {:>10} {:>10} {:>10}\n", "family", "pairs", "/dense",
             "fwd ms", "fwd GF/s", "bwd ms", "bwd GF/s");
  for (const int64_t streams : {1, 2}) {
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
    const AttentionTiming t = time_attention(layout, repeats);
    const double slots = double(streams * tokens);
    const double dense = slots * (slots + 1) / 2 * double(heads);
    const double flops = double(t.pairs) * double(head_dim);
    fmt::print("{:<9} {:>14} {:>9.3f} {:>10.2f} {:>10.1f} {:>10.2f} {:>10.1f}\n",
               streams == 1 ? "standard" : "sps", t.pairs, double(t.pairs) / dense,
               t.forward_seconds * 1e3, 4 * flops / t.forward_seconds / 1e9,
               t.backward_seconds * 1e3, 10 * flops / t.backward_seconds / 1e9);
  }
  fmt::print("sgemm 1024^3 reference: {:.1f} GFLOP/s\n", measure_sgemm_gflops(1024, repeats));
}

}  // namespace sps
