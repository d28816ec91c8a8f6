// The .npy reader and writer: files numpy wrote (tests/data/npy, made by
// scripts/make_npy_fixtures.py), round trips, and every error the reader reports.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "data/files.hpp"
#include "data/half.hpp"
#include "data/npy.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

namespace {
const std::string kDir = std::string(NORMLAB_TEST_DATA) + "/npy/";
NpyArray fixture(const std::string& name) { return read_npy(kDir + name); }
Shape shape_of(const xt::xarray<double>& a) { return Shape(a.shape().begin(), a.shape().end()); }
}  // namespace

TEST_CASE("npy: every integer and float dtype numpy writes + shape 2x3 + values 0..5") {
    for (std::string dt : {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                           "float32", "float64"}) {
        CAPTURE(dt);
        NpyArray a = fixture(dt + ".npy");
        CHECK(a.dtype == dt);
        REQUIRE(shape_of(a.values) == Shape{2, 3});
        for (std::size_t i = 0; i < 6; ++i) CHECK(a.values.data()[i] == static_cast<double>(i));
    }
}

TEST_CASE("npy: float16 including subnormal + inf and nan") {
    NpyArray a = fixture("float16.npy");
    CHECK(a.descr == "<f2");
    CHECK(a.dtype == "float16");
    REQUIRE(a.values.size() == 6);
    CHECK(a.values(0) == 0.5);
    CHECK(a.values(1) == -2.0);
    CHECK(a.values(2) == 65504.0);
    CHECK(a.values(3) == std::ldexp(1.0, -24));
    CHECK(std::isinf(a.values(4)));
    CHECK(std::isnan(a.values(5)));
}

TEST_CASE("npy: integer extremes and bool") {
    NpyArray i8 = fixture("int8_extremes.npy");
    CHECK(i8.values(0) == -128.0);
    CHECK(i8.values(1) == 127.0);
    NpyArray i64 = fixture("int64_extremes.npy");
    CHECK(i64.values(0) == -9223372036854775808.0);
    CHECK(i64.values(1) == 9007199254740992.0);
    CHECK(i64.values(2) == -1.0);
    NpyArray u64 = fixture("uint64_max.npy");
    CHECK(u64.values(0) == 18446744073709551615.0);  // rounds to 2^64, as documented
    NpyArray b = fixture("bool.npy");
    CHECK(b.dtype == "bool");
    CHECK(b.descr == "|b1");
    CHECK(b.values == xt::xarray<double>{{1, 0, 1}, {0, 0, 1}});
}

TEST_CASE("npy: big endian") {
    NpyArray f8 = fixture("big_f8.npy");
    CHECK(f8.descr == ">f8");
    CHECK(f8.values == xt::xarray<double>{1.5, -0.25, 1e300});
    CHECK(fixture("big_i4.npy").values == xt::xarray<double>{{-1, 2}, {70000, -70000}});
    CHECK(fixture("big_f2.npy").values == xt::xarray<double>{0.5, -2.0, 65504.0});
    CHECK(fixture("big_u2.npy").values == xt::xarray<double>{1, 65535});
}

TEST_CASE("npy: Fortran order is returned row-major") {
    NpyArray a = fixture("fortran_f8.npy");
    CHECK(a.fortran_order);
    CHECK(a.values == xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
    NpyArray b = fixture("fortran_i2_3d.npy");
    REQUIRE(shape_of(b.values) == Shape{2, 3, 4});
    for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j)
            for (std::size_t k = 0; k < 4; ++k) CHECK(b.values(i, j, k) == double(i * 12 + j * 4 + k));
}

TEST_CASE("npy: format versions 2.0 and 3.0 + scalars and empty arrays") {
    NpyArray v2 = fixture("v2.npy");
    CHECK(v2.major_version == 2);
    CHECK(v2.values == xt::xarray<double>{1, 2, 3});
    NpyArray v3 = fixture("v3.npy");
    CHECK(v3.major_version == 3);
    CHECK(v3.values == xt::xarray<double>{{7, 8}});
    NpyArray s = fixture("scalar.npy");
    CHECK(s.values.dimension() == 0);
    CHECK(s.values() == 3.25);
    NpyArray e = fixture("empty.npy");
    CHECK(shape_of(e.values) == Shape{0, 3});
}

TEST_CASE("npy: errors name the file and the problem") {
    CHECK_THROWS_WITH_AS(fixture("no_such_file.npy"), doctest::Contains("no_such_file.npy: no such file"),
                         InputError);
    // A relative path says which folder it was looked for in (a config on stdin resolves
    // against the current folder); an absolute one needs no such words.
    const std::string cwd = std::filesystem::current_path().string();
    CHECK_THROWS_WITH_AS(read_npy("no_such_relative.npy"),
                         ("no_such_relative.npy: no such file (relative to the current folder, " + cwd + ")").c_str(),
                         InputError);
    CHECK_THROWS_WITH_AS(fixture("no_such_file.npy"), (kDir + "no_such_file.npy: no such file").c_str(), InputError);
    CHECK_THROWS_WITH_AS(read_npy(kDir), doctest::Contains("is a directory"), InputError);
    CHECK_THROWS_WITH_AS(fixture("truncated.npy"),
                         doctest::Contains("truncated.npy: truncated npy file: shape [6] of float64 "
                                           "needs 48 bytes of data, but the file has 43"),
                         InputError);
    CHECK_THROWS_WITH_AS(fixture("extra_bytes.npy"),
                         doctest::Contains("data size does not match the header: shape [6] of "
                                           "float64 needs 48 bytes of data, but the file has 56"),
                         InputError);
    CHECK_THROWS_WITH_AS(fixture("truncated_header.npy"),
                         doctest::Contains("truncated_header.npy: truncated npy file: header length"),
                         InputError);
    CHECK_THROWS_WITH_AS(fixture("bad_magic.npy"), doctest::Contains("bad_magic.npy: not an npy file (bad magic"),
                         InputError);
    CHECK_THROWS_WITH_AS(fixture("not_npy.npy"), doctest::Contains("not an npy file"), InputError);
    CHECK_THROWS_WITH_AS(fixture("bad_header.npy"),
                         doctest::Contains("bad_header.npy: bad npy header: 'shape' must be a tuple"),
                         InputError);
    CHECK_THROWS_WITH_AS(fixture("complex64.npy"),
                         doctest::Contains("complex64.npy: unsupported dtype '<c8' (complex)"), InputError);
    CHECK_THROWS_WITH_AS(fixture("unicode.npy"), doctest::Contains("unsupported dtype '<U2' (strings)"),
                         InputError);
    CHECK_THROWS_WITH_AS(fixture("object.npy"), doctest::Contains("unsupported dtype '|O' (Python objects)"),
                         InputError);
    // The header as numpy wrote it, without its padding of spaces and its newline.
    CHECK_THROWS_WITH_AS(fixture("structured.npy"), doctest::Contains("structured dtype"), InputError);
    try {
        fixture("structured.npy");
    } catch (const InputError& e) {
        const std::string m = e.what();
        const bool ends_with_dict = m.size() > 2 && m.compare(m.size() - 2, 2, "})") == 0;
        CHECK_MESSAGE(ends_with_dict, m);
    }
    // numpy.savez and torch.save write zip archives.
    CHECK_THROWS_WITH_AS(parse_npy(std::string("PK\x03\x04\x14\x00", 6), "w.npz"),
                         doctest::Contains("w.npz: a zip archive, not an npy file (numpy.savez's .npz or torch.save's .pt?)"),
                         InputError);
    CHECK_THROWS_WITH_AS(fixture("longdouble.npy"), doctest::Contains("unsupported dtype '<f16'"),
                         InputError);
    // Two raw bytes per value, '<V2': how numpy saves ml_dtypes' (JAX's) bfloat16, which it lacks.
    {
        std::string header = "{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }";
        header += std::string((10 + header.size() + 1 + 63) / 64 * 64 - 10 - header.size() - 1, ' ') + "\n";
        const std::string v2 = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header +
                               std::string("\x80\x3f\x00\x40", 4);
        CHECK_THROWS_WITH_AS(parse_npy(v2, "bf16.npy"),
                             doctest::Contains("bf16.npy: unsupported dtype '<V2' (raw bytes / structured; a bfloat16 "
                                               "array saved from ml_dtypes or JAX is stored so: save it as float32"),
                             InputError);
    }
    CHECK_THROWS_WITH_AS(parse_npy(std::string("\x93NUMPY\x04\x00", 8), "mem"),
                         "mem: unsupported npy format version 4.0 (normlab reads 1.0, 2.0 and 3.0)",
                         InputError);
    CHECK_THROWS_WITH_AS(parse_npy("", "mem"), doctest::Contains("bad magic"), InputError);
    // A zero dim empties the array, but the other dims' product still sizes the strides (a
    // fuzzer's input: signed overflow in xtensor's strides before this was refused, as numpy
    // refuses it).
    const auto npy_v1 = [](const std::string& dict) {
        const std::string header = dict + "\n";
        return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
    };
    CHECK_THROWS_WITH_AS(
        parse_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 355555552, 55555552, 55555552, 3), }"),
                  "mem"),
        "mem: shape [0, 355555552, 55555552, 55555552, 3] is too large", InputError);
    CHECK(parse_npy(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1000, 3), }"), "mem").values.size() == 0);
}

TEST_CASE("half: bit patterns") {
    CHECK(double_to_half(1.0) == 0x3C00);
    CHECK(double_to_half(-2.0) == 0xC000);
    CHECK(double_to_half(65504.0) == 0x7BFF);
    CHECK(double_to_half(65520.0) == 0x7C00);  // rounds up to inf
    CHECK(double_to_half(std::ldexp(1.0, -24)) == 0x0001);
    CHECK(double_to_half(std::ldexp(1.0, -14)) == 0x0400);  // smallest normal
    CHECK(double_to_half(-0.0) == 0x8000);
    CHECK(double_to_half(0.1) == 0x2E66);  // numpy: np.float16(0.1).view(np.uint16) == 0x2e66
    CHECK(double_to_half(std::nan("")) == 0x7E00);
    for (unsigned b = 0; b < 0x10000u; ++b) {
        if ((b & 0x7C00u) == 0x7C00u && (b & 0x3FFu)) continue;  // NaN payloads are not kept
        REQUIRE(double_to_half(half_to_double(static_cast<std::uint16_t>(b))) == b);
    }
}

TEST_CASE("npy: round trip through npy_bytes in every dtype") {
    xt::xarray<double> v = {{0.1, -2.5, 1e-3}, {65504.0, 3.0, -0.0}};
    for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64}) {
        CAPTURE(dtype_name(d));
        Tensor t = Tensor::from_double(v, d);
        std::string bytes = npy_bytes(t);
        // numpy aligns the data to 64 bytes.
        CHECK((bytes.size() - 6 * (d == DType::float16 ? 2 : d == DType::float64 ? 8 : 4)) % 64 == 0);
        NpyArray back = parse_npy(bytes, "mem");
        CHECK(back.descr == (d == DType::float16 ? "<f2" : d == DType::float64 ? "<f8" : "<f4"));
        CHECK(back.values == t.to_double());
        CHECK(!back.fortran_order);
    }
    xt::xarray<std::uint8_t> m = xt::cast<std::uint8_t>(xt::xarray<int>{{1, 0}, {1, 1}});
    NpyArray mb = parse_npy(npy_bytes_bool(m), "mem");
    CHECK(mb.dtype == "bool");
    CHECK(mb.values == xt::xarray<double>{{1, 0}, {1, 1}});
    NpyArray mu = parse_npy(npy_bytes_u8(xt::cast<std::uint8_t>(xt::xarray<int>{7, 255})), "mem");
    CHECK(mu.dtype == "uint8");
    CHECK(mu.values == xt::xarray<double>{7, 255});
    // Rank 1 and rank 0 shapes use Python's tuple syntax.
    CHECK(npy_bytes(xt::xarray<double>{1.0}, DType::float64).find("'shape': (1,), }") != std::string::npos);
    xt::xarray<double> scalar = 2.0;
    CHECK(parse_npy(npy_bytes(scalar, DType::float64), "mem").values() == 2.0);
}

TEST_CASE("npy: write_npy writes a file read_npy reads back - unwritable path is EnvError") {
    auto dir = std::filesystem::temp_directory_path() / "normlab_test_data_npy";
    std::filesystem::create_directories(dir);
    Tensor t = Tensor::from_double(xt::xarray<double>{{1, 2}, {3, 4.5}}, DType::float32);
    write_npy(dir / "t.npy", t);
    CHECK(read_npy(dir / "t.npy").values == t.to_double());
    CHECK_THROWS_AS(write_npy(dir / "no_such_dir" / "t.npy", t), EnvError);
    std::filesystem::remove_all(dir);
}

TEST_CASE("npy: a file that would not fit in memory is refused from its size and header") {
    // float64 (2, 3): 176 bytes on disk, 48 bytes of doubles; Fortran order adds the transpose.
    const std::filesystem::path f8 = kDir + "float64.npy", fortran = kDir + "fortran_f8.npy";
    const NpyHeader h = parse_npy_header(read_prefix(f8, 128), "f8");
    CHECK(npy_read_bytes(h, 176) == 176 + 48);
    NpyHeader hf = h;
    hf.fortran_order = true;
    CHECK(npy_read_bytes(hf, 176) == 176 + 96);
    // A header that claims more than the file holds counts what it holds: 43 bytes of data.
    CHECK(npy_read_bytes(h, 171) == 171 + 5 * 8);

    CHECK_NOTHROW(check_npy_fits(f8, 224, "the limit"));
    CHECK_NOTHROW(check_npy_fits(fortran, 272, "the limit"));
    CHECK_THROWS_WITH_AS(check_npy_fits(f8, 223, "the limit"),
                         doctest::Contains("float64.npy: reading it takes about 224 B of memory (the file's 176 B "
                                           "and its values as doubles), more than the limit"),
                         InputError);
    CHECK_THROWS_AS(check_npy_fits(fortran, 271, "the limit"), InputError);
    // Left to read_npy, which says what is wrong: no file, no header.
    CHECK_NOTHROW(check_npy_fits(kDir + "no_such.npy", 0, "the limit"));
    CHECK_NOTHROW(check_npy_fits(kDir + "truncated_header.npy", 0, "the limit"));
    CHECK_NOTHROW(check_npy_fits(kDir, 0, "the limit"));
}
