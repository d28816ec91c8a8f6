#pragma once
// Output buffers that outlive one analysis: a sweep runs the same analyses at every point,
// and a fresh output buffer costs a page fault per 4 KiB on first write (about 13 us here,
// more than normalising the page). The run pipeline installs a pool for the whole run;
// every forward step an analysis takes draws its buffers from it and gives them back when
// the step is destroyed, the way batches are taken over from point to point.
#include <cstddef>
#include <vector>

#include "norm/presets.hpp"

namespace normlab {

/// Free step results, kept for reuse by steps on inputs of the same size and dtype.
class OutputPool {
public:
    /// A free result whose output matches x's element count and dtype (its buffers are
    /// reused by NormLayer::forward), or an empty one. On a miss, the free results given
    /// back before the current sweep point are dropped first: a point whose shapes changed
    /// would otherwise allocate its outputs while its predecessors' stayed held (a sweep over
    /// six shapes of a 24 MiB batch peaked at 176 MiB, against 82 MiB with them dropped), and results of the current point,
    /// whose sizes may alternate between data entries, stay.
    StepResult take(const Tensor& x);
    /// Keeps s for a later take(), marked with the current point; the oldest free result is
    /// dropped beyond kKeep, so the pool holds no more than the few outputs an analysis has
    /// alive at once.
    void give(StepResult&& s);
    /// Starts the next sweep point (the run pipeline calls it before each point).
    void next_point() { ++m_point; }
    /// Free results held now (for tests).
    std::size_t size() const { return m_free.size(); }
    static constexpr std::size_t kKeep = 4;

private:
    struct Free {
        StepResult result;
        std::size_t point;  ///< the point during which it was given back
    };
    std::vector<Free> m_free;
    std::size_t m_point = 0;
};

/// Makes `pool` the one forward steps draw from, on this thread, until the scope ends.
class OutputPoolScope {
public:
    explicit OutputPoolScope(OutputPool& pool);
    ~OutputPoolScope();
    OutputPoolScope(const OutputPoolScope&) = delete;
    OutputPoolScope& operator=(const OutputPoolScope&) = delete;

private:
    OutputPool* m_previous;
};

/// The pool installed on this thread, or nullptr (outside a run: steps are then plain).
OutputPool* current_output_pool();

/// A step result that gives its buffers back to the current pool when destroyed. Hold it
/// as a Step (or auto) for that to happen; converting to a plain StepResult moves the
/// buffers out of the pool's reach.
class Step : public StepResult {
public:
    Step() = default;
    Step(Step&&) = default;
    Step& operator=(Step&&) = default;
    ~Step();
};

}  // namespace normlab
