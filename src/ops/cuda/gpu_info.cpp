#include "ops/cuda/gpu_info.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "util/error.h"

namespace sps::ops::cuda {

namespace {
std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }
}  // namespace

std::string runtime_versions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  return fmt::format("runtime {}, {}", version_text(runtime),
                     have_driver ? "driver " + version_text(driver) : std::string("no driver"));
}

std::vector<GpuInfo> list_gpus(std::string* problem) {
  std::vector<GpuInfo> gpus;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    int driver = 0;
    const bool no_driver = error == cudaErrorInsufficientDriver &&
                           cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0;
    *problem = no_driver ? "no NVIDIA driver is installed" : cudaGetErrorString(error);
    return gpus;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    gpus.push_back({p.name, p.major, p.minor, (long long)p.totalGlobalMem, p.multiProcessorCount});
  }
  if (gpus.empty()) *problem = "the driver reports no CUDA device";
  return gpus;
}

}  // namespace sps::ops::cuda
