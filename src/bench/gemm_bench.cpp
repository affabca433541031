#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <vector>

#include "bench/bench.h"
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

void run_gemm_bench(const ops::Device& device, ops::Precision precision, int64_t n, int repeats) {
  if (device.kind == ops::Device::Kind::cpu) {
    const double gflops = measure_sgemm_gflops(n, repeats);
    fmt::print("sgemm {}x{}x{}  threads {}  median of {}: {:.1f} GFLOP/s\n", n, n, n,
               omp_get_max_threads(), repeats, gflops);
    return;
  }
  const double gflops =
      measure_backend_gemm_gflops(ops::backend_for(device, precision), n, repeats);
  fmt::print("{} GEMM {}x{}x{} on {}  median of {}: {:.1f} GFLOP/s\n",
             precision == ops::Precision::bf16 ? "bf16" : "fp32", n, n, n, device.name(), repeats,
             gflops);
}

}  // namespace sps
