#pragma once
// CUDA errors as UserErrors. The messages are formatted in check.cpp, so that .cu files need
// no formatting library and no C++20.
#include <cstddef>
#include <cstdint>

namespace sps::ops::cuda {

// Throws a UserError naming `what` when a CUDA call failed.
void check(int error, const char* what);

// Throws a UserError: `bytes` did not fit on the current device; says how much is free.
[[noreturn]] void fail_allocation(size_t bytes, int error);

// Throws a UserError unless `blocks` (sequences × heads of an attention launch) fits a grid's
// second or third dimension (65,535).
void check_grid_rows(int64_t blocks, const char* what);

// Throws a UserError: this process already runs on GPU `used` and cannot take `index` too.
[[noreturn]] void fail_second_device(int index, int used);

// Throws a UserError: a kernel supports heads of at most `limit` elements.
[[noreturn]] void fail_head_dim(int64_t head_dim, int64_t limit);

}  // namespace sps::ops::cuda
