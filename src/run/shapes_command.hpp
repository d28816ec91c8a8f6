#pragma once
// `normlab shapes` and `normlab init`: answers and starters straight from the command line.
#include <optional>
#include <string>
#include <vector>

namespace normlab {

/// Options of `normlab shapes`: one norm applied to one input shape.
struct ShapesOptions {
    std::vector<long long> shape;                    ///< --shape 32,3,64,64
    std::string norm;                                ///< --norm batchnorm|layernorm|...
    std::optional<std::vector<long long>> normalized_shape, axes;
    std::optional<std::vector<long long>> param_axes;  ///< --param-axes -1 (layernorm, rmsnorm)
    std::optional<long long> num_groups, channel_axis;
    bool json = false;
};

/// The stats_shapes row for that norm and shape, as "key: value" lines or one JSON object.
/// Throws InputError for a bad shape or a norm that does not fit it.
std::string shapes_answer(const ShapesOptions& o);

/// Names of the starter configs `normlab init` writes.
std::vector<std::string> template_names();
/// The text of a starter config. Throws InputError for an unknown name.
std::string template_text(const std::string& name);
/// Writes the starter config `name` to the file `path` and says so on stderr. Throws
/// InputError for an unknown name or an existing file without `force`, EnvError when the
/// file cannot be written.
void write_template(const std::string& name, const std::string& path, bool force);

}  // namespace normlab
