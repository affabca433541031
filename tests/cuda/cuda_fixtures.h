#pragma once
// Shared by the CUDA backend's tests: skipping where no GPU is usable, device buffers.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/cuda/memory.h"
#include "ops/device.h"

namespace sps::testing {

// Skips the test where no GPU is usable (the build machines have none); gpu-check.sh fails
// on any skip, so on a GPU machine every test runs.
#define SPS_REQUIRE_GPU()                                                              \
  do {                                                                                 \
    const ops::CudaStatus status = ops::cuda_status();                                 \
    if (!status.problem.empty()) GTEST_SKIP() << "no GPU usable: " << status.problem; \
  } while (0)

// Device memory freed at scope end, optionally filled from the host.
struct DeviceFloats {
  explicit DeviceFloats(int64_t n)
      : n(n), data(static_cast<float*>(ops::cuda::device_allocate(size_t(n) * 4))) {}
  explicit DeviceFloats(const std::vector<float>& host) : DeviceFloats(int64_t(host.size())) {
    ops::cuda::copy_to_device(data, host.data(), host.size() * 4);
  }
  ~DeviceFloats() { ops::cuda::device_free(data); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::vector<float> read() const {
    std::vector<float> host(n);
    ops::cuda::copy_to_host(host.data(), data, n * 4);
    return host;
  }
  int64_t n;
  float* data;
};

}  // namespace sps::testing
