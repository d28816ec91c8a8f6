// Loaders of real data: CSV (plain and gzip), image files (stb_image), text sentences;
// their values and every error case (missing file, ragged CSV, non-numeric cell,
// bad image), with the JSON pointer and the file named.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "data/files.hpp"
#include "data/image_decode.hpp"
#include "data/npy.hpp"
#include "data/sources.hpp"
#include "data/text.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

namespace {

const std::string kData = NORMLAB_TEST_DATA;
const std::string kConfigs = kData + "/../../configs";

Batch load(const std::string& json, const std::string& base_dir) {
    DataContext c;
    c.base_dir = base_dir;
    c.dtype = DType::float64;
    return make_batch("x", Json::parse(json), JsonLocation{"cfg.json", "/data/x"}, c);
}
Batch csv(const std::string& json) { return load(json, kData + "/csv"); }
Batch img(const std::string& json) { return load(json, kData + "/images/ok"); }

// The message prefix of an error in a file that the key `key` named.
std::string in_file(const std::string& key, const std::string& file) {
    return "cfg.json: /data/x/" + key + ": " + file;
}

}  // namespace

TEST_CASE("csv: header + dropping a text label column by name + quoting + CRLF and blank lines") {
    Batch b = csv(R"({"source": "csv", "path": "header_label.csv", "header": true, "drop_columns": ["label"]})");
    CHECK(b.x.shape() == Shape{3, 2});
    CHECK(b.channel_axis == 1);
    CHECK(b.x.f64 == xt::xarray<double>{{1, 2}, {3, 4.5}, {-0.5, 7}});
    Batch q = csv(R"({"source": "csv", "path": "quoted_semicolon.csv", "skip_rows": 1, "header": true, "delimiter": ";"})");
    CHECK(q.x.f64 == xt::xarray<double>{{1, 2}, {3, 4}});
    Batch c = csv(R"({"source": "csv", "path": "table.csv.gz", "columns": [2, 0]})");
    CHECK(c.x.f64 == xt::xarray<double>{{2, 0}, {6, 4}, {10, 8}});
    Batch d = csv(R"({"source": "csv", "path": "table.csv.gz", "columns": [-1, 0, 1], "drop_columns": [0]})");
    CHECK(d.x.f64 == xt::xarray<double>{{3, 1}, {7, 5}, {11, 9}});
    Batch m = csv(R"({"source": "csv", "path": "table.csv.gz", "max_rows": 2, "row_shape": [2, 2]})");
    CHECK(m.x.shape() == Shape{2, 2, 2});
    CHECK(m.x.f64(1, 1, 0) == 6);
    Batch n = csv(R"({"source": "csv", "path": "nan_inf.csv"})");
    CHECK(std::isnan(n.x.f64(0, 0)));
    CHECK(n.x.f64(0, 1) == INFINITY);
    CHECK(n.x.f64(0, 2) == -INFINITY);
}

TEST_CASE("csv: a UTF-8 byte order mark (a spreadsheet's \"CSV UTF-8\") is no part of the first cell") {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("normlab_bom_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        std::ofstream(dir / "names.csv") << "\xEF\xBB\xBF" "a,b,c\n1,2,3\n4,5,6\n";
        std::ofstream(dir / "numbers.csv") << "\xEF\xBB\xBF" "1,2\n3,4\n";
    }
    Batch named = load(R"({"source": "csv", "path": "names.csv", "header": true, "columns": ["a", "c"]})", dir.string());
    CHECK(named.x.f64 == xt::xarray<double>{{1, 3}, {4, 6}});
    Batch plain = load(R"({"source": "csv", "path": "numbers.csv"})", dir.string());
    CHECK(plain.x.f64 == xt::xarray<double>{{1, 2}, {3, 4}});
    std::filesystem::remove_all(dir);
}

TEST_CASE("csv: the real wine and digits files") {
    Batch w = load(R"({"source": "csv", "path": "data/wine_data.csv", "skip_rows": 1, "drop_columns": [-1]})", kConfigs);
    CHECK(w.x.shape() == Shape{178, 13});
    CHECK(w.x.f64(0, 0) == 14.23);
    CHECK(w.x.f64(0, 12) == 1065);
    Batch g = load(R"({"source": "csv", "path": "data/digits.csv.gz", "drop_columns": [-1], "row_shape": [1, 8, 8]})",
                   kConfigs);
    CHECK(g.x.shape() == Shape{1797, 1, 8, 8});
    CHECK(g.x.f64(0, 0, 0, 2) == 5);   // first row: 0,0,5,13,9,1,0,0,...
    CHECK(g.x.f64(0, 0, 0, 3) == 13);
    CHECK(g.x.f64(1796, 0, 7, 7) == 0);
}

TEST_CASE("csv: errors name the file + line and column") {
    const std::string dir = kData + "/csv/";
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "ragged.csv"})"),
                         (in_file("path", dir + "ragged.csv") +
                          ": line 3 has 2 cells, but line 1 (the first data row) has 3").c_str(),
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "nonnumeric.csv", "header": true})"),
                         (in_file("path", dir + "nonnumeric.csv") +
                          ": line 3, column 2 (\"q\"): \"abc\" is not a number").c_str(),
                         InputError);
    // Each with the key that would read it, where one would.
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "nonnumeric.csv"})"),
                         doctest::Contains("nonnumeric.csv: line 1, column 1: \"p\" is not a number (a header line? "
                                           "\"header\": true, or \"skip_rows\")"),
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "empty_cell.csv"})"),
                         doctest::Contains("empty_cell.csv: line 2, column 2: empty cell is not a number (missing "
                                           "values are not read; fill them, or drop the column with \"drop_columns\")"),
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "semicolon.csv"})"),
                         doctest::Contains("semicolon.csv: line 1, column 1: \"1;2\" is not a number (the file may "
                                           "separate its cells by ';': \"delimiter\": \";\")"),
                         InputError);
    CHECK(csv(R"({"source": "csv", "path": "semicolon.csv", "delimiter": ";"})").x.size() == 4);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "out_of_range.csv"})"),
                         doctest::Contains("out_of_range.csv: line 2, column 1: number \"1e400\" is out of range (double "
                                           "holds magnitudes from about 4.9e-324 to 1.8e308)"),
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "missing.csv"})"),
                         (in_file("path", dir + "missing.csv") + ": no such file").c_str(), InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "."})"), doctest::Contains("is a directory"), InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "truncated.csv.gz"})"),
                         doctest::Contains("truncated.csv.gz: corrupt or truncated gzip data"), InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "only_header.csv", "header": true})"),
                         doctest::Contains("only_header.csv: no data rows after the skipped/header lines"),
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "table.csv.gz", "columns": ["a"]})"),
                         "cfg.json: /data/x/columns/0: column names need \"header\": true", InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "header_label.csv", "header": true, "columns": ["c"]})"),
                         "cfg.json: /data/x/columns/0: no column named \"c\" in the header; it has \"a\", \"b\", \"label\"",
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "header_label.csv", "header": true, "columns": ["lable"]})"),
                         doctest::Contains("no column named \"lable\" in the header (did you mean \"label\"?); it has"),
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "table.csv.gz", "drop_columns": [4]})"),
                         doctest::Contains("/data/x/drop_columns/0: column 4 out of range for a table with 4 columns (valid: -4 to 3)"),
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "table.csv.gz", "columns": [1.5]})"),
                         doctest::Contains("/data/x/columns/0: expected a column index"), InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "table.csv.gz", "drop_columns": [0, 1, 2, 3]})"),
                         doctest::Contains("/data/x: no columns left"), InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "table.csv.gz", "row_shape": [3]})"),
                         doctest::Contains("/data/x/row_shape: row_shape [3] has 3 elements, but each row has 4"),
                         InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "table.csv.gz", "delimiter": ";;"})"),
                         doctest::Contains("/data/x/delimiter: delimiter must be one character"), InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "table.csv.gz", "skip_rows": -1})"),
                         doctest::Contains("/data/x/skip_rows: skip_rows must be >= 0"), InputError);
    CHECK_THROWS_WITH_AS(csv(R"({"source": "csv", "path": "table.csv.gz", "skip_row": 1})"),
                         doctest::Contains("unknown key \"skip_row\"; did you mean \"skip_rows\"?"), InputError);
}

TEST_CASE("gunzip: plain bytes pass through read_maybe_gzip - corrupt data is an error") {
    CHECK(read_maybe_gzip(kData + "/csv/ragged.csv") == "1,2,3\n4,5,6\n7,8\n");
    CHECK(read_maybe_gzip(kData + "/csv/table.csv.gz").substr(0, 8) == "0,1,2,3\n");
    CHECK_THROWS_WITH_AS(gunzip(std::string("\x1f\x8b\x08\x00garbage", 12), "mem"),
                         doctest::Contains("mem: corrupt or truncated gzip data"), InputError);
}

TEST_CASE("image_files: values + layout NCHW + centre crop and tiles") {
    Batch a = img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png"]})");
    REQUIRE(a.x.shape() == Shape{1, 3, 6, 8});
    CHECK(a.channel_axis == 1);
    CHECK(a.x.f64(0, 0, 2, 3) == 23 / 255.0);
    CHECK(a.x.f64(0, 1, 2, 3) == 102 / 255.0);
    CHECK(a.x.f64(0, 2, 2, 3) == 203 / 255.0);
    Batch c = img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png"], "patch": [4, 4]})");
    REQUIRE(c.x.shape() == Shape{1, 3, 4, 4});
    CHECK(c.x.f64(0, 0, 0, 0) == 12 / 255.0);  // origin (1, 2)
    Batch t = img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png", "c_flat_10x4.jpg"], "patch": [3, 4], "mode": "tile"})");
    REQUIRE(t.x.shape() == Shape{7, 3, 3, 4});  // 2 x 2 tiles + 3 x 1 tiles
    CHECK(t.x.f64(1, 0, 0, 0) == 4 / 255.0);    // second tile of a starts at (0, 4)
    CHECK(t.x.f64(2, 0, 0, 0) == 30 / 255.0);   // third at (3, 0)
    CHECK(std::fabs(t.x.f64(5, 1, 1, 1) - 128 / 255.0) <= 2 / 255.0);  // flat JPEG grey
    Batch m = img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png"], "patch": [3, 4], "mode": "tile", "max_patches": 3})");
    CHECK(m.x.shape() == Shape{3, 3, 3, 4});
    Batch f = img(R"({"source": "image_files", "folder": ".", "patch": [4, 4], "channels": 1})");
    REQUIRE(f.x.shape() == Shape{3, 1, 4, 4});       // a, b, c; notes.txt skipped
    CHECK(f.x.f64(1, 0, 0, 0) == 50 / 255.0);         // b: grey 5 * (8 * 1 + 2)
    for (double v : f.x.f64) REQUIRE((v >= 0 && v <= 1));
}

TEST_CASE("image_files: the real photographs tile into 32 x 32 patches") {
    Batch p = load(R"({"source": "image_files", "paths": ["data/china.jpg", "data/flower.jpg"], "patch": [32, 32], "mode": "tile"})",
                   kConfigs);
    CHECK(p.x.shape() == Shape{520, 3, 32, 32});  // 2 x (427 / 32 = 13) x (640 / 32 = 20)
    double lo = 1, hi = 0;
    for (double v : p.x.f64) lo = std::min(lo, v), hi = std::max(hi, v);
    CHECK(lo >= 0.0);
    CHECK(hi <= 1.0);
    CHECK(hi - lo > 0.9);
}

TEST_CASE("image_files: errors") {
    const std::string ok = kData + "/images/ok/", bad = kData + "/images/bad/";
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["../bad/text.png"]})"),
                         (in_file("paths/0", ok + "../bad/text.png") + ": cannot decode image: not a JPEG or PNG file, the two formats the image sources read (stb_image: unknown image type)").c_str(),
                         InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png", "../bad/truncated.png"]})"),
                         doctest::Contains(("/data/x/paths/1: " + ok + "../bad/truncated.png: cannot decode image: a damaged or truncated PNG file, or a kind of PNG stb_image does not decode (stb_image: ").c_str()),
                         InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["nope.png"]})"),
                         (in_file("paths/0", ok + "nope.png") + ": no such file").c_str(), InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png", "c_flat_10x4.jpg"]})"),
                         doctest::Contains(("/data/x/paths/1: " + ok + "c_flat_10x4.jpg: image is 10 x 4 (H x W) but "
                                            "the first is 6 x 8; give \"patch\"").c_str()),
                         InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["c_flat_10x4.jpg"], "patch": [8, 8]})"),
                         doctest::Contains("c_flat_10x4.jpg: image of 10 x 4 (H x W) is smaller than the patch 8 x 8"),
                         InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "folder": "../../text"})"),
                         doctest::Contains("/data/x/folder: ") , InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "folder": "nowhere"})"),
                         doctest::Contains("nowhere: not a folder"), InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "folder": ".", "paths": ["a_rgb_6x8.png"]})"),
                         doctest::Contains("/data/x: give either \"paths\""), InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png"], "mode": "tile"})"),
                         doctest::Contains("/data/x/mode: mode \"tile\" needs \"patch\""), InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png"], "channels": 4})"),
                         doctest::Contains("/data/x/channels: channels must be 1 (grey) or 3 (RGB)"), InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png"], "patch": [4]})"),
                         doctest::Contains("/data/x/patch: expected [H, W]"), InputError);
    CHECK_THROWS_WITH_AS(img(R"({"source": "image_files", "paths": ["a_rgb_6x8.png"], "mode": "crop"})"),
                         doctest::Contains("/data/x/mode: unknown value \"crop\""), InputError);
}

TEST_CASE("split_sentences: sentence ends + blank lines + words") {
    const std::string text = read_file_bytes(kData + "/text/small.txt");
    using S = std::vector<std::vector<std::string>>;
    CHECK(split_sentences(text, false) == S{{"hello", "world"},
                                            {"the", "cat's", "hat", "is", "red"},
                                            {"is", "it"},
                                            {"yes", "e", "g"},
                                            {"this", "one", "spans", "lines"},
                                            {"a", "paragraph", "without", "a", "full", "stop"},
                                            {"quoted", "words", "3.5", "and", "42"}});
    CHECK(split_sentences(text, true).size() == 5);
    CHECK(split_sentences(text, true)[0].size() == 7);
    CHECK(split_sentences("", false).empty());
    CHECK(split_sentences("1,000 cats. ", false) == S{{"1,000", "cats"}});
}

TEST_CASE("image_files_in: the JPEG and PNG files of a folder in any case, sorted, without folders or other files") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("normlab_image_files_in_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "d.png");  // a folder with an image's name
    for (const char* f : {"c.txt", "b.PNG", "a.jpg", "e.Jpeg"}) write_file_bytes(dir / f, "x");
    const std::vector<fs::path> got = image_files_in(dir);
    CHECK(got == std::vector<fs::path>{dir / "a.jpg", dir / "b.PNG", dir / "e.Jpeg"});
    CHECK(image_files_in(dir / "missing").empty());
    fs::remove_all(dir);
}
