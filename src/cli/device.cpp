// --device on the commands that run a model.
#include "cli/commands.h"
#include "ops/device.h"

namespace sps::cli {

const std::string& add_device_option(CLI::App* command, const std::string& name) {
  auto* device = new std::string("cpu");  // lives as long as the process, like the App
  command->add_option("--device", *device, "cpu (default) or cuda[:N], the GPU to run on")
      ->capture_default_str();
  // Checked once the command line is read, before any work: a device this build or machine
  // cannot use is one line and exit status 2.
  command->parse_complete_callback([device, name] {
    ops::require_device(ops::parse_device(*device, "--device"), "--device", name);
  });
  return *device;
}

}  // namespace sps::cli
