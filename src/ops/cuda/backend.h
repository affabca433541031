#pragma once
// The CUDA backend behind ops::backend_for: GPU memory, the kernels of ops/cuda/kernels.h and
// cuBLASLt's GEMMs (linear_decode_forward is linear_forward: cuBLASLt picks its own kernels
// for a few rows).
#include "ops/backend.h"

namespace sps::ops::cuda {

// GPU `index` (in range: require_device checked it), made the calling thread's current device,
// its linears on operands of `precision`.
const Backend<float>& backend(int index, Precision precision);

}  // namespace sps::ops::cuda
