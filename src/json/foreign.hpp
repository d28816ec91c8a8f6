#pragma once
// Names other frameworks give normlab's keys and values. People port configs from Keras,
// Flax, ONNX and PyTorch and type the names they know ("epsilon", "groups", "tensorflow"),
// which are too far from normlab's by edit distance for a did-you-mean to find; the
// unknown-key and unknown-value messages name the counterpart and whose name it is.
#include <string>
#include <vector>

namespace normlab {

/// What another framework's name stands for in normlab.
struct ForeignName {
    std::string ours;  ///< normlab's key or value, one of the candidates
    std::string note;  ///< "Keras, Flax and ONNX name it so; normlab's is "eps"": who uses the name, and ours
};

/// The counterpart of `word` among `candidates` (a key's or a value's names where it was
/// met), when `word` is another framework's name for one of them: compared without regard
/// to case, and only where normlab really has that counterpart there (Keras's "groups" in
/// a groupnorm is num_groups; in a layernorm, which has no groups, it is nothing). An
/// empty `ours` when there is none.
ForeignName foreign_name(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace normlab
