#include "util/yaml_config.h"

#include <charconv>
#include <cmath>
#include <set>

#include "util/error.h"
#include "util/read_file.h"

namespace sps {

namespace {

// How a value reads in an error message, kept to one short line.
std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a sequence";
  if (node.IsMap()) return "a mapping";
  std::string text = node.Scalar();
  bool cut = text.size() > 60;
  if (cut) text.resize(60);
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return "'" + text + (cut ? "...'" : "'");
}

[[noreturn]] void wrong_type(const YAML::Node& node, const std::string& source,
                             const std::string& field, const char* expected) {
  fail("{}: {}: expected {}, got {}", source, field, expected, describe(node));
}

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

YAML::Node load_yaml_file(const std::string& path) {
  std::string text = read_file(path);
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail("{}:{}:{}: invalid YAML: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
}

void apply_override(YAML::Node& root, const std::string& key_equals_value,
                    const std::string& source) {
  const std::string prefix = source.empty() ? "" : source + ": ";
  const size_t equals = key_equals_value.find('=');
  if (equals == std::string::npos)
    fail("{}override '{}': expected section.key=value (e.g. model.window_size=16)", prefix,
         key_equals_value);
  const std::string key = trim(key_equals_value.substr(0, equals));
  const std::string value_text = key_equals_value.substr(equals + 1);

  std::vector<std::string> path;
  for (size_t begin = 0;;) {
    size_t dot = key.find('.', begin);
    path.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (path.back().empty())
      fail("{}override '{}': empty name in the key '{}' (expected section.key=value)", prefix,
           key_equals_value, key);
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }

  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    fail("{}override '{}': cannot parse the value: {}", prefix, key_equals_value, e.msg);
  }

  // An empty document may have no node behind it yet; give it one that copies share.
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node node = root;  // shares root's node; reset() below rebinds without assigning
  std::string walked;
  for (size_t i = 0; i < path.size(); ++i) {
    if (node.IsDefined() && !node.IsNull() && !node.IsMap())
      fail("{}override '{}': {} is {}, not a mapping", prefix, key_equals_value,
           walked.empty() ? std::string("the config") : walked, describe(node));
    if (i + 1 == path.size()) {
      node[path[i]] = value;
    } else {
      YAML::Node child = node[path[i]];
      node.reset(child);
      walked += (walked.empty() ? "" : ".") + path[i];
    }
  }
}

void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                     const std::string& source) {
  for (const std::string& o : overrides) apply_override(root, o, source);
}

int64_t yaml_int(const YAML::Node& node, const std::string& source, const std::string& field) {
  if (!node.IsScalar()) wrong_type(node, source, field, "an integer");
  const std::string& text = node.Scalar();
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range)
    fail("{}: {}: integer {} is out of range", source, field, describe(node));
  if (ec != std::errc() || ptr != end || begin == end) wrong_type(node, source, field, "an integer");
  return value;
}

double yaml_double(const YAML::Node& node, const std::string& source, const std::string& field) {
  if (!node.IsScalar()) wrong_type(node, source, field, "a number");
  const std::string& text = node.Scalar();
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  double value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end || !std::isfinite(value))
    wrong_type(node, source, field, "a finite number");
  return value;
}

bool yaml_bool(const YAML::Node& node, const std::string& source, const std::string& field) {
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
  }
  wrong_type(node, source, field, "true or false");
}

std::string yaml_string(const YAML::Node& node, const std::string& source,
                        const std::string& field) {
  if (!node.IsScalar()) wrong_type(node, source, field, "a string");
  return node.Scalar();
}

void check_yaml_keys(const YAML::Node& map, const std::vector<std::string>& known,
                     const std::string& source, const std::string& section) {
  if (!map.IsDefined() || map.IsNull()) return;
  if (!map.IsMap()) fail("{}: {}: expected a mapping, got {}", source, section, describe(map));
  const std::string prefix = section.empty() ? "" : section + ".";
  std::set<std::string> seen;
  for (const auto& entry : map) {
    if (!entry.first.IsScalar())
      fail("{}: {}: keys must be names, got {}", source, section, describe(entry.first));
    const std::string& key = entry.first.Scalar();
    bool is_known = false;
    for (const std::string& k : known) is_known = is_known || k == key;
    if (!is_known)
      fail("{}: {}{}: unknown key (expected one of {})", source, prefix, key,
           fmt::join(known, ", "));
    if (!seen.insert(key).second) fail("{}: {}{}: key appears twice", source, prefix, key);
  }
}

}  // namespace sps
