#pragma once
// `normlab list`: what a config may name.
#include <string>

namespace normlab {

/// The norm types with their keys and defaults, the conventions, the data sources and the
/// analyses with their CSV columns, as the lines `normlab list` prints.
std::string list_text();

}  // namespace normlab
