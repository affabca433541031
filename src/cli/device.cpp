// --device (and --precision or --weight-type) on the commands that run a model.
#include "cli/commands.h"
#include "model/kv_cache.h"
#include "ops/backend_registry.h"
#include "ops/weight_type.h"
#include "util/error.h"

namespace sps::cli {

namespace {

// Which options a command takes besides --device.
enum class Extra { none, precision, weight_type };

// "--device cuda": the backends whose attention computes in bf16, in the registry's order.
std::string bf16_attention_devices() {
  std::string list;
  for (const ops::BackendEntry& b : ops::backend_registry())
    if (b.capabilities.bf16_attention)
      list += (list.empty() ? "" : " or ") + ("--device " + b.name);
  return list.empty() ? "no backend" : list;
}

// The options and their one check: CLI11 keeps a single parse-complete callback per command.
DeviceChoice& add_choice(CLI::App* command, const std::string& name, Extra extra,
                         const std::string& precision_help = "",
                         Bf16On bf16_on = Bf16On::every_device) {
  auto* choice = new DeviceChoice;  // lives as long as the process, like the App
  command->add_option("--device", choice->device, "the device to run on: " + ops::device_forms())
      ->capture_default_str();
  if (extra == Extra::precision)
    command->add_option("--precision", choice->precision, precision_help)->capture_default_str();
  if (extra == Extra::weight_type)
    command
        ->add_option("--weight-type", choice->weight_type,
                     "how the projection weights are held: f32 (as trained, exact), bf16 (half "
                     "the memory) or int8 (blocks of 32 with an fp16 scale, GGUF's Q8_0); the CPU "
                     "backend only")
        ->capture_default_str();
  if (extra == Extra::weight_type)
    command
        ->add_option("--kv-type", choice->kv_type,
                     "how the KV cache holds keys and values: f32 (exact) or bf16 (half the "
                     "bytes each decode step reads; rounded as written); the CPU backend only")
        ->capture_default_str();
  // Checked once the command line is read, before any work: a device this build or machine
  // cannot use, bf16 on the CPU where it is a GPU's only, or packed weights on a GPU is one
  // line and exit status 2.
  command->parse_complete_callback([choice, name, bf16_on] {
    const ops::Device device = ops::parse_device(choice->device, "--device");
    ops::require_device(device, "--device", name);
    const ops::BackendCapabilities& can = ops::capabilities(device);
    for (const ops::Precision precision : parse_precisions(choice->precision))
      if (precision == ops::Precision::bf16 && !can.bf16_attention && bf16_on == Bf16On::gpu_only)
        fail("--precision: bf16 here is {}'s; on the {} backend {} computes in fp32",
             bf16_attention_devices(), ops::backend_entry(device).title, name);
    if (ops::parse_weight_type(choice->weight_type, "--weight-type") != ops::WeightType::f32 &&
        !can.packed_weights)
      fail("--weight-type {}: the CPU backend's packed weights only; {} keeps f32 weights",
           choice->weight_type, choice->device);
    require_kv_type(parse_kv_type(choice->kv_type, "--kv-type"), device);
  });
  return *choice;
}

}  // namespace

std::vector<ops::Precision> parse_precisions(const std::string& list) {
  std::vector<ops::Precision> precisions;
  size_t begin = 0;
  for (size_t comma; (comma = list.find(',', begin)) != std::string::npos; begin = comma + 1)
    precisions.push_back(ops::parse_precision(list.substr(begin, comma - begin), "--precision"));
  precisions.push_back(ops::parse_precision(list.substr(begin), "--precision"));
  return precisions;
}

const std::string& add_device_option(CLI::App* command, const std::string& name) {
  return add_choice(command, name, Extra::none).device;
}

const DeviceChoice& add_device_and_precision_options(CLI::App* command, const std::string& name,
                                                     const std::string& precision_help,
                                                     Bf16On bf16_on) {
  return add_choice(command, name, Extra::precision, precision_help, bf16_on);
}

const DeviceChoice& add_device_and_weight_type_options(CLI::App* command,
                                                       const std::string& name) {
  return add_choice(command, name, Extra::weight_type);
}

}  // namespace sps::cli
