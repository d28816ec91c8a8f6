#pragma once
// `normlab bench --stack`: forward and backward of a residual ffn stack against plain
// xt::linalg::dot products of the same sizes, measured side by side in one process (a
// norm_only stack, a chain of norms, has no products to compare).
#include <string>
#include <vector>

namespace normlab {

/// Options of `normlab bench --stack`.
struct StackBenchOptions {
    std::size_t layers = 48, rows = 1024, features = 512, hidden = 2048;
    std::vector<std::string> dtypes = {"float32", "float64"};
    std::string placement = "pre";   ///< any placement name
    std::string norm = "layernorm";  ///< layernorm or rmsnorm over the features; batchnorm over rows
    unsigned repeat = 3;             ///< timed forward+backward passes per dtype (median reported)
    bool json = false;               ///< one JSON object per line instead of a table
};

/// Times, per dtype, the median of `repeat` forward+backward passes of an ffn stack
/// (relu, xavier_uniform weights, projection loss) after one first pass that is timed on its
/// own (cold_s) and left out of the median, and the same matrix products (m, k, n) as plain
/// xt::linalg::dot calls on contiguous operands, alternating with the stack's passes
/// (median). GFLOP/s count 2 m k n per product: 12 L N D H per pass. Counts only what the
/// placement computes: norm_only has no block, so no products (GFLOP/s, the plain products
/// and their fraction are JSON null, "-" in the table; they are not timed), no weights and
/// no hidden size (JSON "hidden": null); none has no norm (JSON "norm": null); the header
/// names neither. Also reports the bytes the forward keeps for the backward (activations),
/// the weights' bytes and the peak resident memory from building the stack to the end of
/// the first pass (VmHWM after a reset through /proc/self/clear_refs; the process-wide
/// getrusage maximum where that reset is unavailable), which includes what the process
/// holds anyway. Throws InputError for zero sizes, unknown dtypes, placements or norms, and
/// sizes whose pass would hold more than default_memory_limit() (half the machine's memory;
/// stack_memory_bytes plus the input and upstream gradient), before anything is timed.
std::string run_stack_bench(const StackBenchOptions& o);

}  // namespace normlab
