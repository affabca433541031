#pragma once
// Standard base64 (RFC 4648, with padding), the token encoding of tiktoken rank files.
#include <string>
#include <string_view>

namespace sps {

// Strict: false on anything but whole padded quads of the standard alphabet.
bool base64_decode(std::string_view s, std::string& out);
std::string base64_encode(std::string_view bytes);

}  // namespace sps
