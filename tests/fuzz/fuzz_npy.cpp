// libFuzzer target: arbitrary bytes as an .npy file (parse_npy and parse_npy_header).
// InputError is the expected answer to a bad file; anything else is a bug.
#include <cstdint>
#include <string>

#include "data/npy.hpp"
#include "tensor/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const normlab::NpyHeader h = normlab::parse_npy_header(bytes, "fuzz.npy");
        (void)h.count();
    } catch (const normlab::InputError&) {
    }
    try {
        const normlab::NpyArray a = normlab::parse_npy(bytes, "fuzz.npy");
        // Every element was decoded: touch them all (ASan checks the reads).
        double sum = 0;
        for (double v : a.values) sum += v;
        (void)sum;
    } catch (const normlab::InputError&) {
    }
    return 0;
}
