#pragma once
// `normlab bench`: forward-pass throughput of the engine against a plain copy of the same
// bytes, measured side by side in one process.
#include <optional>
#include <string>
#include <vector>

namespace normlab {

/// Options of `normlab bench`; empty lists mean the default benchmark suite
/// (all five norms; transformer (B, T, D) shapes for LayerNorm/RMSNorm, conv-net (N, C, H, W)
/// shapes for the others).
struct BenchOptions {
    std::vector<std::string> norms;              ///< batchnorm, layernorm, instancenorm, groupnorm, rmsnorm
    std::vector<std::vector<long long>> shapes;  ///< input shapes
    std::string dtype = "float32";
    /// float32 data: "float" (the float path) or "double"; empty: default_compute()
    std::string compute;
    std::vector<unsigned> threads;               ///< thread counts to measure
    unsigned repeat = 20;                        ///< timed repetitions per case (median reported)
    /// more repetitions until this many milliseconds of timed calls have passed, per
    /// measurement (the forward, each phase, the copy)
    double min_time_ms = 0;
    std::optional<unsigned> num_groups;          ///< groupnorm; unset: 32
    /// batchnorm/instancenorm/groupnorm; < 0 counts from the end; unset: 1 (0 for rank 1)
    std::optional<long long> channel_axis;
    bool json = false;                           ///< one JSON object per line instead of a table
    /// mean of the data timed: values uniform in [data_mean - 2, data_mean + 2]. Statistics far
    /// from 0 take their moments about a shift, a little more arithmetic than about 0
    /// (scripts/PERFORMANCE.md); finite, at most 1e30 in magnitude
    double data_mean = 0;
};

/// Runs every (norm, shape, threads) case and returns the printable result: per case the
/// median steady-state time (output buffers reused) and the quartiles of the timed calls
/// (JSON q1_ms and q3_ms, the table's iqr_ms their difference), GB/s counting one read of the input
/// and one write of the output, the GB/s of a plain copy of the same bytes measured in the
/// same run, the time per element of each phase measured on its own (the batch moments;
/// the normalize pass with those statistics given) with its bytes per second as a fraction
/// of the copy's, the first ("cold") call's time, and the case's peak resident memory: the
/// process's peak from the case's start (its input built) to the end of its timed calls,
/// reset between cases through /proc/self/clear_refs (JSON null, table nan, when the
/// kernel refuses the reset).
/// Throws InputError for unknown norms, bad shapes, a channel axis outside a shape, a dtype
/// other than float32 or float64, a compute other than float or double, a norm that does
/// not fit a shape, or a shape whose batch, output and copy would take more than
/// default_memory_limit(); every case is checked before any is timed. The compute reported is the one that ran: double for float64 data. A
/// JSON line also gives the channel_axis and num_groups the norm used, null for a norm that
/// takes none (channel_axis: layernorm, rmsnorm; num_groups: all but groupnorm).
std::string run_bench(const BenchOptions& o);

}  // namespace normlab
