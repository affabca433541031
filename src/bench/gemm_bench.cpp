#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "ops/backend_registry.h"
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

namespace {

// Median GFLOP/s of an M×N×K GEMM from the seconds of its runs, the first a warm-up; -1 for
// no runs.
double median_gflops_of(int64_t M, int64_t N, int64_t K, const std::vector<double>& seconds) {
  if (seconds.size() < 2) return -1;
  std::vector<double> rates;
  for (size_t r = 1; r < seconds.size(); ++r)
    rates.push_back(2.0 * double(M) * double(N) * double(K) / seconds[r] / 1e9);
  return median(rates);
}

}  // namespace

double measure_backend_gemm_gflops(const ops::Backend<float>& backend, int64_t n, int repeats) {
  std::vector<float> host(n * n);
  Rng rng(7);
  for (auto& v : host) v = float(rng.normal());
  ops::DeviceBuffer<float> a(backend), b(backend), c(backend);
  a.upload(host.data(), n * n);
  b.upload(host.data(), n * n);
  c.reserve(n * n);
  return median_gflops_of(n, n, n, backend.time_gemm(c.data(), a.data(), b.data(), n, repeats + 1));
}

namespace {

// Median GFLOP/s of `repeats` runs of `gemm` (M×N×K) after one warm-up.
template <typename Run>
double median_gflops(int64_t M, int64_t N, int64_t K, int repeats, Run&& gemm) {
  std::vector<double> seconds;
  for (int r = 0; r <= repeats; ++r) {
    const double t0 = now_seconds();
    gemm();
    seconds.push_back(now_seconds() - t0);
  }
  return median_gflops_of(M, N, K, seconds);
}

// bf16: at each shape, the CPU backend's bf16 forward (the path this process chose, its
// weights converted once, its input rounded by each call) beside oneDNN's own bf16 and f32
// matmuls (on operands already in their types and layouts) and sgemm.
void run_bf16_gemm_bench(int64_t n, int repeats) {
  const ops::Backend<float>& bf16 = ops::cpu_backend(ops::Precision::bf16);
  const ops::BackendEntry& cpu = ops::backend_entry(ops::Device{});
  fmt::print("{}\n{}; {} threads; median of {} runs, GFLOP/s\n", bf16.describe_gemms(),
             cpu.comparison_library(), omp_get_max_threads(), repeats);
  std::vector<std::string> names;
  fmt::print("{:<16} {:>11}", "M×N×K", "sps bf16");
  for (const ops::ComparisonGemm& other : cpu.comparison_gemms) {
    fmt::print(" {:>11}", other.name);
    names.push_back(other.name);
  }
  fmt::print(" {:>11}  {} implementation\n", "sgemm", fmt::join(names, " / "));
  // n³, then the forward GEMMs of an s-scale block (d = 768, F = 2304) on n rows.
  const int64_t shapes[][3] = {
      {n, n, n}, {n, 2304, 768}, {n, 768, 768}, {n, 4608, 768}, {n, 768, 2304}};
  const auto rate = [](double r) { return r < 0 ? std::string("-") : fmt::format("{:.1f}", r); };
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
    std::string others;
    std::vector<std::string> implementations;
    for (const ops::ComparisonGemm& other : cpu.comparison_gemms) {
      std::string implementation;
      const std::vector<double> seconds =
          other.time(M, N, K, repeats + 1, in.data(), weight.data(), &implementation);
      others += fmt::format(" {:>11}", rate(median_gflops_of(M, N, K, seconds)));
      implementations.push_back(implementation);
    }
    const double sgemm = median_gflops(M, N, K, repeats, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(K), 1.0f, in.data(),
                  int(K), weight.data(), int(K), 0.0f, out.data(), int(N));
    });
    fmt::print("{:<16} {:>11}{} {:>11}  {}\n", fmt::format("{}×{}×{}", M, N, K), rate(ours), others,
               rate(sgemm), fmt::join(implementations, " / "));
  }
}

}  // namespace

void run_gemm_bench(const ops::Device& device, ops::Precision precision, int64_t n, int repeats) {
  if (!ops::capabilities(device).host_memory) {
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
