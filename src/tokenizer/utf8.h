#pragma once
// UTF-8 validation and repair. Invalid input is repaired the way Python's
// `bytes.decode("utf-8", errors="replace")` (and the WHATWG decoder) does: every maximal
// subpart of an ill-formed sequence becomes one U+FFFD.
#include <cstddef>
#include <string>
#include <string_view>

namespace sps {

// Offset of the first byte that is not part of a well-formed UTF-8 sequence, or npos.
size_t find_invalid_utf8(std::string_view text);

// Appends `text` to `out` with ill-formed subsequences replaced by U+FFFD; returns the
// number of replacements.
size_t append_repaired_utf8(std::string_view text, std::string& out);

// Byte length of the well-formed sequence starting at text[i], or 0 if ill-formed; when
// ill-formed, *maximal_subpart receives the number of bytes one U+FFFD replaces (>= 1).
size_t utf8_sequence_length(std::string_view text, size_t i, size_t* maximal_subpart);

}  // namespace sps
