#include "run/listing.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "analysis/analysis.hpp"
#include "config/config.hpp"
#include "data/sources.hpp"
#include "norm/presets.hpp"

namespace normlab {

namespace {

std::string short_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

// "keras: eps 0.001 (rmsnorm 1e-06), momentum 0.99 (the old value's weight), running_var
// from the biased batch variance": the defaults the norm module applies (default_eps,
// default_momentum, unbiased_running_var), so the listing cannot drift from them. The eps
// most norm types share comes first, the others in brackets, per dtype where it depends on it.
std::string convention_defaults(Convention c) {
    const auto& types = norm_type_names();
    std::map<std::string, int> votes;
    for (std::size_t t = 0; t < types.size(); ++t) ++votes[short_number(default_eps(static_cast<NormType>(t), c, DType::float32))];
    const std::string common =
        std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
    std::vector<std::string> others;
    for (std::size_t t = 0; t < types.size(); ++t) {
        const auto type = static_cast<NormType>(t);
        const std::string f32 = short_number(default_eps(type, c, DType::float32));
        const std::string f64 = short_number(default_eps(type, c, DType::float64));
        if (f32 != f64) others.push_back(types[t] + " " + f32 + " for float32 data, " + f64 + " for float64");
        else if (f32 != common) others.push_back(types[t] + " " + f32);
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
    return convention_name(c) + ": " + eps + ", momentum " + short_number(default_momentum(c)) +
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
