#pragma once
// Where a command's tensors live and its ops run: a device of one backend of the registry
// (backend_registry.h): the CPU (the default, and the reference every other backend is tested
// against) or one GPU. Chosen at run time with --device on the commands and system.device in
// recipes.
#include <string>

#include "ops/ops.h"  // Precision

namespace sps::ops {

struct Device {
  std::string backend = "cpu";  // a backend_registry() name
  int index = 0;                // which of an indexed backend's devices

  std::string name() const;  // "cpu", "cuda:0"
  bool operator==(const Device&) const = default;
};

// A backend's name, or an indexed backend's "name:N"; anything else is a UserError naming
// `what` and listing the registry's forms ("expected cpu, cuda or cuda:N (N = 0, 1, …)").
Device parse_device(const std::string& text, const std::string& what);
// Every form a device takes, from the backend registry, for help and errors: "cpu, cuda or
// cuda:N (N = 0, 1, …)".
std::string device_forms();

// Whether `text` names an indexed backend without an index ("cuda"): under a job launcher
// each process then takes the device of its local rank.
bool device_of_local_rank(const std::string& text);

// "fp32" or "bf16"; anything else is a UserError naming `what`.
Precision parse_precision(const std::string& text, const std::string& what);
// The name parse_precision reads: "fp32" or "bf16".
const char* precision_name(Precision precision);

// Returns when this build and machine can use `device`; otherwise a UserError naming `what`
// that says why: the backend not built, no usable device, or an index out of range.
void require_usable_device(const Device& device, const std::string& what);

// Returns when `device` can run `command` here; otherwise a UserError naming `what` (the
// flag or recipe key) that says why: as require_usable_device, or a command its backend
// does not run yet.
void require_device(const Device& device, const std::string& what, const std::string& command);

}  // namespace sps::ops
