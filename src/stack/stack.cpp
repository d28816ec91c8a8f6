#include "stack/stack.hpp"

#include <cmath>

namespace normlab {

const std::vector<std::string>& placement_names() {
    static const std::vector<std::string> n = {"pre", "post", "deepnorm", "sandwich", "none", "norm_only"};
    return n;
}
const std::vector<std::string>& block_names() {
    static const std::vector<std::string> n = {"linear", "ffn", "identity"};
    return n;
}
const std::vector<std::string>& activation_names() {
    static const std::vector<std::string> n = {"relu", "gelu", "identity"};
    return n;
}
const std::vector<std::string>& init_names() {
    static const std::vector<std::string> n = {"xavier_normal", "xavier_uniform", "kaiming_normal", "normal"};
    return n;
}
std::string placement_name(Placement p) { return placement_names()[static_cast<std::size_t>(p)]; }
std::string block_name(BlockKind b) { return block_names()[static_cast<std::size_t>(b)]; }
std::string activation_name(Activation a) { return activation_names()[static_cast<std::size_t>(a)]; }
std::string init_name(InitKind k) { return init_names()[static_cast<std::size_t>(k)]; }

InitDistribution init_distribution(const WeightInit& init, std::size_t fan_in, std::size_t fan_out) {
    const double fi = static_cast<double>(fan_in), fo = static_cast<double>(fan_out);
    switch (init.kind) {
        case InitKind::xavier_normal: return {false, std::sqrt(2.0 / (fi + fo))};
        case InitKind::xavier_uniform: return {true, std::sqrt(6.0 / (fi + fo))};
        case InitKind::kaiming_normal: return {false, std::sqrt(2.0 / fi)};
        case InitKind::normal: return {false, init.std};
    }
    return {};
}

double deepnorm_alpha(std::size_t layers) { return std::pow(2.0 * static_cast<double>(layers), 0.25); }
double deepnorm_beta(std::size_t layers) { return std::pow(8.0 * static_cast<double>(layers), -0.25); }

double StackDef::residual_scale() const {
    return placement == Placement::deepnorm ? alpha.value_or(deepnorm_alpha(layers)) : 1.0;
}

double StackDef::init_scale() const {
    return placement == Placement::deepnorm ? beta.value_or(deepnorm_beta(layers)) : 1.0;
}

std::vector<std::string> weight_names(BlockKind b, Placement p) {
    if (p == Placement::norm_only) return {};
    switch (b) {
        case BlockKind::linear: return {"w"};
        case BlockKind::ffn: return {"w1", "w2"};
        case BlockKind::identity: return {};
    }
    return {};
}

std::vector<WeightSlot> weight_slots(const StackDef& def, std::size_t features) {
    const std::size_t L = def.layers, D = features, H = def.hidden;
    std::vector<WeightSlot> out;
    for (const auto& n : weight_names(def.block, def.placement)) {
        if (n == "w") out.push_back({n, {L, D, D}});
        else if (n == "w1") out.push_back({n, {L, D, H}});
        else out.push_back({n, {L, H, D}});
    }
    return out;
}

}  // namespace normlab
