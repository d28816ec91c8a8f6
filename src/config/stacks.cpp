// The "stacks" section: residual stacks built from the config's norms.
#include <algorithm>
#include <cmath>

#include "config/config.hpp"
#include "data/npy.hpp"
#include "json/foreign.hpp"
#include "json/text.hpp"

namespace normlab {

namespace {

// Activations of other libraries that normlab's ffn does not offer (PyTorch's and Keras's
// names, lower case): named as such rather than answered with the nearest spelling.
bool is_unsupported_activation(const std::string& name) {
    const std::string a = lower_case(name);
    static const std::vector<std::string> known = {"silu", "swish", "swiglu", "geglu", "reglu", "sigmoid", "tanh",
                                                   "leaky_relu", "leakyrelu", "elu", "selu", "celu", "mish",
                                                   "softplus", "softsign", "hardswish", "relu6"};
    return std::find(known.begin(), known.end(), a) != known.end();
}

template <class E>
E enum_of(const std::string& name, const std::vector<std::string>& names) {
    return static_cast<E>(std::find(names.begin(), names.end(), name) - names.begin());
}

// "xavier_normal", "xavier_uniform", "kaiming_normal" or {"normal": {"std": s}}.
WeightInit parse_init(const Json& j, const JsonLocation& loc) {
    WeightInit w;
    const std::string expected =
        "expected \"xavier_normal\", \"xavier_uniform\", \"kaiming_normal\" or {\"normal\": {\"std\": s}}";
    if (j.is_string()) {
        const std::string s = j.get<std::string>();
        const std::vector<std::string> named = {"xavier_normal", "xavier_uniform", "kaiming_normal"};
        if (std::find(named.begin(), named.end(), s) == named.end()) {
            if (const ForeignName f = foreign_name(s, named); !f.ours.empty())
                loc.fail("unknown init " + quoted_text(s) + " (" + expected + "); " + f.note);
            const std::string hint = did_you_mean(s, named);
            loc.fail("unknown init " + quoted_text(s) + (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?") + " (" +
                     expected + ")");
        }
        w.kind = enum_of<InitKind>(s, init_names());
        return w;
    }
    if (!j.is_object()) loc.fail(expected + ", but got " + json_type_name(j));
    ObjectReader r(j, loc);
    r.declare({"normal"});
    r.finish();  // unknown keys first: "nromal" is reported as a misspelling of "normal"
    ObjectReader nr(r.required("normal"), r.at("normal"));
    nr.declare({"std"});
    w.kind = InitKind::normal;
    w.std = nr.nonnegative("std", 1.0);
    nr.finish();
    r.finish();
    return w;
}

}  // namespace

const std::vector<KeyInfo>& stack_keys() {
    static const std::vector<KeyInfo> keys = {
        {"layers", "required"},      {"placement", "required"}, {"norm", "required except for placement none"},
        {"block", "linear"},         {"hidden", "required for ffn"}, {"activation", "relu"},
        {"init", "xavier_normal"},   {"alpha", "(2L)^(1/4)"},   {"beta", "(8L)^(-1/4)"},
        {"final_norm", "true"},      {"weights", ""}};
    return keys;
}

StackDef parse_stack(const std::string& name, const Json& j, const JsonLocation& loc,
                     const std::filesystem::path& base_dir, const std::map<std::string, NormDef>& norms,
                     const std::vector<std::string>& norm_order) {
    ObjectReader r(j, loc);
    r.declare(key_names(stack_keys()));
    r.finish();  // unknown keys first: a misspelled "layer" is reported as itself
    StackDef d;
    d.name = name;
    if (!r.has("layers")) r.missing("layers", " (the number of blocks, >= 1)");
    const long long layers = *r.integer("layers");
    if (layers < 1 || layers > 100000) r.at("layers").fail("layers must be in [1, 100000], but got " + std::to_string(layers));
    d.layers = static_cast<std::size_t>(layers);
    if (!r.has("placement")) r.missing("placement", " (pre, post, deepnorm, sandwich, none, norm_only)");
    d.placement = enum_of<Placement>(r.choice("placement", placement_names(), ""), placement_names());
    const bool norm_only = d.placement == Placement::norm_only;
    d.block = enum_of<BlockKind>(r.choice("block", block_names(), norm_only ? "identity" : "linear"), block_names());
    if (norm_only && d.block != BlockKind::identity)
        r.at("block").fail("placement norm_only chains norms with nothing between them: it takes no block");

    if (d.has_norm()) {
        const auto nn = r.string("norm");
        if (!nn) r.missing("norm", " (the name of an entry of /norms)");
        if (!norms.count(*nn)) {
            const std::string hint = did_you_mean(*nn, norm_order);
            const std::string names = join_words(norm_order);
            r.at("norm").fail("no norms entry named " + quoted_text(*nn) +
                              (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?") +
                              (names.empty() ? " (/norms is empty)" : " (/norms has: " + names + ")"));
        }
        d.norm = norms.at(*nn);
    } else if (r.has("norm")) {
        r.at("norm").fail("placement none has no norm");
    }

    if (d.block == BlockKind::ffn) {
        if (!r.has("hidden")) r.missing("hidden", " (the ffn's hidden size H)");
        const long long h = *r.integer("hidden");
        if (h < 1) r.at("hidden").fail("hidden must be >= 1, but got " + std::to_string(h));
        d.hidden = static_cast<std::size_t>(h);
        // Other activations of the field are not misspellings of these: "silu" is no "relu".
        if (const auto a = r.string("activation"); a && is_unsupported_activation(*a))
            r.at("activation").fail("activation " + quoted_text(*a) + " is not an activation of normlab's ffn block (relu, gelu, identity)");
        d.activation = enum_of<Activation>(r.choice("activation", activation_names(), "relu"), activation_names());
    } else {
        for (const char* k : {"hidden", "activation"})
            if (r.has(k)) r.at(k).fail(std::string(k) + " applies to ffn blocks only");
    }
    if (const Json* init = r.raw("init")) d.init = parse_init(*init, r.at("init"));

    if (d.placement == Placement::deepnorm) {
        for (const char* k : {"alpha", "beta"})
            if (auto v = r.number(k)) {
                if (!(*v > 0) || !std::isfinite(*v)) r.at(k).fail(std::string(k) + " must be a finite number > 0");
                (std::string(k) == "alpha" ? d.alpha : d.beta) = *v;
            }
    } else {
        for (const char* k : {"alpha", "beta"})
            if (r.has(k)) r.at(k).fail(std::string(k) + " applies to placement deepnorm only");
    }
    if (d.placement == Placement::pre) d.final_norm = r.boolean("final_norm", true);
    else if (r.has("final_norm")) r.at("final_norm").fail("final_norm applies to placement pre only");

    if (const Json* w = r.raw("weights")) {
        ObjectReader wr(*w, r.at("weights"));
        const std::vector<std::string> names = weight_names(d.block, d.placement);
        std::size_t features = 0;
        for (auto it = w->begin(); it != w->end(); ++it) {
            const JsonLocation at = r.at("weights").child(it.key());
            if (std::find(names.begin(), names.end(), it.key()) == names.end()) {
                std::string known;
                for (const auto& n : names) known += (known.empty() ? "\"" : ", \"") + n + "\"";
                at.fail("a " + block_name(d.block) + " block " +
                        (names.empty() ? std::string("has no weights") : "takes weights " + known));
            }
            wr.allow({it.key()});
            ObjectReader nr(it.value(), at);
            nr.declare({"npy"});
            nr.finish();
            const auto path = nr.string("npy");
            if (!path) nr.missing("npy", " (expected {\"npy\": \"path\"})");
            const std::filesystem::path full =
                std::filesystem::path(*path).is_absolute() ? std::filesystem::path(*path) : base_dir / *path;
            xt::xarray<double> v;
            try {
                v = read_npy(full).values;
            } catch (const InputError& e) {
                nr.at("npy").fail(e.what());
            }
            // What can be checked before the data gives D: the layer axis, the rank, H.
            const Shape s(v.shape().begin(), v.shape().end());
            const bool w2 = it.key() == "w2";
            const std::string want = it.key() == "w" ? "(layers, D, D)" : w2 ? "(layers, hidden, D)" : "(layers, D, hidden)";
            std::string why;
            if (s.size() != 3 || s[0] != d.layers) why = "the layer axis first";
            else if (d.block == BlockKind::ffn && s[w2 ? 1 : 2] != d.hidden) why = "hidden = " + std::to_string(d.hidden);
            else if (it.key() == "w" && s[1] != s[2]) why = "a square D x D per layer";
            const std::size_t D = s.size() == 3 ? s[w2 ? 2 : 1] : 0;
            if (why.empty() && features && D != features) why = "the same D as the other weight (" + std::to_string(features) + ")";
            if (!why.empty())
                nr.at("npy").fail("weight \"" + it.key() + "\" must have shape " + want + " with layers = " +
                                  std::to_string(d.layers) + " and " + why + ", but " + plain_or_quoted(*path) + " has shape " +
                                  format_shape(s));
            features = D;
            d.given.push_back({it.key(), std::move(v)});
        }
    }
    r.finish();
    return d;
}

JsonLocation stack_location(const std::string& file, const StackError& e) {
    JsonLocation loc = JsonLocation{file, "/stacks"}.child(e.stack());
    if (e.key().empty()) return loc;
    std::string k = e.key();
    for (std::size_t p; (p = k.find('/')) != std::string::npos; k = k.substr(p + 1)) loc = loc.child(k.substr(0, p));
    return loc.child(k);
}

}  // namespace normlab
