#include "norm/engine.hpp"

#include <cmath>
#include <limits>

#include "norm/strided.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

// Validates a broadcastable mask and returns its strides over x's shape (0 where the mask
// has a dim of 1).
Strides mask_strides(const Shape& xs, const xt::xarray<std::uint8_t>& m) {
    Shape ms(m.shape().begin(), m.shape().end());
    bool ok = ms.size() == xs.size();
    for (std::size_t d = 0; ok && d < xs.size(); ++d) ok = ms[d] == xs[d] || ms[d] == 1;
    if (!ok)
        throw InputError("mask of shape " + format_shape(ms) +
                         " does not broadcast to input of shape " + format_shape(xs));
    return broadcast_strides(xs, ms);
}

void check_shape(const xt::xarray<double>& a, const Shape& expected, const char* what) {
    Shape got(a.shape().begin(), a.shape().end());
    if (got != expected)
        throw InputError(std::string(what) + ": expected shape " + format_shape(expected) +
                         ", but got " + format_shape(got));
}

template <class T>
Moments moments_impl(const T* x, const Shape& xs, const Axes& reduced, bool center,
                     const xt::xarray<std::uint8_t>* mask) {
    Shape ss = keepdims_shape(xs, reduced);
    Strides st = broadcast_strides(xs, ss);
    Strides mt = mask ? mask_strides(xs, *mask) : Strides(xs.size(), 0);
    const std::uint8_t* m = mask ? mask->data() : nullptr;
    Moments out;
    out.mean = xt::zeros<double>(ss);
    out.var = xt::zeros<double>(ss);
    out.count = xt::zeros<double>(ss);
    double* mean = out.mean.data();
    double* var = out.var.data();
    double* count = out.count.data();

    if (m) {
        walk(xs, st, mt, [&](const Run& r) {
            for (std::size_t k = 0; k < r.n; ++k) count[r.a + k * r.da] += m[r.b + k * r.db];
        });
    } else {
        std::size_t n = num_elements(xs) / std::max<std::size_t>(1, out.count.size());
        if (num_elements(xs) == 0) n = 0;
        for (auto& c : out.count) c = static_cast<double>(n);
    }

    // Pass 1: the mean (skipped for RMSNorm, whose "variance" is the mean square about 0).
    if (center) {
        walk(xs, st, mt, [&](const Run& r) {
            const T* xp = x + r.x;
            if (r.da == 0 && !m) {
                double s = 0;
                for (std::size_t k = 0; k < r.n; ++k) s += static_cast<double>(xp[k]);
                mean[r.a] += s;
            } else {
                for (std::size_t k = 0; k < r.n; ++k)
                    mean[r.a + k * r.da] +=
                        m && !m[r.b + k * r.db] ? 0.0 : static_cast<double>(xp[k]);
            }
        });
        for (std::size_t i = 0; i < out.mean.size(); ++i)
            mean[i] = count[i] > 0 ? mean[i] / count[i] : std::numeric_limits<double>::quiet_NaN();
    }

    // Pass 2: mean of squared deviations, formed in double. Two passes instead of
    // E[x^2]-E[x]^2, which cancels catastrophically when |mean| >> std (case B08).
    walk(xs, st, mt, [&](const Run& r) {
        const T* xp = x + r.x;
        if (r.da == 0 && !m) {
            double mu = mean[r.a], s = 0;
            for (std::size_t k = 0; k < r.n; ++k) {
                double d = static_cast<double>(xp[k]) - mu;
                s += d * d;
            }
            var[r.a] += s;
        } else {
            for (std::size_t k = 0; k < r.n; ++k) {
                if (m && !m[r.b + k * r.db]) continue;
                double d = static_cast<double>(xp[k]) - mean[r.a + k * r.da];
                var[r.a + k * r.da] += d * d;
            }
        }
    });
    for (std::size_t i = 0; i < out.var.size(); ++i)
        var[i] = count[i] > 0 ? var[i] / count[i] : std::numeric_limits<double>::quiet_NaN();
    return out;
}

template <class T>
void normalize_impl(const T* x, T* y, const Shape& xs, const Axes& reduced, const NormSpec& spec,
                    const double* mean, const double* rstd, const double* w, const double* b,
                    DType dtype) {
    // Half formats live in float storage; their outputs are rounded once, from double.
    const bool half = dtype == DType::float16 || dtype == DType::bfloat16;
    Shape ss = keepdims_shape(xs, reduced);
    Strides st = broadcast_strides(xs, ss);
    Strides pt = param_strides(xs, spec.param_axes);
    const double off = spec.weight_offset;
    walk(xs, st, pt, [&](const Run& r) {
        for (std::size_t k = 0; k < r.n; ++k) {
            std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
            double v = (static_cast<double>(x[r.x + k]) - mean[s]) * rstd[s];
            if (w) v *= off + w[p];
            if (b) v += b[p];
            y[r.x + k] = static_cast<T>(half ? round_to(dtype, v) : v);
        }
    });
}

}  // namespace

Moments compute_moments(const Tensor& x, const Axes& reduction_axes, bool center,
                        const xt::xarray<std::uint8_t>* mask) {
    Shape xs = x.shape();
    for (auto a : reduction_axes)
        if (a >= xs.size())
            throw InputError("reduction axis " + std::to_string(a) +
                             " out of range for input of shape " + format_shape(xs));
    if (x.dtype == DType::float64)
        return moments_impl(x.f64.data(), xs, reduction_axes, center, mask);
    return moments_impl(x.f32.data(), xs, reduction_axes, center, mask);
}

ForwardResult forward(const Tensor& x, const NormSpec& spec, const ForwardInputs& in) {
    Shape xs = x.shape();
    Shape ss = keepdims_shape(xs, spec.reduction_axes);
    Shape ps = select_dims(xs, spec.param_axes);
    if (in.weight) check_shape(*in.weight, ps, "weight");
    if (in.bias) check_shape(*in.bias, ps, "bias");
    if (in.mask) mask_strides(xs, *in.mask);

    ForwardResult out;
    if (in.given_mean || in.given_var) {
        if (!in.given_mean || !in.given_var)
            throw InputError("given statistics need both mean and var");
        check_shape(*in.given_mean, ss, "mean");
        check_shape(*in.given_var, ss, "var");
        out.mean = *in.given_mean;
        out.var = *in.given_var;
    } else {
        out.batch = compute_moments(x, spec.reduction_axes, spec.center, in.mask);
        out.mean = out.batch.mean;
        out.var = out.batch.var;
        if (spec.variance == VarianceEstimator::unbiased) {
            // Bessel's correction: n/(n-1); n = 1 gives 0/0 = NaN, as torch.var does.
            for (std::size_t i = 0; i < out.var.size(); ++i) {
                double n = out.batch.count.data()[i];
                out.var.data()[i] = out.var.data()[i] * n / (n - 1);
            }
        }
    }
    out.rstd = xt::xarray<double>::from_shape(ss);
    for (std::size_t i = 0; i < out.rstd.size(); ++i) {
        double v = out.var.data()[i];
        out.rstd.data()[i] = spec.eps_placement == EpsPlacement::inside_sqrt
                                 ? 1.0 / std::sqrt(v + spec.eps)
                                 : 1.0 / (std::sqrt(v) + spec.eps);
    }

    const double* w = in.weight ? in.weight->data() : nullptr;
    const double* b = in.bias ? in.bias->data() : nullptr;
    out.y.dtype = x.dtype;
    if (x.dtype == DType::float64) {
        out.y.f64 = xt::xarray<double>::from_shape(xs);
        normalize_impl(x.f64.data(), out.y.f64.data(), xs, spec.reduction_axes, spec,
                       out.mean.data(), out.rstd.data(), w, b, x.dtype);
    } else {
        out.y.f32 = xt::xarray<float>::from_shape(xs);
        normalize_impl(x.f32.data(), out.y.f32.data(), xs, spec.reduction_axes, spec,
                       out.mean.data(), out.rstd.data(), w, b, x.dtype);
    }
    return out;
}

}  // namespace normlab
