// Starter configs for `normlab init`. Each is a complete, valid config (tested).
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "json/text.hpp"
#include "run/shapes_command.hpp"
#include "tensor/errors.hpp"
#include "tensor/tensor.hpp"

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

// Pre-norm against post-norm and DeepNorm over depth: the gradient each layer's weights get at
// initialisation (Xiong et al. 2020; Wang et al. 2022), as means over 8 draws.
const char* kDepth = R"({
  "name": "depth",
  "seed": 0,
  "dtype": "float32",
  "data": {
    "tokens": {"source": "tokens", "batch": 8, "max_len": 32, "dim": 64}
  },
  "norms": {
    "ln": {"type": "layernorm", "normalized_shape": [64]}
  },
  "stacks": {
    "pre": {"layers": 12, "placement": "pre", "norm": "ln", "block": "ffn", "hidden": 256, "activation": "gelu"},
    "post": {"layers": 12, "placement": "post", "norm": "ln", "block": "ffn", "hidden": 256, "activation": "gelu"},
    "deepnorm": {"layers": 12, "placement": "deepnorm", "norm": "ln", "block": "ffn", "hidden": 256, "activation": "gelu"}
  },
  "analyses": [
    {"type": "depth", "data": ["tokens"], "stacks": ["pre", "post", "deepnorm"], "draws": 8}
  ],
  "sweep": {
    "zip": {"stacks.pre.layers": [6, 12, 24], "stacks.post.layers": [6, 12, 24], "stacks.deepnorm.layers": [6, 12, 24]}
  }
}
)";

}  // namespace

std::vector<std::string> template_names() { return {"minimal", "sweep", "depth"}; }

std::string template_text(const std::string& name) {
    if (name == "minimal") return kMinimal;
    if (name == "sweep") return kSweep;
    if (name == "depth") return kDepth;
    throw InputError("init: unknown template " + quoted_text(name) + " (expected one of: " + join_words(template_names()) + ")");
}

void write_template(const std::string& name, const std::string& path, bool force) {
    const std::string text = template_text(name);
    if (path.empty()) throw InputError("init --output: expected a file name, but got \"\"");
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw InputError(path + ": is a folder; name the file to write (e.g. " +
                         (std::filesystem::path(path) / "my.json").string() + ")");
    if (std::filesystem::exists(path, ec) && !force) throw InputError(path + ": exists; pass --force to overwrite");
    // init writes one file and makes no folder: a missing one is named, not left to strerror.
    // An unreadable parent (permissions) is left to the write below and its strerror (exit 1).
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
        std::error_code sec;
        const auto type = std::filesystem::status(parent, sec).type();
        const bool missing = type == std::filesystem::file_type::not_found;
        if (missing || (!sec && type != std::filesystem::file_type::directory))
            throw InputError(plain_or_quoted(path) + ": " + plain_or_quoted(parent.string()) +
                             (missing ? " does not exist" : " is a file, not a folder") +
                             "; init writes the file into an existing folder");
    }
    errno = 0;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) throw EnvError(path + ": cannot write: " + std::strerror(errno));
    f << text;
    f.close();
    if (!f) throw EnvError(path + ": write failed: " + std::strerror(errno));
    std::cerr << "normlab: wrote " << plain_or_quoted(path) << " (run it: normlab run " << plain_or_quoted(path) << ")\n";
}

}  // namespace normlab
