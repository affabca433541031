#pragma once
// What the CUDA runtime reports about this machine (compiled with the CUDA backend only).
#include <string>
#include <vector>

namespace sps::ops::cuda {

struct GpuInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  long long memory_bytes = 0;
  int multiprocessors = 0;
};

// "runtime 13.0, driver 12.8" (or "…, no driver").
std::string runtime_versions();

// The GPUs the driver offers; empty with `problem` set when none is usable.
std::vector<GpuInfo> list_gpus(std::string* problem);

}  // namespace sps::ops::cuda
