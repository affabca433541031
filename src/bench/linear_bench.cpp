// `sps bench linear`: the packed inference linear alone, on the projections of a stack of
// s-scale blocks, so that a decode kernel's speed is seen apart from the rest of a step.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/generate_bench.h"
#include "ops/backend_registry.h"
#include "ops/ops.h"
#include "util/process_stats.h"
#include "util/rng.h"

namespace sps {
namespace {

// The [out, in] shapes of one s-scale block's projections (d = 768, F = 2304): q/k/v, the
// output, the fused gate and up, and down.
const std::vector<LinearShape> kBlockShapes = {{2304, 768}, {768, 768}, {4608, 768}, {768, 2304}};

// One weight type's weights for `layers` blocks, packed as the model packs them.
struct PackedStack {
  ops::WeightType type;
  std::vector<std::vector<uint8_t>> weights;  // layer-major, in the order of `shapes`
  int64_t bytes = 0;
};

PackedStack pack_stack(ops::WeightType type, int64_t layers,
                       const std::vector<LinearShape>& shapes) {
  PackedStack stack{type, {}, 0};
  Rng rng(11);
  for (int64_t l = 0; l < layers; ++l)
    for (const auto& [out_dim, in_dim] : shapes) {
      std::vector<float> rows(out_dim * in_dim);
      for (auto& v : rows) v = float(rng.normal() * 0.02);
      stack.weights.emplace_back(size_t(ops::packed_weight_bytes<float>(type, in_dim, out_dim)));
      ops::pack_weight_rows(type, stack.weights.back().data(), rows.data(), 0, out_dim, in_dim,
                            out_dim, "a bench weight");
      stack.bytes += int64_t(stack.weights.back().size());
    }
  return stack;
}

// Seconds to multiply `rows` input rows through every weight of the stack once.
double stack_seconds(const PackedStack& stack, const std::vector<LinearShape>& shapes,
                     int64_t rows, std::vector<float>& in, std::vector<float>& out) {
  const double t0 = now_seconds();
  size_t i = 0;
  for (const auto& weight : stack.weights) {
    const auto& [out_dim, in_dim] = shapes[i++ % shapes.size()];
    ops::linear_packed_forward(out.data(), in.data(), weight.data(), stack.type, rows, in_dim,
                               out_dim, false);
  }
  return now_seconds() - t0;
}

}  // namespace

void run_linear_bench(const std::vector<ops::WeightType>& types, const std::vector<int64_t>& rows,
                      int64_t layers, int repeats, const std::optional<LinearShape>& shape) {
  const std::vector<LinearShape> shapes = shape ? std::vector<LinearShape>{*shape} : kBlockShapes;
  std::vector<PackedStack> stacks;
  for (const ops::WeightType type : types) stacks.push_back(pack_stack(type, layers, shapes));
  int64_t widest = 0;
  for (const auto& [out_dim, in_dim] : shapes) widest = std::max({widest, out_dim, in_dim});
  std::vector<float> in(rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end()) * widest),
      out(in.size());
  Rng rng(12);
  for (auto& v : in) v = float(rng.normal());
  const double bandwidth = measure_copy_bandwidth();
  const std::string kernels = ops::backend_entry(ops::Device{}).describe();
  fmt::print(
      "{}\nthe packed linear alone: {}, {} threads; median of {} rounds, the weight types taken "
      "in turn; copy bandwidth {:.1f} GB/s\n",
      kernels.substr(0, kernels.find('\n')),
      shape ? fmt::format("{} weights of {} × {} (out × in), one multiply each", layers,
                          shape->out_dim, shape->in_dim)
            : fmt::format("the projections of {} s-scale blocks", layers),
      omp_get_max_threads(), repeats, bandwidth / 1e9);
  fmt::print("{:>5} {:>8} {:>10} {:>10} {:>12} {:>11} {:>10}\n", "rows", "weights", "MB", "ms",
             "weight GB/s", "of copy BW", "vs first");
  for (const int64_t r : rows) {
    std::vector<std::vector<double>> seconds(stacks.size());
    for (int round = 0; round <= repeats; ++round)
      for (size_t s = 0; s < stacks.size(); ++s) {
        const double t = stack_seconds(stacks[s], shapes, r, in, out);
        if (round > 0) seconds[s].push_back(t);  // round 0 warms up
      }
    const double first = median(seconds[0]);
    for (size_t s = 0; s < stacks.size(); ++s) {
      const double t = median(seconds[s]);
      fmt::print("{:>5} {:>8} {:>10.1f} {:>10.3f} {:>12.1f} {:>10.0f}% {:>9.2f}x\n", r,
                 ops::weight_type_name(stacks[s].type), double(stacks[s].bytes) / 1e6, t * 1e3,
                 double(stacks[s].bytes) / t / 1e9, 100.0 * double(stacks[s].bytes) / t / bandwidth,
                 first / t);
    }
  }
}

}  // namespace sps
