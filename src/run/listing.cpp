#include "run/listing.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "analysis/analysis.hpp"
#include "config/config.hpp"
#include "data/sources.hpp"
#include "norm/presets.hpp"
#include "tensor/numbers.hpp"

namespace normlab {

namespace {

// "keras: eps 0.001 (rmsnorm 1e-06), momentum 0.99 (the old value's weight), running_var
// from the biased batch variance": the defaults the norm module applies (default_eps,
// default_momentum, unbiased_running_var), so the listing cannot drift from them. The eps
// most norm types share comes first, the others in brackets, per dtype where it depends on it.
std::string convention_defaults(Convention c) {
    const auto& types = norm_type_names();
    std::map<std::string, int> votes;
    for (std::size_t t = 0; t < types.size(); ++t) ++votes[format_significant(default_eps(static_cast<NormType>(t), c, DType::float32), 3)];
    const std::string common =
        std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
    std::vector<std::string> others;
    for (std::size_t t = 0; t < types.size(); ++t) {
        const auto type = static_cast<NormType>(t);
        // Per dtype where the default depends on it: the float64 value, then the one the other
        // dtypes share (PyTorch's RMSNorm takes the compute type's epsilon, float32's for the
        // half formats), or each dtype's when they do not share one.
        std::map<std::string, std::vector<std::string>> by_value;  // eps -> dtypes
        for (DType dt : {DType::float32, DType::float64, DType::float16, DType::bfloat16})
            by_value[format_significant(default_eps(type, c, dt), 3)].push_back(dtype_name(dt));
        const std::string f32 = format_significant(default_eps(type, c, DType::float32), 3);
        const std::string f64 = format_significant(default_eps(type, c, DType::float64), 3);
        if (by_value.size() == 2 && by_value[f64].size() == 1)
            others.push_back(types[t] + " " + f64 + " for float64 data, " + f32 + " for the others");
        else if (by_value.size() > 1) {
            std::string each;
            for (const auto& [v, dts] : by_value)
                for (const auto& dt : dts) each += (each.empty() ? "" : ", ") + v + " for " + dt;
            others.push_back(types[t] + " " + each);
        } else if (f32 != common)
            others.push_back(types[t] + " " + f32);
    }
    std::string eps = "eps " + common;
    if (!others.empty()) {
        eps += " (";
        for (std::size_t i = 0; i < others.size(); ++i) eps += (i ? "; " : "") + others[i];
        eps += ")";
    }
    NormDef d;
    d.convention = c;
    const bool new_weight = new_batch_weight(d) == default_momentum(c);
    return convention_name(c) + ": " + eps + ", momentum " + format_significant(default_momentum(c), 3) +
           (new_weight ? " (the new batch's weight)" : " (the old value's weight)") + ", running_var from the " +
           (unbiased_running_var(d) ? "unbiased" : "biased") + " batch variance";
}

}  // namespace

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
    out << "conventions (their defaults; configs/README.md \"Conventions and running statistics\"):\n";
    for (std::size_t c = 0; c < convention_names().size(); ++c) out << "  " << convention_defaults(static_cast<Convention>(c)) << "\n";
    out << "data sources (keys=defaults; configs/README.md \"Data sources\"):\n";
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
