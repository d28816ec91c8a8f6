// libFuzzer target: a config document as text, through everything `normlab validate` does
// with it short of running analyses: JSON parsing (parse_json_text), sweep expansion, parse_config (norms,
// parameter inits, analysis keys), the memory estimate, make_batch for every data entry the
// estimate lets through (at most 16 MiB, as a run with a small --max-memory), and binding and
// applying every analysed norm to its data. Input errors (InputError) are the expected
// answer to bad input; any other exception, crash or sanitizer report is a bug.
// Relative paths in the config resolve against tests/data, so the corpus can name fixtures.
#include <cstdint>
#include <map>
#include <string>

#include "analysis/analysis.hpp"
#include "config/config.hpp"
#include "config/sweep.hpp"
#include "data/estimate.hpp"
#include "data/sources.hpp"
#include "norm/presets.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    // Keep the fuzzer inside tests/data: no absolute paths or devices (a real run reads
    // what the user names; the fuzzer should not read the whole machine).
    if (text.find("\"/") != std::string::npos || text.find("..") != std::string::npos) return 0;
    const std::filesystem::path base = NORMLAB_FUZZ_DATA;
    constexpr std::size_t kLimit = 16u << 20;
    try {
        Json doc = parse_json_text(text, "fuzz.json");  // as load_json_file reads a config
        Sweep sweep = extract_sweep(doc, "fuzz.json");
        Config c = parse_config(doc, "fuzz.json", base, analysis_catalog());
        DataContext ctx{base, c.seed, c.dtype};
        std::map<std::string, Batch> batches;
        for (const auto& name : c.data_order) {
            const DataEstimate e = estimate_batch(name, c.data.at(name), ctx, kLimit);
            if (saturating_add(e.batch_bytes, e.build_bytes) > kLimit) continue;
            batches[name] = make_batch(name, c.data.at(name), JsonLocation{"fuzz.json", "/data"}.child(name), ctx);
        }
        for (const auto& a : c.analyses)
            for (const auto& dn : a.data)
                for (const auto& nn : a.norms) {
                    auto it = batches.find(dn);
                    if (it == batches.end()) continue;
                    NormLayer layer(c.norms.at(nn), c.dtype);
                    layer.resolve(it->second.x.shape(), it->second.channel_axis, dn);
                    if (it->second.x.size() <= 4096)
                        layer.forward(it->second.x, it->second.channel_axis, dn,
                                      it->second.has_mask() ? &it->second.mask : nullptr);
                }
    } catch (const InputError&) {
    }
    return 0;
}
