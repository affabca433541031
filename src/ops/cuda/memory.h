#pragma once
// Device memory and the elementwise memory ops of the CUDA backend: what the model's host
// loops (copies of the residual, fills, additions) become on a GPU. Every call runs on the
// current device's default stream; copies to the host wait for it.
#include <cstddef>
#include <cstdint>

namespace sps::ops::cuda {

// A UserError naming the device, the size and the free memory when it does not fit.
void* device_allocate(size_t bytes);
void device_free(void* pointer);

void copy_to_device(void* device, const void* host, size_t bytes);
void copy_to_host(void* host, const void* device, size_t bytes);
void copy_on_device(void* to, const void* from, size_t bytes);

// Free memory of the current device, in bytes.
int64_t free_device_bytes();

// Makes GPU `index` the calling thread's current device.
void use_device(int index);

// x[i] = value for i in [0, n)
void fill(float* x, int64_t n, float value);
// y[i] += x[i] for i in [0, n)
void add(float* y, const float* x, int64_t n);

}  // namespace sps::ops::cuda
