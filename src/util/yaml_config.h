#pragma once
// YAML configs with `section.key=value` overrides. Loading and overriding are generic; each
// consumer (model, train, eval, …) reads its own section with the typed getters below, so
// every config error reads the same: "FILE: section.key: expected an integer, got 'abc'".
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sps {

// Parses a YAML file. A missing/unreadable file or a syntax error is a UserError naming the
// file (and the line and column of a syntax error).
YAML::Node load_yaml_file(const std::string& path);

// Applies one `section.key=value` override (dotted path of any depth) to `root`, creating
// missing mappings on the way. The value is parsed as YAML, so `16` reads as an integer,
// `true` as a boolean, `sps` as a string, `"16"` as a string and `[1, 2]` as a sequence; an
// empty value is null. A malformed override (no '=', an empty key segment, a path through a
// non-mapping, unparsable value) is a UserError naming the override, after `source` when
// one is given ("FILE: override 'x': ...").
void apply_override(YAML::Node& root, const std::string& key_equals_value,
                    const std::string& source = "");
void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                     const std::string& source = "");

// Typed reads of one scalar. `field` is the dotted name used in messages ("model.n_layer");
// errors read "SOURCE: FIELD: expected an integer, got 'abc'".
int64_t yaml_int(const YAML::Node& node, const std::string& source, const std::string& field);
double yaml_double(const YAML::Node& node, const std::string& source,
                   const std::string& field);  // finite numbers only
bool yaml_bool(const YAML::Node& node, const std::string& source, const std::string& field);
std::string yaml_string(const YAML::Node& node, const std::string& source,
                        const std::string& field);

// Checks that `map` is a mapping whose keys are all in `known` and appear once each.
// Unknown key: "SOURCE: SECTION.foo: unknown key (expected one of a, b, c)".
void check_yaml_keys(const YAML::Node& map, const std::vector<std::string>& known,
                     const std::string& source, const std::string& section);

}  // namespace sps
