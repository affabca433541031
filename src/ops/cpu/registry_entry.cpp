// The CPU backend's entry of the registry: always built, the default and the reference.
#include <fmt/format.h>

#include <cstdlib>
#include <memory>

#include "ops/backend.h"
#include "ops/backend_registry.h"
#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/attention_variants.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/linear_bf16.h"
#include "ops/cpu/linear_packed.h"
#include "ops/cpu/onednn_matmul.h"
#include "util/process_stats.h"

namespace sps::ops::cpu {

namespace {

// What its own kernels (attention, packed and decode linears, the elementwise ops) were
// compiled for, their vector width and instruction sets, and which build of the packed
// linear runs on this CPU (linear_packed.h); then its bf16 GEMMs.
std::string describe_cpu() {
  std::string sets;
  const auto add = [&](bool present, const char* name) {
    if (present) sets += sets.empty() ? name : std::string(", ") + name;
  };
#if defined(__x86_64__)
  bool avx2 = false, fma = false, f16c = false, avx512 = false;
#ifdef __AVX2__
  avx2 = true;
#endif
#ifdef __FMA__
  fma = true;
#endif
#ifdef __F16C__
  f16c = true;
#endif
#ifdef __AVX512F__
  avx512 = true;
#endif
  add(avx512, "AVX-512");
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
#elif defined(__aarch64__)
  add(true, "NEON");
#endif
  const PackedLinearKernels<float>& packed = packed_linear<float>();
  const AttentionKernels<float>& attention = attention_kernels_in_use<float>();
  return fmt::format(
      "cpu kernels: {}-byte vectors{}; packed linear: {} build, {}-byte vectors; attention: {} "
      "build, {}-byte vectors\ncpu {}",
      kVecBytes, sets.empty() ? "" : " (" + sets + ")", packed.variant, packed.vector_bytes,
      attention.variant, attention.vector_bytes, cpu_backend(Precision::bf16).describe_gemms());
}

// oneDNN's own matmul out[M, N] = in[M, K] · Wᵀ, W [N, K] reordered once into its layout,
// its operands in its type before the runs.
std::vector<double> time_onednn(onednn::DataType type, int64_t M, int64_t N, int64_t K, int runs,
                                const float* in, const float* weight, std::string* implementation) {
  onednn::Gemm g;
  g.type = type;
  g.M = M, g.N = N, g.K = K, g.lda = K, g.ldc = N;
  g.prepared_b = true;
  *implementation = onednn::implementation(g);
  if (!onednn::can_prepare(type, K, N) || !onednn::available(g)) return {};
  const bool bf16 = type == onednn::DataType::bf16;
  std::vector<uint16_t> in16(bf16 ? M * K : 0), weight16(bf16 ? N * K : 0);
  if (bf16) {
    round_rows_to_bf16(in16.data(), K, in, K, M, K);
    round_rows_to_bf16(weight16.data(), K, weight, K, N, K);
  }
  const size_t bytes = (onednn::prepared_bytes(type, K, N) + 63) / 64 * 64;
  const std::unique_ptr<void, decltype(&std::free)> prepared(std::aligned_alloc(64, bytes),
                                                             &std::free);
  onednn::prepare_b(type, true, K, N, K, bf16 ? (const void*)weight16.data() : weight,
                    prepared.get());
  std::vector<float> out(M * N);
  const void* a = bf16 ? (const void*)in16.data() : in;
  std::vector<double> seconds;
  for (int r = 0; r < runs; ++r) {
    const double start = now_seconds();
    onednn::run(g, a, prepared.get(), out.data());
    seconds.push_back(now_seconds() - start);
  }
  return seconds;
}

ComparisonGemm onednn_gemm(const char* name, onednn::DataType type) {
  return {name, [type](int64_t M, int64_t N, int64_t K, int runs, const float* in,
                       const float* weight, std::string* implementation) {
            return time_onednn(type, M, N, K, runs, in, weight, implementation);
          }};
}

}  // namespace

BackendEntry registry_entry() {
  BackendEntry e;
  e.name = "cpu";
  e.title = "CPU";
  e.device_noun = "CPU";
  e.capabilities.host_memory = true;
  e.capabilities.packed_weights = true;
  e.capabilities.bf16_kv_cache = true;
  e.capabilities.bf16_attention = false;
  e.capabilities.lm_head_rows = 256;
  e.attention_blocks = fmt::format("tile {}, chunk {}", kAttentionQueryTile, kAttentionKeyChunk);
  e.comparison_library = [] {
    return fmt::format("{}, ISA {}", onednn::version(), onednn::cpu_isa());
  };
  e.comparison_gemms = {onednn_gemm("oneDNN bf16", onednn::DataType::bf16),
                        onednn_gemm("oneDNN f32", onednn::DataType::f32)};
  e.devices = [](std::string*) { return 1; };
  e.describe = describe_cpu;
  e.open = [](int, Precision precision) -> const Backend<float>& { return cpu_backend(precision); };
  return e;
}

}  // namespace sps::ops::cpu
