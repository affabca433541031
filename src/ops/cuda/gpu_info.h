#pragma once
// What the CUDA runtime reports about this machine (compiled with the CUDA backend only).
#include <string>
#include <vector>

#include "ops/device.h"

namespace sps::ops::cuda {

// "runtime 13.0, driver 12.8" (or "…, no driver").
std::string runtime_versions();

// The GPUs the driver offers; empty with `problem` set when none is usable.
std::vector<GpuInfo> list_gpus(std::string* problem);

}  // namespace sps::ops::cuda
