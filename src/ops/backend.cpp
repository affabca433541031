#include "ops/backend.h"

#include "ops/backend_registry.h"

namespace sps::ops {

const Backend<float>& backend_for(const Device& device, Precision precision) {
  require_usable_device(device, "device");
  return backend_entry(device).open(device.index, precision);
}

}  // namespace sps::ops
