#include "ops/backend.h"

#include "util/error.h"

#if SPS_WITH_CUDA
#include "ops/cuda/backend.h"
#endif

namespace sps::ops {

const Backend<float>& backend_for(const Device& device, Precision precision) {
  if (device.kind == Device::Kind::cpu) return cpu_backend(precision);
  require_usable_device(device, "device");
#if SPS_WITH_CUDA
  return cuda::backend(device.index, precision);
#else
  fail("device: {} asked for, but this sps was built without CUDA", device.name());
#endif
}

}  // namespace sps::ops
