#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "ops/cpu/linear_bf16.h"
#include "ops/cpu/onednn_matmul.h"
#include "util/process_stats.h"
#include "util/rng.h"

namespace sps {

double measure_sgemm_gflops(int64_t n, int repeats) {
  std::vector<float> a(n * n), b(n * n), c(n * n);
  Rng rng(7);
  for (auto& v : a) v = float(rng.normal());
  for (auto& v : b) v = float(rng.normal());
  std::vector<double> rates;
  for (int r = 0; r <= repeats; ++r) {
    const double t0 = now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(n), int(n), int(n), 1.0f, a.data(),
                int(n), b.data(), int(n), 0.0f, c.data(), int(n));
    const double seconds = now_seconds() - t0;
    if (r > 0) rates.push_back(2.0 * double(n) * double(n) * double(n) / seconds / 1e9);
  }
  return median(rates);
}

double measure_backend_gemm_gflops(const ops::Backend<float>& backend, int64_t n, int repeats) {
  std::vector<float> host(n * n);
  Rng rng(7);
  for (auto& v : host) v = float(rng.normal());
  ops::DeviceBuffer<float> a(backend), b(backend), c(backend);
  a.upload(host.data(), n * n);
  b.upload(host.data(), n * n);
  c.reserve(n * n);
  const std::vector<double> seconds =
      backend.time_gemm(c.data(), a.data(), b.data(), n, repeats + 1);
  std::vector<double> rates;
  for (size_t r = 1; r < seconds.size(); ++r)  // the first warms up
    rates.push_back(2.0 * double(n) * double(n) * double(n) / seconds[r] / 1e9);
  return median(rates);
}

namespace {

// Median GFLOP/s of `repeats` runs of `gemm` (M×N×K) after one warm-up.
template <typename Run>
double median_gflops(int64_t M, int64_t N, int64_t K, int repeats, Run&& gemm) {
  std::vector<double> rates;
  for (int r = 0; r <= repeats; ++r) {
    const double t0 = now_seconds();
    gemm();
    const double seconds = now_seconds() - t0;
    if (r > 0) rates.push_back(2.0 * double(M) * double(N) * double(K) / seconds / 1e9);
  }
  return median(rates);
}

// oneDNN's own matmul out[M, N] = in[M, K] · Wᵀ, W [N, K] reordered once into its layout:
// its median GFLOP/s, or -1 where it has none of this type here.
double onednn_gflops(ops::cpu::onednn::DataType type, int64_t M, int64_t N, int64_t K, int repeats,
                     const std::vector<float>& in, const std::vector<float>& weight,
                     std::string* implementation) {
  namespace onednn = ops::cpu::onednn;
  onednn::Gemm g;
  g.type = type;
  g.M = M, g.N = N, g.K = K, g.lda = K, g.ldc = N;
  g.prepared_b = true;
  *implementation = onednn::implementation(g);
  if (!onednn::can_prepare(type, K, N) || !onednn::available(g)) return -1;
  const bool bf16 = type == onednn::DataType::bf16;
  std::vector<uint16_t> in16(bf16 ? M * K : 0), weight16(bf16 ? N * K : 0);
  if (bf16) {
    ops::cpu::round_rows_to_bf16(in16.data(), K, in.data(), K, M, K);
    ops::cpu::round_rows_to_bf16(weight16.data(), K, weight.data(), K, N, K);
  }
  const size_t bytes = (onednn::prepared_bytes(type, K, N) + 63) / 64 * 64;
  const std::unique_ptr<void, decltype(&std::free)> prepared(std::aligned_alloc(64, bytes),
                                                             &std::free);
  onednn::prepare_b(type, true, K, N, K, bf16 ? (const void*)weight16.data() : weight.data(),
                    prepared.get());
  std::vector<float> out(M * N);
  const void* a = bf16 ? (const void*)in16.data() : in.data();
  return median_gflops(M, N, K, repeats, [&] { onednn::run(g, a, prepared.get(), out.data()); });
}

// bf16: at each shape, the CPU backend's bf16 forward (the path this process chose, its
// weights converted once, its input rounded by each call) beside oneDNN's own bf16 and f32
// matmuls (on operands already in their types and layouts) and sgemm.
void run_bf16_gemm_bench(int64_t n, int repeats) {
  const ops::Backend<float>& bf16 = ops::cpu_backend(ops::Precision::bf16);
  fmt::print("{}\n{}, ISA {}; {} threads; median of {} runs, GFLOP/s\n", bf16.describe_gemms(),
             ops::cpu::onednn::version(), ops::cpu::onednn::cpu_isa(), omp_get_max_threads(),
             repeats);
  fmt::print("{:<16} {:>11} {:>11} {:>11} {:>11}  oneDNN bf16 / f32 implementation\n", "M×N×K",
             "sps bf16", "oneDNN bf16", "oneDNN f32", "sgemm");
  // n³, then the forward GEMMs of an s-scale block (d = 768, F = 2304) on n rows.
  const int64_t shapes[][3] = {
      {n, n, n}, {n, 2304, 768}, {n, 768, 768}, {n, 4608, 768}, {n, 768, 2304}};
  for (const auto& shape : shapes) {
    const int64_t M = shape[0], N = shape[1], K = shape[2];  // named: lambdas capture them
    std::vector<float> in(M * K), weight(N * K), out(M * N);
    Rng rng(7);
    for (auto& v : in) v = float(rng.normal());
    for (auto& v : weight) v = float(rng.normal());
    const auto copies = bf16.gemm_weight_copies(weight.data(), N * K);
    const double ours = median_gflops(M, N, K, repeats, [&] {
      bf16.linear_forward(out.data(), in.data(), weight.data(), M, K, N, false);
    });
    std::string impl16, impl32;
    const double native =
        onednn_gflops(ops::cpu::onednn::DataType::bf16, M, N, K, repeats, in, weight, &impl16);
    const double f32 =
        onednn_gflops(ops::cpu::onednn::DataType::f32, M, N, K, repeats, in, weight, &impl32);
    const double sgemm = median_gflops(M, N, K, repeats, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(K), 1.0f, in.data(),
                  int(K), weight.data(), int(K), 0.0f, out.data(), int(N));
    });
    const auto rate = [](double r) { return r < 0 ? std::string("-") : fmt::format("{:.1f}", r); };
    fmt::print("{:<16} {:>11} {:>11} {:>11} {:>11}  {} / {}\n", fmt::format("{}×{}×{}", M, N, K),
               rate(ours), rate(native), rate(f32), rate(sgemm), impl16, impl32);
  }
}

}  // namespace

void run_gemm_bench(const ops::Device& device, ops::Precision precision, int64_t n, int repeats) {
  if (device.kind != ops::Device::Kind::cpu) {
    const double gflops =
        measure_backend_gemm_gflops(ops::backend_for(device, precision), n, repeats);
    fmt::print("{} GEMM {}x{}x{} on {}  median of {}: {:.1f} GFLOP/s\n",
               ops::precision_name(precision), n, n, n, device.name(), repeats, gflops);
    return;
  }
  if (precision == ops::Precision::bf16) return run_bf16_gemm_bench(n, repeats);
  const double gflops = measure_sgemm_gflops(n, repeats);
  fmt::print("sgemm {}x{}x{}  threads {}  median of {}: {:.1f} GFLOP/s\n", n, n, n,
             omp_get_max_threads(), repeats, gflops);
}

}  // namespace sps
