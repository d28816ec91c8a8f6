#include "analysis/output_pool.hpp"

#include <algorithm>
#include <utility>

namespace normlab {

namespace {

thread_local OutputPool* g_pool = nullptr;

// Values an output holds in storage (0 once moved from, whatever its shape says).
std::size_t held(const Tensor& t) { return t.dtype == DType::float64 ? t.f64.storage().size() : t.f32.storage().size(); }

}  // namespace

StepResult OutputPool::take(const Tensor& x) {
    for (auto it = m_free.begin(); it != m_free.end(); ++it)
        if (it->result.fwd.y.dtype == x.dtype && held(it->result.fwd.y) == x.size()) {
            StepResult s = std::move(it->result);
            m_free.erase(it);
            return s;
        }
    // Freed before the caller allocates, so that the old and the new outputs are not held
    // at once.
    m_free.erase(std::remove_if(m_free.begin(), m_free.end(), [&](const Free& f) { return f.point < m_point; }),
                 m_free.end());
    return {};
}

void OutputPool::give(StepResult&& s) {
    if (held(s.fwd.y) <= 1) return;  // moved from, or too small to matter
    m_free.push_back(Free{std::move(s), m_point});
    if (m_free.size() > kKeep) m_free.erase(m_free.begin());
}

OutputPoolScope::OutputPoolScope(OutputPool& pool) : m_previous(g_pool) { g_pool = &pool; }
OutputPoolScope::~OutputPoolScope() { g_pool = m_previous; }

OutputPool* current_output_pool() { return g_pool; }

Step::~Step() {
    if (g_pool) g_pool->give(std::move(static_cast<StepResult&>(*this)));
}

}  // namespace normlab
