#pragma once
// The CUDA backend behind ops::backend_for: GPU memory, the kernels of ops/cuda/kernels.h and
// cuBLASLt's GEMMs. Ops without a kernel yet (decode attention) are refused with a UserError;
// require_device refuses the commands that need them before any work starts.
#include "ops/backend.h"

namespace sps::ops::cuda {

// GPU `index` (in range: require_device checked it), made the calling thread's current device.
const Backend<float>& backend(int index);

}  // namespace sps::ops::cuda
