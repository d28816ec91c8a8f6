#include "norm/strided.hpp"

#include <algorithm>

#include "tensor/errors.hpp"

namespace normlab {

std::optional<std::vector<std::size_t>> sized_axes(const Shape& xs) {
    std::vector<std::size_t> dims;
    for (std::size_t d = 0; d < xs.size(); ++d) {
        if (xs[d] == 0) return std::nullopt;
        if (xs[d] > 1) dims.push_back(d);
    }
    return dims;
}

Strides broadcast_strides(const Shape& xs, const Shape& s) {
    Strides out(xs.size(), 0);
    std::size_t stride = 1;
    for (std::size_t d = s.size(); d-- > 0;) {
        out[d] = s[d] == 1 ? 0 : stride;
        stride *= s[d];
    }
    return out;
}

Strides param_strides(const Shape& xs, const Axes& axes) {
    Strides out(xs.size(), 0);
    std::size_t stride = 1;
    for (std::size_t i = axes.size(); i-- > 0;) {
        out[axes[i]] = stride;
        stride *= xs[axes[i]];
    }
    return out;
}

Strides mask_strides(const Shape& xs, const xt::xarray<std::uint8_t>& m) {
    Shape ms(m.shape().begin(), m.shape().end());
    bool ok = ms.size() == xs.size();
    for (std::size_t d = 0; ok && d < xs.size(); ++d) ok = ms[d] == xs[d] || ms[d] == 1;
    if (!ok)
        throw InputError("mask of shape " + format_shape(ms) +
                         " does not broadcast to input of shape " + format_shape(xs));
    return broadcast_strides(xs, ms);
}

void check_operand_shape(const xt::xarray<double>& a, const Shape& expected, const char* what) {
    Shape got(a.shape().begin(), a.shape().end());
    if (got != expected)
        throw InputError(std::string(what) + ": expected shape " + format_shape(expected) +
                         ", but got " + format_shape(got));
}

Walk::Walk(const Shape& xs, const Strides& sa, const Strides& sb, std::size_t chunk_elems) {
    // Coalesce from the innermost axis outwards: merge an axis into the one inside it where
    // both operands stay linear across them; size-1 axes vanish.
    for (std::size_t d = xs.size(); d-- > 0;) {
        if (xs[d] == 1) continue;
        if (!m_n.empty() && m_da.back() * m_n.back() == sa[d] && m_db.back() * m_n.back() == sb[d]) {
            m_n.back() *= xs[d];
            continue;
        }
        m_n.push_back(xs[d]);
        m_da.push_back(sa[d]);
        m_db.push_back(sb[d]);
    }
    if (std::find(xs.begin(), xs.end(), std::size_t{0}) != xs.end()) return;  // empty: no chunks
    if (m_n.empty()) {  // a single element
        m_n = {1};
        m_da = {0};
        m_db = {0};
    }
    m_runs = 1;
    for (std::size_t k = 1; k < m_n.size(); ++k) m_runs *= m_n[k];
    const std::size_t n0 = m_n[0];
    chunk_elems = std::max<std::size_t>(1, chunk_elems);
    if (n0 > chunk_elems) {
        m_pieces = (n0 + chunk_elems - 1) / chunk_elems;
        m_piece_len = (n0 + m_pieces - 1) / m_pieces;  // equal pieces
        m_chunks = m_runs * m_pieces;
    } else {
        m_runs_per_chunk = chunk_elems / n0;
        m_chunks = (m_runs + m_runs_per_chunk - 1) / m_runs_per_chunk;
    }
}

void Walk::seek(std::size_t run, std::vector<std::size_t>& idx, std::size_t& a, std::size_t& b) const {
    idx.assign(m_n.size() > 1 ? m_n.size() - 1 : 0, 0);
    a = b = 0;
    for (std::size_t k = 1; k < m_n.size(); ++k) {
        idx[k - 1] = run % m_n[k];
        run /= m_n[k];
        a += idx[k - 1] * m_da[k];
        b += idx[k - 1] * m_db[k];
    }
}

}  // namespace normlab
