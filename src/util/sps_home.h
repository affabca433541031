#pragma once
// Where sps keeps the files its setup scripts fetch (GPT-2's tokenizer, corpora, the eval
// suite, reference tools); configs name it as ${SPS_HOME}.
#include <string>

namespace sps {

// $SPS_HOME, default ~/.cache/sps. Neither SPS_HOME nor HOME set is a UserError.
std::string sps_home();

}  // namespace sps
