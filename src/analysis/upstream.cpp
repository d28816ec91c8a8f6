#include "analysis/upstream.hpp"

#include <cmath>

#include <xtensor/xbroadcast.hpp>

#include "data/npy.hpp"
#include "data/random.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

Upstream read_upstream(ObjectReader& r, const AnalysisSpec& spec) {
    Upstream u;
    u.loc = r.at("upstream");
    u.masked_loc = r.at("masked_loss");
    u.masked_loss = r.boolean("masked_loss", false);
    const Json* j = r.raw("upstream");
    if (!j) {
        if (u.masked_loss) u.label += ", masked loss";
        return u;
    }
    const char* expected = "expected \"normal\", \"ones\", a number or {\"npy\": path}";
    if (j->is_string()) {
        const std::string s = j->get<std::string>();
        if (s == "ones") u.kind = Upstream::Kind::constant, u.value = 1, u.label = "ones";
        else if (s != "normal") u.loc.fail("unknown upstream " + quoted_text(s) + " (" + expected + ")");
    } else if (j->is_number()) {
        u.kind = Upstream::Kind::constant;
        u.value = j->get<double>();
        if (!std::isfinite(u.value)) u.loc.fail("upstream must be finite, but got " + j->dump());
        u.label = format_number(u.value);
    } else if (j->is_object()) {
        ObjectReader o(*j, u.loc);
        o.declare({"npy"});
        o.finish();  // unknown keys first: "nmp" is reported as a misspelling of "npy"
        const auto path = o.string("npy");
        if (!path) o.missing("npy", std::string(" (") + expected + ")");
        const std::filesystem::path p(*path);
        u.kind = Upstream::Kind::npy;
        u.label = *path;
        try {
            u.values = read_npy(p.is_absolute() ? p : spec.base_dir / p).values;
        } catch (const InputError& e) {
            u.loc.child("npy").fail(e.what());
        }
    } else {
        u.loc.fail(std::string(expected) + ", but got " + json_type_name(*j));
    }
    if (u.masked_loss) u.label += ", masked loss";
    return u;
}

void check_upstream(const Upstream& u, const Batch& b, const std::string& what) {
    if (u.masked_loss && b.mask.size() == 0)
        u.masked_loc.fail(what + " on data " + quoted_text(b.name) + ": masked_loss zeroes dy at padded positions, but the data "
                                                           "has no padding mask (lengths or mask on its source)");
    if (u.kind != Upstream::Kind::npy) return;
    const Shape got(u.values.shape().begin(), u.values.shape().end());
    if (got != b.x.shape())
        u.loc.child("npy").fail(what + " on data " + quoted_text(b.name) + ": upstream gradient of shape " + format_shape(got) +
                                ", but the data has shape " + format_shape(b.x.shape()));
}

xt::xarray<double> make_upstream(const Upstream& u, const Batch& b, DType dtype, std::uint64_t seed,
                                 const std::string& what) {
    check_upstream(u, b, what);
    xt::xarray<double> dy;
    switch (u.kind) {
        case Upstream::Kind::npy: dy = u.values; break;
        case Upstream::Kind::constant:
            dy = xt::xarray<double>::from_shape(b.x.shape());
            dy.fill(u.value);
            break;
        case Upstream::Kind::normal: {
            dy = xt::xarray<double>::from_shape(b.x.shape());
            Rng rng(derive_seed(seed, "upstream/" + b.name));
            for (auto& v : dy) v = rng.normal();
            break;
        }
    }
    for (auto& v : dy) v = round_to(dtype, v);
    if (u.masked_loss) {
        const xt::xarray<std::uint8_t> m = xt::broadcast(b.mask, b.x.shape());
        for (std::size_t i = 0; i < dy.size(); ++i)
            if (!m.data()[i]) dy.data()[i] = 0;
    }
    return dy;
}

}  // namespace normlab
