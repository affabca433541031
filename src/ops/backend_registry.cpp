#include "ops/backend_registry.h"

#include "util/error.h"

namespace sps::ops {

// The entries the backends' folders define: a new backend is a line here and in the list below.
namespace cpu {
BackendEntry registry_entry();
}
namespace cuda {
BackendEntry registry_entry();
}

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> entries = {cpu::registry_entry(), cuda::registry_entry()};
  return entries;
}

const BackendEntry* find_backend(const std::string& name) {
  for (const BackendEntry& b : backend_registry())
    if (b.name == name) return &b;
  return nullptr;
}

const BackendEntry& backend_entry(const Device& device) {
  const BackendEntry* backend = find_backend(device.backend);
  SPS_ASSERT(backend != nullptr);  // parse_device makes devices of known backends only
  return *backend;
}

}  // namespace sps::ops
