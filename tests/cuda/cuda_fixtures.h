#pragma once
// Shared by the CUDA backend's tests: skipping where no GPU is usable, device buffers.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/backend_registry.h"
#include "ops/cuda/memory.h"

namespace sps::testing {

// Skips the test where no GPU is usable (the build machines have none); gpu-check.sh fails
// on any skip, so on a GPU machine every test runs.
#define SPS_REQUIRE_GPU()                                                           \
  do {                                                                              \
    std::string problem;                                                            \
    if (ops::find_backend("cuda")->devices(&problem) == 0) GTEST_SKIP() << problem; \
  } while (0)

// Device memory freed at scope end, optionally filled from the host.
template <typename T>
struct DeviceArray {
  explicit DeviceArray(int64_t n)
      : n(n), data(static_cast<T*>(ops::cuda::device_allocate(size_t(n) * sizeof(T)))) {}
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(int64_t(host.size())) {
    ops::cuda::copy_to_device(data, host.data(), host.size() * sizeof(T));
  }
  ~DeviceArray() { ops::cuda::device_free(data); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> read() const {
    std::vector<T> host(n);
    ops::cuda::copy_to_host(host.data(), data, size_t(n) * sizeof(T));
    return host;
  }
  int64_t n;
  T* data;
};
using DeviceFloats = DeviceArray<float>;
using DeviceInts = DeviceArray<int32_t>;

// x rounded to the nearest bf16, ties to even, kept as a float: the rounding written
// independently of the device's (finite inputs only).
inline float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

}  // namespace sps::testing
