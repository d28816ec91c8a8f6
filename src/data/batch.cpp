#include "data/batch.hpp"

namespace normlab {

double Batch::pad_fraction() const {
    if (!has_mask()) return 0.0;
    std::size_t real = 0;
    for (auto v : mask) real += v ? 1 : 0;
    return 1.0 - static_cast<double>(real) / static_cast<double>(mask.size());
}

}  // namespace normlab
