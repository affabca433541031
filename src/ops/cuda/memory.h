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

// Device memory that only grows, for the kernels' temporaries (partial sums, counters): at
// least `bytes`, valid until the next call. One process drives one GPU from one thread, ops
// run one after another on its stream, and no op holds two; freeing a smaller block waits for
// the kernels that used it. After the largest shape has run, no call allocates.
void* scratch(size_t bytes);

// Free memory of the current device, in bytes.
int64_t free_device_bytes();

// Makes GPU `index` the calling thread's current device.
void use_device(int index);

// x[i] = value for i in [0, n)
void fill(float* x, int64_t n, float value);
// y[i] += x[i] for i in [0, n)
void add(float* y, const float* x, int64_t n);
// ops.h copy_rows in one launch (elementwise.cuh); to and from are device arrays.
void copy_rows(float* dst, const float* src, const int64_t* to, const int64_t* from, int64_t n,
               int64_t width);

}  // namespace sps::ops::cuda
