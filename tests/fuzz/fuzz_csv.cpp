// libFuzzer target: the csv loader. The first byte chooses the options (header, delimiter,
// skip_rows, max_rows), the rest is the file, gunzipped first when it starts like gzip (as
// read_maybe_gzip does). Also splits the text into sentences (the text source's reader).
// InputError is the expected answer to bad input; anything else is a bug.
#include <cstdint>
#include <string>
#include <vector>

#include "data/csv.hpp"
#include "data/files.hpp"
#include "data/text.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const unsigned o = data[0];
    CsvOptions opt;
    opt.header = o & 1;
    opt.delimiter = ",;\t|"[(o >> 1) & 3];
    opt.skip_rows = (o >> 3) & 3;
    opt.max_rows = (o >> 5) & 3;
    std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
            text = gunzip(text, "fuzz.csv.gz");
        (void)split_sentences(text, o & 128);
        const CsvLayout layout = csv_layout(text, opt, "fuzz.csv");
        std::vector<std::size_t> keep;
        for (std::size_t c = 0; c < layout.columns; ++c) keep.push_back(c);
        CsvMatrix m = parse_csv(text, opt, "fuzz.csv", keep);
        if (m.values.size() != m.rows * m.cols) __builtin_trap();  // the documented layout
        // The last column only, as "columns": [-1] would select it.
        if (layout.columns > 1) parse_csv(text, opt, "fuzz.csv", {layout.columns - 1});
    } catch (const InputError&) {
    }
    return 0;
}
