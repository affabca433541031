// The CUDA backend's entry of the registry. Compiled into every build (as part of sps_ops):
// without the CUDA toolkit the entry stays, so that `--device cuda` says how to build it.
#include <fmt/format.h>

#include "ops/backend_registry.h"
#include "util/error.h"
#if SPS_WITH_CUDA
#include "ops/cuda/backend.h"
#include "ops/cuda/gpu_info.h"
#endif

namespace sps::ops::cuda {

namespace {

#if SPS_WITH_CUDA
int usable_gpus(std::string* problem) {
  std::string why;
  const int count = int(list_gpus(&why).size());
  if (count == 0) *problem = "no GPU is usable here: " + why;
  return count;
}

std::string describe_gpus() {
  std::string problem;
  const std::vector<GpuInfo> gpus = list_gpus(&problem);
  std::string text = fmt::format("cuda {}", runtime_versions());
  if (!problem.empty()) return text + fmt::format("; no GPU usable: {}", problem);
  for (size_t i = 0; i < gpus.size(); ++i)
    text += fmt::format("; cuda:{} {} (sm_{}{}, {} SMs, {:.1f} GiB)", i, gpus[i].name,
                        gpus[i].major, gpus[i].minor, gpus[i].multiprocessors,
                        double(gpus[i].memory_bytes) / double(1 << 30));
  return text;
}
#else
constexpr const char* kNotBuilt =
    "this sps was built without CUDA (configure with -DSPS_CUDA=ON on a machine with the CUDA "
    "toolkit)";
#endif

}  // namespace

BackendEntry registry_entry() {
  BackendEntry e;
  e.name = "cuda";
  e.title = "CUDA";
  e.device_noun = "GPU";
  e.indexed = true;
  e.capabilities.host_memory = false;
  e.capabilities.packed_weights = false;
  e.capabilities.bf16_kv_cache = false;
  e.capabilities.bf16_attention = true;
  e.capabilities.lm_head_rows = 4096;
  e.commands = {"sps train",      "sps generate",       "sps eval",
                "sps serve",      "sps bench gemm",     "sps bench attention",
                "sps bench step", "sps bench generate", "sps bench serve"};
  e.guide = "docs/gpu.md";
#if SPS_WITH_CUDA
  e.devices = usable_gpus;
  e.describe = describe_gpus;
  e.open = [](int index, Precision precision) -> const Backend<float>& {
    return backend(index, precision);
  };
#else
  e.devices = [](std::string* problem) {
    *problem = kNotBuilt;
    return 0;
  };
  e.describe = [] { return std::string("cuda not built (this binary has the CPU backend only)"); };
  e.open = [](int, Precision) -> const Backend<float>& { fail("device: cuda: {}", kNotBuilt); };
#endif
  return e;
}

}  // namespace sps::ops::cuda
