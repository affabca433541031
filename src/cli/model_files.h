#pragma once
// Where a model's weights and config come from on the command line: --checkpoint DIR (a
// checkpoint folder, or a run folder whose newest complete checkpoint is taken) or
// --weights FILE with --config FILE. Bad combinations and folders are UserErrors.
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/model.h"
#include "ops/device.h"
#include "tokenizer/bpe.h"

namespace sps::cli {

struct ModelFiles {
  std::string weights_path, config_path;
};

ModelFiles resolve_model_files(const std::string& checkpoint, const std::string& weights,
                               const std::string& config);

// A model loaded from --checkpoint or --weights + --config onto --device for inference, its
// projections packed in --weight-type as they are read (Model::load_for_inference); the
// family and special ids the weights were saved with must agree with the config (UserError
// otherwise).
struct LoadedModel {
  std::unique_ptr<Model<float>> model;
  std::string config_path, weights_path;
  YAML::Node config_doc;  // the whole config file, for the tokenizer it names
};
LoadedModel load_model(const std::string& checkpoint, const std::string& weights,
                       const std::string& config, const DeviceChoice& on = {});

// --tokenizer SPEC, or (empty) the one the config records; it must match the model's
// vocabulary and special ids (UserError otherwise).
BpeTokenizer load_tokenizer(const std::string& spec, const LoadedModel& m);

}  // namespace sps::cli
