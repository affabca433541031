// --device (and --precision) on the commands that run a model.
#include "ops/device.h"
#include "cli/commands.h"
#include "util/error.h"

namespace sps::cli {

namespace {

// The options and their one check: CLI11 keeps a single parse-complete callback per command.
DeviceChoice& add_choice(CLI::App* command, const std::string& name,
                         const std::string& precision_help, Bf16On bf16_on) {
  auto* choice = new DeviceChoice;  // lives as long as the process, like the App
  command->add_option("--device", choice->device, "cpu (default) or cuda[:N], the GPU to run on")
      ->capture_default_str();
  if (!precision_help.empty())
    command->add_option("--precision", choice->precision, precision_help)->capture_default_str();
  // Checked once the command line is read, before any work: a device this build or machine
  // cannot use, or bf16 on the CPU where it is a GPU's only, is one line and exit status 2.
  command->parse_complete_callback([choice, name, bf16_on] {
    const ops::Device device = ops::parse_device(choice->device, "--device");
    ops::require_device(device, "--device", name);
    if (ops::parse_precision(choice->precision, "--precision") == ops::Precision::bf16 &&
        device.kind == ops::Device::Kind::cpu && bf16_on == Bf16On::gpu_only)
      fail("--precision: bf16 here is the GPU's (--device cuda); on the CPU {} computes in fp32",
           name);
  });
  return *choice;
}

}  // namespace

const std::string& add_device_option(CLI::App* command, const std::string& name) {
  return add_choice(command, name, "", Bf16On::every_device).device;
}

const DeviceChoice& add_device_and_precision_options(CLI::App* command, const std::string& name,
                                                     const std::string& precision_help,
                                                     Bf16On bf16_on) {
  return add_choice(command, name, precision_help, bf16_on);
}

}  // namespace sps::cli
