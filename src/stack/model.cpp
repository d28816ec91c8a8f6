#include "stack/model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xnoalias.hpp>

#include "stack/buffers.hpp"
#include "stack/kernels.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace sk = stack_kernels;
using stack_buffers::kNaN;
using stack_buffers::shaped;
using stack_buffers::take;
using stack_buffers::values;

namespace {

std::string stack_msg(const StackDef& d, const std::string& data, const std::string& what) {
    return "stack \"" + d.name + "\" on data \"" + data + "\": " + what;
}

}  // namespace

namespace {

std::size_t sat_mul(std::size_t a, std::size_t b) {
    return a && b > static_cast<std::size_t>(-1) / a ? static_cast<std::size_t>(-1) : a * b;
}
std::size_t sat_add(std::size_t a, std::size_t b) {
    return b > static_cast<std::size_t>(-1) - a ? static_cast<std::size_t>(-1) : a + b;
}

}  // namespace

std::size_t stack_memory_bytes(const StackDef& def, const Shape& data_shape, DType dtype, bool keep_grads) {
    if (data_shape.empty()) return 0;
    const std::size_t e = dtype == DType::float64 ? 8 : 4, D = data_shape.back(), L = def.layers, H = def.hidden;
    std::size_t n = 1;  // R * D
    for (std::size_t d : data_shape) n = sat_mul(n, d);
    const std::size_t rows = D ? n / D : 0, rh = sat_mul(rows, H);
    std::size_t weights = 0;
    for (const auto& slot : weight_slots(def, D)) weights = sat_add(weights, sat_mul(sat_mul(slot.shape[0], slot.shape[1]), slot.shape[2]));
    std::size_t given = 0;
    for (const auto& g : def.given) given = sat_add(given, sat_mul(g.second.size(), 8));
    // per block: x_l, N's output, N2's output (sandwich), s (post, deepnorm, sandwich), a (ffn),
    // and six double statistics per row of each norm (a generous bound for every norm type)
    const bool norm = def.has_norm(), sandwich = def.placement == Placement::sandwich;
    const bool has_s = sandwich || def.placement == Placement::post || def.placement == Placement::deepnorm;
    std::size_t per_block = sat_mul(n, e * (1 + (norm ? 1 : 0) + (sandwich ? 1 : 0) + (has_s ? 1 : 0)));
    if (def.block == BlockKind::ffn) per_block = sat_add(per_block, sat_mul(rh, e));
    if (norm) per_block = sat_add(per_block, sat_mul(rows, 6 * 8 * (sandwich ? 2 : 1)));
    std::size_t total = sat_add(sat_mul(weights, e), given);
    total = sat_add(total, sat_mul(sat_add(L, 1), per_block));
    // backward buffers: five (R, D) in the dtype plus the norms' double dy and dx, two (R, H), one dW
    total = sat_add(total, sat_add(sat_mul(n, 5 * e + 16), sat_add(sat_mul(rh, 2 * e), sat_mul(sat_mul(D, std::max(D, H)), e))));
    if (keep_grads) total = sat_add(total, sat_add(sat_mul(sat_add(L, 1), sat_mul(n, e)), sat_mul(weights, e)));
    return total;
}

void Stack::check(const StackDef& def, const Shape& data_shape, std::size_t channel_axis, DType dtype,
                  const std::string& data_name) {
    auto fail = [&](const std::string& key, const std::string& what) {
        throw StackError(def.name, key, stack_msg(def, data_name, what), data_name);
    };
    if (dtype != DType::float32 && dtype != DType::float64)
        throw StackError(def.name, "",
                         stack_msg(def, data_name,
                                   "stacks run in float32 or float64, but the run's dtype is " + dtype_name(dtype) +
                                       " (a stack's products go through OpenBLAS, which has no half-precision matrix "
                                       "product)"),
                         {}, true);
    const std::size_t rank = data_shape.size();
    if (rank != 2 && rank != 3)
        fail("", "expected data of shape (N, D) or (B, T, D) with the features on the last axis, but got shape " +
                     format_shape(data_shape));
    if (channel_axis != rank - 1)
        fail("", "the features must be the data's last axis, but the data's channel axis is " +
                     std::to_string(channel_axis) + " of shape " + format_shape(data_shape) +
                     " (give the data \"channel_axis\": -1)");
    if (num_elements(data_shape) == 0) fail("", "data of shape " + format_shape(data_shape) + " is empty");
    if (def.layers < 1) fail("layers", "layers must be >= 1");
    if (def.block == BlockKind::ffn && def.hidden == 0) fail("hidden", "an ffn block needs hidden >= 1");
    for (const auto& slot : weight_slots(def, data_shape.back()))
        for (const auto& [name, values] : def.given)
            if (name == slot.name && Shape(values.shape().begin(), values.shape().end()) != slot.shape)
                fail("weights/" + name, "weight \"" + name + "\" must have shape " + format_shape(slot.shape) +
                                            " (layers, fan_in, fan_out) for data of shape " + format_shape(data_shape) +
                                            ", but the given array has " +
                                            format_shape(Shape(values.shape().begin(), values.shape().end())));
    if (!def.has_norm()) return;
    try {
        NormLayer(def.norm, dtype).resolve(data_shape, rank - 1, data_name);
    } catch (const NormError& e) {
        // The fault is the norm's key, but the norm may be used by this stack alone: say so.
        throw NormError(e.norm(), e.key(), "stack \"" + def.name + "\": " + e.what(), e.data(), e.reason(),
                        e.related_keys());
    }
}

Stack::Stack(const StackDef& def, StackWeights weights, const Shape& data_shape, DType dtype,
             const std::string& data_name)
    : m_def(def), m_weights(std::move(weights)), m_shape(data_shape), m_dtype(dtype), m_data_name(data_name) {
    check(def, data_shape, data_shape.size() - 1, dtype, data_name);
    m_features = data_shape.back();
    m_rows = num_elements(data_shape) / m_features;
    m_hidden = m_def.hidden;
    for (const auto& slot : weight_slots(m_def, m_features)) {
        const Tensor& t = slot.name == "w" ? m_weights.w : slot.name == "w1" ? m_weights.w1 : m_weights.w2;
        if (t.dtype != dtype || t.shape() != slot.shape)
            throw StackError(m_def.name, "weights/" + slot.name,
                             stack_msg(m_def, data_name, "weight \"" + slot.name + "\" must have shape " +
                                                             format_shape(slot.shape) + " (layers, fan_in, fan_out) in " +
                                                             dtype_name(dtype) + ", but has " + format_shape(t.shape()) +
                                                             " in " + dtype_name(t.dtype)),
                             data_name);
    }

    if (m_def.has_norm()) {
        // Every block's N (and N2, and the final norm) is its own instance of the same def.
        NormLayer proto(m_def.norm, dtype);
        Resolution r = proto.resolve(data_shape, data_shape.size() - 1, data_name);
        // The view keeps the data's leading (row) axes and may split the features (GroupNorm),
        // so the statistics lie within rows when the view's axes before the first reduced one
        // span all the rows.
        const Axes& red = r.spec.reduction_axes;
        const std::size_t first = red.empty() ? r.view_shape.size() : *std::min_element(red.begin(), red.end());
        std::size_t lead = 1;
        for (std::size_t a = 0; a < first; ++a) lead *= r.view_shape[a];
        m_stats_within_rows = lead >= m_rows;
        const Shape vps = select_dims(r.view_shape, r.spec.param_axes);
        if (r.has_weight) {
            m_norm_weight = m_def.norm.weight ? materialize(*m_def.norm.weight, r.param_shape, "weight", m_def.norm.name)
                                              : xt::xarray<double>(xt::ones<double>(r.param_shape));
            m_norm_weight.reshape(vps);
        }
        if (r.has_bias) {
            m_norm_bias = m_def.norm.bias ? materialize(*m_def.norm.bias, r.param_shape, "bias", m_def.norm.name)
                                          : xt::xarray<double>(xt::zeros<double>(r.param_shape));
            m_norm_bias.reshape(vps);
        }
        m_norms.assign(m_def.layers, proto);
        if (m_def.placement == Placement::sandwich) m_norms2.assign(m_def.layers, proto);
        if (m_def.placement == Placement::pre && m_def.final_norm) m_final.assign(1, proto);
    }
    m_row_mask.assign(m_rows, 1);
}

void Stack::set_mask(const xt::xarray<std::uint8_t>& mask) {
    m_norm_mask = mask;
    m_row_mask.assign(m_rows, 1);
    if (mask.size() == 0) return;
    // A row is real when its first feature is: a padding mask has the data's rank with 1 at
    // the feature axis (or the full shape, constant along features for padding).
    Shape shape = m_shape;
    const std::size_t last = mask.shape().back();
    shape.back() = last;
    xt::xarray<std::uint8_t> b = xt::broadcast(mask, shape);
    for (std::size_t r = 0; r < m_rows; ++r) m_row_mask[r] = b.data()[r * last] ? 1 : 0;
    if (!m_stats_within_rows) return;
    // A row without a real position has no statistics of its own under the mask: it takes
    // all its positions instead. Real rows keep their mask.
    for (std::size_t r = 0; r < m_rows; ++r) {
        std::uint8_t* row = b.data() + r * last;
        if (std::all_of(row, row + last, [](std::uint8_t v) { return v == 0; })) std::fill(row, row + last, 1);
    }
    m_norm_mask = b;
}

void Stack::run_norm(NormLayer& layer, const Tensor& in, StepResult& out) {
    layer.forward(in, m_shape.size() - 1, m_data_name, m_norm_mask.size() ? &m_norm_mask : nullptr, out);
}

template <class T>
void Stack::branch(std::size_t l, const Tensor& z, BlockTrace& bt, Tensor& f) {
    const std::size_t R = m_rows, D = m_features, H = m_hidden;
    const T* zp = values<T>(z).data();
    // Each product's new array replaces the buffer it is moved into (kernels.hpp).
    switch (m_def.block) {
        case BlockKind::linear: {
            const T* w = values<T>(m_weights.w).data() + l * D * D;
            take<T>(f, sk::matmul<T>(zp, R, D, false, w, D, D, false), m_shape, m_dtype);
            break;
        }
        case BlockKind::ffn: {
            const T* w1 = values<T>(m_weights.w1).data() + l * D * H;
            const T* w2 = values<T>(m_weights.w2).data() + l * H * D;
            take<T>(bt.a, sk::matmul<T>(zp, R, D, false, w1, D, H, false), {R, H}, m_dtype);
            T* h = shaped<T>(m_h, {R, H}, m_dtype);
            sk::activate<T>(static_cast<int>(m_def.activation), values<T>(bt.a).data(), h, R * H);
            take<T>(f, sk::matmul<T>(h, R, H, false, w2, H, D, false), m_shape, m_dtype);
            break;
        }
        case BlockKind::identity: {
            T* fp = shaped<T>(f, m_shape, m_dtype);
            std::copy(zp, zp + R * D, fp);
            break;
        }
    }
    bt.branch_rms = sk::rms_rows<T>(values<T>(f).data(), R, D, m_row_mask.data());
}

template <class T>
void Stack::forward_impl(const Tensor& x, StackTrace& trace) {
    const std::size_t L = m_def.layers, R = m_rows, D = m_features, n = R * D;
    const unsigned char* rm = m_row_mask.data();
    trace.x.resize(L + 1);
    trace.blocks.resize(L);
    xt::noalias(values<T>(trace.x[0])) = values<T>(x);
    trace.x[0].dtype = m_dtype;
    const T alpha = static_cast<T>(m_def.residual_scale());
    for (std::size_t l = 0; l < L; ++l) {
        const Tensor& xin = trace.x[l];
        Tensor& xout = trace.x[l + 1];
        BlockTrace& bt = trace.blocks[l];
        const T* xp = values<T>(xin).data();
        bt.branch_rms = kNaN;
        bt.norm_in_rms = kNaN;
        switch (m_def.placement) {
            case Placement::pre: {
                bt.norm_in_rms = sk::rms_rows<T>(xp, R, D, rm);
                run_norm(m_norms[l], xin, bt.norm);
                branch<T>(l, bt.norm.fwd.y, bt, m_f);
                sk::residual<T>(xp, values<T>(m_f).data(), T(1), shaped<T>(xout, m_shape, m_dtype), n);
                break;
            }
            case Placement::post:
            case Placement::deepnorm: {
                branch<T>(l, xin, bt, bt.s);
                T* s = values<T>(bt.s).data();
                sk::residual<T>(xp, s, alpha, s, n);
                bt.norm_in_rms = sk::rms_rows<T>(s, R, D, rm);
                run_norm(m_norms[l], bt.s, bt.norm);
                std::swap(xout, bt.norm.fwd.y);  // x_l is N's output; the old buffer is reused next time
                break;
            }
            case Placement::sandwich: {
                bt.norm_in_rms = sk::rms_rows<T>(xp, R, D, rm);
                run_norm(m_norms[l], xin, bt.norm);
                branch<T>(l, bt.norm.fwd.y, bt, bt.s);
                run_norm(m_norms2[l], bt.s, bt.norm2);
                sk::residual<T>(xp, values<T>(bt.norm2.fwd.y).data(), T(1), shaped<T>(xout, m_shape, m_dtype), n);
                break;
            }
            case Placement::none: {
                branch<T>(l, xin, bt, m_f);
                sk::residual<T>(xp, values<T>(m_f).data(), T(1), shaped<T>(xout, m_shape, m_dtype), n);
                break;
            }
            case Placement::norm_only:
                bt.norm_in_rms = sk::rms_rows<T>(xp, R, D, rm);
                run_norm(m_norms[l], xin, bt.norm);
                std::swap(xout, bt.norm.fwd.y);
                break;
        }
    }
    trace.has_final = !m_final.empty();
    if (trace.has_final) run_norm(m_final[0], trace.x[L], trace.final_norm);
}

void Stack::forward(const Tensor& x, const xt::xarray<std::uint8_t>& mask, StackTrace& trace) {
    if (x.shape() != m_shape || x.dtype != m_dtype)
        throw InputError(stack_msg(m_def, m_data_name, "expected input of shape " + format_shape(m_shape) +
                                                           " in " + dtype_name(m_dtype) + ", but got " +
                                                           format_shape(x.shape()) + " in " + dtype_name(x.dtype)));
    set_mask(mask);
    stack_buffers::SingleThreadedNorms one_thread;
    if (m_dtype == DType::float64) forward_impl<double>(x, trace);
    else forward_impl<float>(x, trace);
}

Stack Stack::eval_copy() const {
    Stack s = *this;
    const DType dtype = m_dtype;
    auto freeze = [dtype](std::vector<NormLayer>& layers) {
        for (auto& layer : layers) {
            NormDef d = layer.def();
            d.training = false;
            if (layer.has_running_stats() && layer.running_mean().size() > 0) {
                ParamInit m;
                m.kind = ParamInit::Kind::values;
                m.values = layer.running_mean();
                ParamInit v = m;
                v.values = layer.running_var();
                d.running_mean = m;
                d.running_var = v;
            }
            layer = NormLayer(d, dtype);
        }
    };
    freeze(s.m_norms);
    freeze(s.m_norms2);
    freeze(s.m_final);
    return s;
}

}  // namespace normlab
