// The "npy" source: the user's own tensors saved from numpy (np.save).
#include "data/npy.hpp"
#include "data/source_impl.hpp"

namespace normlab {

SourceData build_npy(const std::string&, ObjectReader& r, const DataContext& ctx) {
    const Json& p = r.required("path");
    if (!p.is_string()) r.at("path").fail("expected a file path string, but got " + json_type_name(p));
    SourceData d;
    d.values = at_location(r.at("path"), [&] {
        return read_npy(resolve_path(ctx, p.get<std::string>())).values;
    });
    return d;
}

}  // namespace normlab
