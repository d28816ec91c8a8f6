// Axis handling, dtype rounding and config-reader errors: the helpers every module uses.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "json/reader.hpp"
#include "tensor/errors.hpp"
#include "tensor/huge_pages.hpp"
#include "tensor/order_stats.hpp"
#include "tensor/tensor.hpp"

using namespace normlab;

TEST_CASE("canonicalize_axes: negative, sorted, errors") {
    CHECK(canonicalize_axes({-1, 0}, 3, "t") == Axes{0, 2});
    CHECK_THROWS_WITH_AS(canonicalize_axes({3}, 3, "layernorm axes"),
                         "layernorm axes: axis 3 out of range for input of rank 3", InputError);
    CHECK_THROWS_WITH_AS(canonicalize_axes({-4}, 3, "t"),
                         "t: axis -4 out of range for input of rank 3", InputError);
    CHECK_THROWS_WITH_AS(canonicalize_axes({2, -1}, 3, "t"),
                         doctest::Contains("axis -1 repeated"), InputError);
    CHECK(complement_axes({0, 2}, 4) == Axes{1, 3});
    CHECK(keepdims_shape({2, 3, 4}, {1}) == Shape{2, 1, 4});
    CHECK(format_shape({1, 3, 1, 1}) == "[1, 3, 1, 1]");
    CHECK(compact_shape({1, 3, 1, 1}) == "[1,3,1,1]");
}

TEST_CASE("quantile and median: numpy's linear quantiles") {
    // np.quantile([1, 2, 3, 4], [0.25, 0.5, 0.75]) = [1.75, 2.5, 3.25]; np.median([3, 1, 2]) = 2
    const std::vector<double> v{1, 2, 3, 4};
    CHECK(normlab::quantile(v, 0.25) == 1.75);
    CHECK(normlab::quantile(v, 0.5) == 2.5);
    CHECK(normlab::quantile(v, 0.75) == 3.25);
    CHECK(normlab::quantile({7}, 0.25) == 7);
    CHECK(normlab::median({3, 1, 2}) == 2);
    CHECK(std::isnan(normlab::median({})));
}

TEST_CASE("count_noun: singular for 1 only") {
    CHECK(count_noun(1, "file") == "1 file");
    CHECK(count_noun(0, "point") == "0 points");
    CHECK(count_noun(3, "element") == "3 elements");
}

TEST_CASE("round_to: float16 and bfloat16 round to nearest even, overflow to inf") {
    CHECK(round_to(DType::float16, 1.0 + 1.0 / 2048) == 1.0);            // tie -> even
    CHECK(round_to(DType::float16, 1.0 + 3.0 / 2048) == 1.0 + 2.0 / 1024);  // tie -> even (up)
    CHECK(round_to(DType::float16, 65504.0) == 65504.0);
    CHECK(std::isinf(round_to(DType::float16, 65520.0)));
    CHECK(round_to(DType::float16, 1e-12) == 0.0);  // eps 1e-12 underflows (case B09)
    CHECK(round_to(DType::float16, 5.960464477539063e-08) == 5.960464477539063e-08);  // min subnormal
    CHECK(round_to(DType::bfloat16, 1.0 + 1.0 / 256) == 1.0);
    CHECK(round_to(DType::float32, 0.1) == static_cast<double>(0.1f));
    CHECK(machine_eps(DType::float32) == doctest::Approx(1.1920928955078125e-07));
}

TEST_CASE("Tensor::from_double rounds to the dtype") {
    xt::xarray<double> v = {{0.1, 0.2}};
    Tensor t = Tensor::from_double(v, DType::float32);
    CHECK(t.shape() == Shape{1, 2});
    CHECK(t.to_double()(0, 0) == static_cast<double>(0.1f));
    Tensor d = Tensor::from_double(v, DType::float64);
    CHECK(d.to_double()(0, 1) == 0.2);
}

TEST_CASE("ObjectReader: types, unknown keys with did-you-mean, pointer paths") {
    Json j = Json::parse(R"({"eps": "1e-5", "epsx": 1, "n": -1, "k": 3})");
    JsonLocation loc{"cfg.json", "/norms/ln"};
    ObjectReader r(j, loc);
    CHECK_THROWS_WITH_AS(r.number("eps"),
                         "cfg.json: /norms/ln/eps: expected a number, but got string \"1e-5\"",
                         InputError);
    CHECK(r.integer("n", 0) == -1);
    CHECK(r.integer("k", 0) == 3);
    CHECK_THROWS_WITH_AS(r.finish(), doctest::Contains("/norms/ln/epsx: unknown key \"epsx\"; did you mean \"eps\"?"),
                         InputError);
    CHECK_THROWS_WITH_AS(ObjectReader(Json::array(), loc), doctest::Contains("expected an object"),
                         InputError);
    ObjectReader r2(j, loc);
    CHECK_THROWS_WITH_AS(r2.choice("eps", {"a", "b"}, "a"), doctest::Contains("unknown value"), InputError);
}

namespace {

// Kilobytes of AnonHugePages in the mapping of /proc/self/smaps that holds address p; -1
// when no mapping does (or smaps is unreadable).
long huge_kib_at(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            inside = lo <= at && at < hi;
            continue;
        }
        if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
    }
    return -1;
}

}  // namespace

TEST_CASE("allocations of 2 MiB and more are aligned to 2 MiB and advised onto huge pages") {
#if defined(__linux__)
    const bool sanitized =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        true;
#else
        false;
#endif
    CHECK(huge_page_allocation() == !sanitized);
#endif
    if (!huge_page_allocation()) return;
    // Through std::allocator and operator new, as xtensor's containers allocate.
    std::vector<float> big(kHugePageBytes);  // 8 MiB
    CHECK(reinterpret_cast<std::uintptr_t>(big.data()) % kHugePageBytes == 0);
    auto arr = std::make_unique<double[]>(kHugePageBytes / 4);  // 4 MiB, the array form
    CHECK(reinterpret_cast<std::uintptr_t>(arr.get()) % kHugePageBytes == 0);
    xt::xarray<float> t = xt::xarray<float>::from_shape({1024, 1024});  // 4 MiB
    CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % kHugePageBytes == 0);
    // Whether the kernel gave huge pages depends on its setting and free memory, not on
    // normlab: reported, not asserted.
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
    for (std::size_t i = 0; i < big.size(); i += 1024) big[i] = 1.0f;
    const long huge = huge_kib_at(big.data());
    MESSAGE("transparent huge pages: " << mode << "AnonHugePages of an 8 MiB vector: " << huge << " kB");
    if (mode.find("[never]") == std::string::npos) WARN(huge > 0);
}
