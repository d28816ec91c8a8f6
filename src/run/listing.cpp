#include "run/listing.hpp"

#include <algorithm>
#include <sstream>

#include "analysis/analysis.hpp"
#include "config/config.hpp"
#include "data/sources.hpp"
#include "norm/presets.hpp"

namespace normlab {

std::string list_text() {
    // Every key list below is the one its reader declares (norm_keys, stack_keys,
    // data_source_keys, AnalysisType::keys): a key the reader accepts is listed, and only
    // such keys.
    std::ostringstream out;
    const auto& types = norm_type_names();
    // The keys every norm type takes are printed once, under "all".
    std::vector<KeyInfo> common;
    for (const auto& k : norm_keys(static_cast<NormType>(0))) {
        bool everywhere = true;
        for (std::size_t t = 1; t < types.size(); ++t) {
            const auto& keys = norm_keys(static_cast<NormType>(t));
            everywhere = everywhere && std::any_of(keys.begin(), keys.end(), [&](const KeyInfo& o) {
                             return o.name == k.name && o.fallback == k.fallback;
                         });
        }
        if (everywhere && k.name != "type") common.push_back(k);
    }
    out << "norm types (keys=defaults; configs/README.md \"Norms\"):\n";
    for (std::size_t t = 0; t < types.size(); ++t) {
        std::vector<KeyInfo> own;
        for (const auto& k : norm_keys(static_cast<NormType>(t)))
            if (k.name != "type" && std::none_of(common.begin(), common.end(),
                                                 [&](const KeyInfo& c) { return c.name == k.name; }))
                own.push_back(k);
        out << "  " << types[t] << ": " << describe_keys(own) << "\n";
    }
    out << "  all: " << describe_keys(common) << "\n";
    out << "stacks (keys=defaults; configs/README.md \"Stacks\"): " << describe_keys(stack_keys()) << "\n";
    out << "conventions:";
    for (const auto& n : convention_names()) out << ' ' << n;
    out << "\ndata sources (keys=defaults; configs/README.md \"Data sources\"):\n";
    for (const auto& [name, keys] : data_source_keys()) out << "  " << name << ": " << describe_keys(keys) << "\n";
    out << "analyses (keys=defaults besides type, data, norms; results/README.md \"Analyses\"):\n";
    for (const auto& a : analysis_types()) {
        out << "  " << a.name << ": " << a.summary << "\n";
        if (!a.keys.empty()) out << "    keys: " << describe_keys(a.keys) << "\n";
        out << "    columns:";
        for (const auto& c : a.columns) out << ' ' << c;
        out << '\n';
    }
    return out.str();
}

}  // namespace normlab
