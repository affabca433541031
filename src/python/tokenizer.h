#pragma once
// Loading tokenizers for the Python module (the Tokenizer class is shared with models).
#include <memory>
#include <string>

#include "tokenizer/bpe.h"

namespace sps::python {

// BpeTokenizer::load(spec) without the GIL.
std::shared_ptr<BpeTokenizer> load_tokenizer_spec(const std::string& spec);

}  // namespace sps::python
