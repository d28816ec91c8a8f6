// The stack's backward pass: reverse-mode through every block (Stack::backward in model.hpp).
//
// Per block l, with g = d loss / d x_l arriving from above (alpha = 1 except deepnorm):
//   pre       x_l = x + F(N(x))        d/dx = g + N'^T (F'^T g)
//   post      x_l = N(alpha x + F(x))  s' = N'^T g;   d/dx = alpha s' + F'^T s'
//   sandwich  x_l = x + N2(F(N(x)))    d/dx = g + N'^T (F'^T (N2'^T g))
//   none      x_l = x + F(x)           d/dx = g + F'^T g
//   norm_only x_l = N(x)               d/dx = N'^T g
// and through the branch, with dF its upstream gradient and z its input:
//   linear  F = z W:            dW = z^T dF,  dz = dF W^T
//   ffn     F = act(z W1) W2:   dW2 = h^T dF, dh = (dF W2^T) * act'(a), dW1 = z^T dh, dz = dh W1^T
// (a = z W1, h = act(a), recomputed here from the kept a rather than kept: one elementwise
// pass instead of rows x H more values per layer held through the whole pass).
#include <algorithm>
#include <cmath>
#include <limits>

#include "stack/buffers.hpp"
#include "stack/kernels.hpp"
#include "stack/model.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace sk = stack_kernels;
using stack_buffers::kNaN;
using stack_buffers::shaped;
using stack_buffers::take;
using stack_buffers::values;

namespace {

// (L, *shape) zeros when `keep`, shape {0} otherwise.
xt::xarray<double> per_layer(bool keep, std::size_t layers, const Shape& shape) {
    if (!keep) return xt::xarray<double>::from_shape(Shape{0});
    Shape s{layers};
    s.insert(s.end(), shape.begin(), shape.end());
    return xt::zeros<double>(s);
}

}  // namespace

template <class T>
const Tensor& Stack::norm_backward(const Tensor& x, const StepResult& st, const T* dy, double& gamma_norm,
                                   xt::xarray<double>* dgamma, xt::xarray<double>* dbeta, std::size_t l) {
    const Resolution& r = st.res;
    const std::size_t n = m_rows * m_features;
    if (m_dyd.size() != n) m_dyd.resize(m_shape);
    for (std::size_t i = 0; i < n; ++i) m_dyd.data()[i] = static_cast<double>(dy[i]);
    ForwardInputs in;
    in.weight = r.has_weight ? &m_norm_weight : nullptr;
    in.bias = r.has_bias ? &m_norm_bias : nullptr;
    xt::xarray<std::uint8_t> mv;
    if (m_def.norm.mask && m_norm_mask.size() > 0) {
        mv = view_mask(m_norm_mask, r);
        in.mask = &mv;
    }
    if (!r.use_batch_stats) {  // inference: the running statistics are constants
        in.given_mean = &st.fwd.mean;
        in.given_var = &st.fwd.var;
    }
    normlab::backward(x, r.view_shape, r.spec, in, st.fwd, m_dyd, m_nb);
    m_nb.dx = reshaped(std::move(m_nb.dx), m_shape);
    gamma_norm = r.has_weight ? sk::frobenius<double>(m_nb.dweight.data(), m_nb.dweight.size()) : kNaN;
    const std::size_t pn = num_elements(r.param_shape);
    if (dgamma && dgamma->size() && r.has_weight)
        std::copy(m_nb.dweight.begin(), m_nb.dweight.end(), dgamma->data() + l * pn);
    if (dbeta && dbeta->size() && r.has_bias)
        std::copy(m_nb.dbias.begin(), m_nb.dbias.end(), dbeta->data() + l * pn);
    return m_nb.dx;
}

template <class T>
void Stack::branch_backward(std::size_t l, const Tensor& z, const BlockTrace& bt, const T* df, Tensor& dz,
                            StackGrads& g, bool keep) {
    const std::size_t R = m_rows, D = m_features, H = m_hidden;
    const T* zp = values<T>(z).data();
    // Each product's new array replaces the buffer it is moved into (kernels.hpp); a weight
    // gradient is summarised, and copied into its layer's slot only when kept.
    auto weight_grad = [&](const xt::xarray<T>& dw, Tensor& kept, double& norm) {
        norm = sk::frobenius<T>(dw.data(), dw.size());
        if (keep) std::copy(dw.begin(), dw.end(), values<T>(kept).data() + l * dw.size());
    };
    switch (m_def.block) {
        case BlockKind::linear: {
            const T* w = values<T>(m_weights.w).data() + l * D * D;
            weight_grad(sk::matmul<T>(zp, R, D, true, df, R, D, false), g.dw, g.grad_w_norm[l]);
            take<T>(dz, sk::matmul<T>(df, R, D, false, w, D, D, true), m_shape, m_dtype);
            break;
        }
        case BlockKind::ffn: {
            const T* a = values<T>(bt.a).data();
            const T* w1 = values<T>(m_weights.w1).data() + l * D * H;
            const T* w2 = values<T>(m_weights.w2).data() + l * H * D;
            T* h = shaped<T>(m_h, {R, H}, m_dtype);
            sk::activate<T>(static_cast<int>(m_def.activation), a, h, R * H);
            weight_grad(sk::matmul<T>(h, R, H, true, df, R, D, false), g.dw2, g.grad_w_norm[l]);
            take<T>(m_dh, sk::matmul<T>(df, R, D, false, w2, H, D, true), {R, H}, m_dtype);
            T* dh = values<T>(m_dh).data();
            sk::activate_backward<T>(static_cast<int>(m_def.activation), a, dh, R * H);
            weight_grad(sk::matmul<T>(zp, R, D, true, dh, R, H, false), g.dw1, g.grad_w1_norm[l]);
            take<T>(dz, sk::matmul<T>(dh, R, H, false, w1, D, H, true), m_shape, m_dtype);
            break;
        }
        case BlockKind::identity: {
            T* dzp = shaped<T>(dz, m_shape, m_dtype);
            std::copy(df, df + R * D, dzp);
            break;
        }
    }
}

template <class T>
void Stack::backward_impl(const StackTrace& tr, const Tensor& dy, StackGrads& g, const StackGradOptions& opts) {
    const std::size_t L = m_def.layers, R = m_rows, D = m_features, H = m_hidden, n = R * D;
    const unsigned char* rm = m_row_mask.data();
    g.grad_x_rms.assign(L + 1, kNaN);
    g.grad_w_norm.assign(L, kNaN);
    g.grad_w1_norm.assign(L, kNaN);
    g.grad_gamma_norm.assign(L, kNaN);
    g.grad_gamma2_norm.assign(L, kNaN);
    g.dx.resize(opts.keep_dx ? L + 1 : 0);
    const bool keep = opts.keep_params;
    auto zeros = [&](Tensor& t, const Shape& s, bool want) {
        if (!want) {
            t = Tensor{};
            return;
        }
        T* p = shaped<T>(t, s, m_dtype);
        std::fill(p, p + num_elements(s), T(0));
    };
    zeros(g.dw, {L, D, D}, keep && m_def.block == BlockKind::linear && m_def.placement != Placement::norm_only);
    zeros(g.dw1, {L, D, H}, keep && m_def.block == BlockKind::ffn && m_def.placement != Placement::norm_only);
    zeros(g.dw2, {L, H, D}, keep && m_def.block == BlockKind::ffn && m_def.placement != Placement::norm_only);
    Shape ps;
    bool has_w = false, has_b = false;
    if (m_def.has_norm()) {
        const Resolution& r = tr.blocks.front().norm.res;
        ps = r.param_shape;
        has_w = r.has_weight;
        has_b = r.has_bias;
    }
    const bool sandwich = m_def.placement == Placement::sandwich;
    g.dgamma = per_layer(keep && has_w, L, ps);
    g.dbeta = per_layer(keep && has_b, L, ps);
    g.dgamma2 = per_layer(keep && has_w && sandwich, L, ps);
    g.dbeta2 = per_layer(keep && has_b && sandwich, L, ps);
    g.dgamma_final = per_layer(keep && has_w && tr.has_final, 1, ps);
    g.dbeta_final = per_layer(keep && has_b && tr.has_final, 1, ps);

    T* gp = shaped<T>(m_g, m_shape, m_dtype);  // d loss / d x_l
    T* gn = shaped<T>(m_gn, m_shape, m_dtype); // d loss / d x_{l-1}
    const T* dyp = values<T>(dy).data();
    if (tr.has_final) {
        double unused;
        const Tensor& dx = norm_backward<T>(tr.x[L], tr.final_norm, dyp, unused, &g.dgamma_final, &g.dbeta_final, 0);
        std::copy(values<T>(dx).begin(), values<T>(dx).end(), gp);
    } else {
        std::copy(dyp, dyp + n, gp);
    }
    const T alpha = static_cast<T>(m_def.residual_scale());
    for (std::size_t l = L; l-- > 0;) {
        g.grad_x_rms[l + 1] = sk::rms_rows<T>(gp, R, D, rm);
        if (opts.keep_dx) g.dx[l + 1] = m_g;
        const Tensor& xin = tr.x[l];
        const BlockTrace& bt = tr.blocks[l];
        double& gn_norm = g.grad_gamma_norm[l];
        switch (m_def.placement) {
            case Placement::pre: {
                branch_backward<T>(l, bt.norm.fwd.y, bt, gp, m_dz, g, keep);
                const Tensor& dx = norm_backward<T>(xin, bt.norm, values<T>(m_dz).data(), gn_norm, &g.dgamma, &g.dbeta, l);
                sk::residual<T>(gp, values<T>(dx).data(), T(1), gn, n);
                break;
            }
            case Placement::post:
            case Placement::deepnorm: {
                const Tensor& ds = norm_backward<T>(bt.s, bt.norm, gp, gn_norm, &g.dgamma, &g.dbeta, l);
                const T* dsp = values<T>(ds).data();
                branch_backward<T>(l, xin, bt, dsp, m_dz, g, keep);
                sk::residual<T>(dsp, values<T>(m_dz).data(), alpha, gn, n);
                break;
            }
            case Placement::sandwich: {
                const Tensor& df =
                    norm_backward<T>(bt.s, bt.norm2, gp, g.grad_gamma2_norm[l], &g.dgamma2, &g.dbeta2, l);
                T* dfp = shaped<T>(m_f, m_shape, m_dtype);
                std::copy(values<T>(df).begin(), values<T>(df).end(), dfp);
                branch_backward<T>(l, bt.norm.fwd.y, bt, dfp, m_dz, g, keep);
                const Tensor& dx = norm_backward<T>(xin, bt.norm, values<T>(m_dz).data(), gn_norm, &g.dgamma, &g.dbeta, l);
                sk::residual<T>(gp, values<T>(dx).data(), T(1), gn, n);
                break;
            }
            case Placement::none:
                branch_backward<T>(l, xin, bt, gp, m_dz, g, keep);
                sk::residual<T>(gp, values<T>(m_dz).data(), T(1), gn, n);
                break;
            case Placement::norm_only: {
                const Tensor& dx = norm_backward<T>(xin, bt.norm, gp, gn_norm, &g.dgamma, &g.dbeta, l);
                std::copy(values<T>(dx).begin(), values<T>(dx).end(), gn);
                break;
            }
        }
        std::swap(m_g, m_gn);
        gp = values<T>(m_g).data();
        gn = values<T>(m_gn).data();
    }
    g.grad_x_rms[0] = sk::rms_rows<T>(gp, R, D, rm);
    if (opts.keep_dx) g.dx[0] = m_g;
}

void Stack::backward(const StackTrace& trace, const Tensor& dy, StackGrads& grads, const StackGradOptions& opts) {
    if (trace.x.size() != m_def.layers + 1 || trace.blocks.size() != m_def.layers)
        throw InputError("stack \"" + m_def.name + "\": backward needs the trace of a forward pass of this stack");
    if (dy.shape() != m_shape || dy.dtype != m_dtype)
        throw InputError("stack \"" + m_def.name + "\": expected d loss / d y of shape " + format_shape(m_shape) +
                         " in " + dtype_name(m_dtype) + ", but got " + format_shape(dy.shape()) + " in " +
                         dtype_name(dy.dtype));
    stack_buffers::SingleThreadedNorms one_thread;
    if (m_dtype == DType::float64) backward_impl<double>(trace, dy, grads, opts);
    else backward_impl<float>(trace, dy, grads, opts);
}

}  // namespace normlab
