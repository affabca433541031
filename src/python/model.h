#pragma once
// sps.Model's engine side: a model loaded for inference (cli/model_files.h, as the commands
// load it), where its weights came from, and its tokenizer, loaded on first use.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli/model_files.h"
#include "python/support.h"
#include "tokenizer/bpe.h"

namespace sps::python {

class PyModel {
 public:
  // `host_weights`: the f32 weights in checkpoint layout when they came from memory (a state
  // dict, an import); null when they are the file loaded.weights_path, read again on demand
  // (the engine's own copy is packed for inference and is not that layout).
  PyModel(cli::LoadedModel loaded, std::shared_ptr<const std::vector<float>> host_weights,
          std::string tokenizer_spec);

  Model<float>& model() { return *loaded_.model; }
  const ModelConfig& config() const { return loaded_.model->config(); }
  const cli::LoadedModel& loaded() const { return loaded_; }
  const std::shared_ptr<const std::vector<float>>& host_weights() const { return host_weights_; }
  // One engine call at a time on this model (take it without the GIL).
  std::mutex& mutex() { return mutex_; }

  // The tokenizer (the spec given to load, else the config's), loaded on first use; call with
  // the GIL held. tokenizer() raises when there is none; tokenizer_if_any() returns null
  // when none was given and the config names none.
  std::shared_ptr<BpeTokenizer> tokenizer();
  std::shared_ptr<BpeTokenizer> tokenizer_if_any();

 private:
  cli::LoadedModel loaded_;
  std::shared_ptr<const std::vector<float>> host_weights_;
  std::string tokenizer_spec_;
  std::mutex mutex_, tokenizer_mutex_;
  std::shared_ptr<BpeTokenizer> tokenizer_;
  std::string tokenizer_error_;  // why the config's tokenizer could not be loaded
};

// Token ids of a text (str or bytes: encoded with `tokenizer`) or of an id sequence.
std::vector<int32_t> ids_of(PyModel& model, const py::handle& text_or_ids,
                            const std::string& argument);

}  // namespace sps::python
