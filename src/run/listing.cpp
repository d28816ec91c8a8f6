#include "run/listing.hpp"

#include <sstream>

#include "analysis/analysis.hpp"
#include "data/sources.hpp"
#include "norm/presets.hpp"

namespace normlab {

std::string list_text() {
    std::ostringstream out;
    out << "norm types (keys; see configs/README.md \"Norms\" for defaults):\n"
                 "  batchnorm: channel_axis, training=true, momentum=0.1|null, track_running_stats=true, running_mean=zeros, running_var=ones, affine=true, replicas=none (R | [n1, n2, ...]), sync=false\n"
                 "  layernorm: normalized_shape | axes, affine=true\n"
                 "  instancenorm: channel_axis, affine=false, track_running_stats=false, training=true, momentum, running_mean, running_var\n"
                 "  groupnorm: num_groups (required), channel_axis, affine=true, affine_per=channel|group\n"
                 "  rmsnorm: normalized_shape | axes, affine=true (weight only), weight_offset=0\n"
                 "  all: eps (convention default), weight, bias, mask=false, convention=torch, eps_placement=inside_sqrt, variance=biased, affine_rounding=once|twice\n";
    out << "conventions:";
    for (const auto& n : convention_names()) out << ' ' << n;
    out << "\ndata sources:";
    for (const auto& n : data_source_names()) out << ' ' << n;
    out << "\nanalyses:\n";
    for (const auto& a : analysis_types()) {
        out << "  " << a.name << ": " << a.summary << "\n    columns:";
        for (const auto& c : a.columns) out << ' ' << c;
        out << '\n';
    }
    return out.str();
}

}  // namespace normlab
