// Starter configs for `normlab init`. Each is a complete, valid config (tested).
#include <filesystem>
#include <fstream>
#include <iostream>

#include "run/shapes_command.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

const char* kMinimal = R"({
  "name": "my_experiment",
  "seed": 0,
  "dtype": "float32",
  "data": {
    "images": {"source": "gaussian", "shape": [8, 3, 32, 32], "mean": 0, "std": 1}
  },
  "norms": {
    "bn": {"type": "batchnorm"},
    "ln": {"type": "layernorm", "normalized_shape": [3, 32, 32]},
    "gn": {"type": "groupnorm", "num_groups": 3}
  },
  "analyses": [
    {"type": "stats_shapes", "data": ["images"], "norms": ["bn", "ln", "gn"]},
    {"type": "apply", "data": ["images"], "norms": ["bn", "ln", "gn"], "save": ["output"]}
  ]
}
)";

const char* kSweep = R"({
  "name": "eps_sweep",
  "seed": 0,
  "dtype": "float32",
  "data": {
    "tokens": {"source": "gaussian", "shape": [4, 16, 64], "mean": 0, "std": 0.01, "channel_axis": -1}
  },
  "norms": {
    "ln": {"type": "layernorm", "normalized_shape": [64], "eps": 1e-5}
  },
  "analyses": [
    {"type": "apply", "data": ["tokens"], "norms": ["ln"]}
  ],
  "sweep": {
    "norms.ln.eps": [1e-7, 1e-5, 1e-3],
    "data.tokens.std": [0.001, 0.01, 1]
  }
}
)";

}  // namespace

std::vector<std::string> template_names() { return {"minimal", "sweep"}; }

std::string template_text(const std::string& name) {
    if (name == "minimal") return kMinimal;
    if (name == "sweep") return kSweep;
    throw InputError("init: unknown template \"" + name + "\" (expected minimal or sweep)");
}

void write_template(const std::string& name, const std::string& path, bool force) {
    const std::string text = template_text(name);
    if (std::filesystem::exists(path) && !force) throw InputError(path + ": exists; pass --force to overwrite");
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!(f << text)) throw EnvError(path + ": cannot write");
    std::cerr << "normlab: wrote " << path << " (run it: normlab run " << path << ")\n";
}

}  // namespace normlab
