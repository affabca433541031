#pragma once
// Where a command's tensors live and its ops run: the CPU (the default, and the reference
// every other backend is tested against) or one CUDA GPU. Chosen at run time with --device
// on the commands and system.device in recipes.
#include <string>
#include <vector>

#include "ops/ops.h"  // Precision

namespace sps::ops {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;  // the GPU's CUDA ordinal

  std::string name() const;  // "cpu", "cuda:0"
  bool operator==(const Device&) const = default;
};

// "cpu", "cuda" (GPU 0) or "cuda:N"; anything else is a UserError naming `what`.
Device parse_device(const std::string& text, const std::string& what);

// "fp32" or "bf16"; anything else is a UserError naming `what`.
Precision parse_precision(const std::string& text, const std::string& what);
// The name parse_precision reads: "fp32" or "bf16".
const char* precision_name(Precision precision);

// The GPUs of this machine as this build sees them.
struct GpuInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  long long memory_bytes = 0;
  int multiprocessors = 0;
};
struct CudaStatus {
  bool built = false;        // this binary has the CUDA backend
  std::string runtime;       // e.g. "runtime 13.0, driver 12.8"; empty when not built
  std::string problem;       // why no GPU is usable (no driver, no device), or empty
  std::vector<GpuInfo> gpus;
};
CudaStatus cuda_status();

// One line for `sps --version`.
std::string describe_cuda(const CudaStatus& status);

// What the CPU backend's own kernels (attention, packed and decode linears, the elementwise
// ops) were compiled for, their vector width and instruction sets, and which build of the
// packed linear runs on this CPU (ops/cpu/linear_packed.h), for `sps --version`.
std::string describe_cpu_kernels();

// Returns when this build and machine can use `device`; otherwise a UserError naming `what`
// that says why: CUDA not built, no usable GPU, or an index out of range.
void require_usable_device(const Device& device, const std::string& what);

// Returns when `device` can run `command` here; otherwise a UserError naming `what` (the
// flag or recipe key) that says why: CUDA not built, no usable GPU, an index out of range,
// or a command the CUDA backend does not run yet.
void require_device(const Device& device, const std::string& what, const std::string& command);

}  // namespace sps::ops
