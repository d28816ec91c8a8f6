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
                         "cfg.json: /norms/ln/eps: expected a number, but got string \"1e-5\" (as a number, JSON "
                         "writes it 1e-5, without quotes)",
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

// What /proc/self/smaps says of the mapping that holds address p: its AnonHugePages in
// kB and its VmFlags line (empty when no mapping holds p or smaps is unreadable).
struct Mapping {
    long huge_kib = -1;
    std::string flags;
};

Mapping mapping_at(const void* p) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    std::string line;
    bool inside = false;
    Mapping m;
    while (std::getline(smaps, line)) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            if (inside) break;
            inside = lo <= at && at < hi;
            continue;
        }
        if (!inside) continue;
        if (line.rfind("AnonHugePages:", 0) == 0) m.huge_kib = std::stol(line.substr(14));
        if (line.rfind("VmFlags:", 0) == 0) m.flags = line.substr(8) + " ";
    }
    return m;
}

}  // namespace

TEST_CASE("allocations of 2 MiB and more are aligned to 2 MiB and advised onto huge pages") {
#ifdef NORMLAB_HUGE_NEW
    CHECK(huge_page_allocation());
#else
    CHECK_FALSE(huge_page_allocation());
    return;
#endif
    // Through std::allocator and operator new, as xtensor's containers allocate. glibc's
    // own large blocks are never 2 MiB-aligned (a header precedes them), so these fail
    // without the replacement.
    std::vector<float> big(kHugePageBytes);  // 8 MiB
    CHECK(reinterpret_cast<std::uintptr_t>(big.data()) % kHugePageBytes == 0);
    auto arr = std::make_unique<double[]>(kHugePageBytes / 4);  // 4 MiB, the array form
    CHECK(reinterpret_cast<std::uintptr_t>(arr.get()) % kHugePageBytes == 0);
    xt::xarray<float> t = xt::xarray<float>::from_shape({1024, 1024});  // 4 MiB
    CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % kHugePageBytes == 0);
    // The advice shows as "hg" in the mapping's VmFlags wherever the kernel has
    // transparent huge pages; whether it then gave huge pages depends on its setting and
    // free memory, not on normlab: reported, not asserted.
    for (std::size_t i = 0; i < big.size(); i += 1024) big[i] = 1.0f;
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    if (!thp) return;
    const std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
    const Mapping m = mapping_at(big.data());
    CHECK(m.flags.find(" hg") != std::string::npos);
    // Small allocations keep malloc's heap, which nothing advises.
    const std::vector<char> small(1000);
    const Mapping sm = mapping_at(small.data());
    CHECK_FALSE(sm.flags.empty());
    CHECK(sm.flags.find(" hg") == std::string::npos);
    MESSAGE("transparent huge pages: " << mode << "AnonHugePages of an 8 MiB vector: " << m.huge_kib << " kB");
    if (mode.find("[never]") == std::string::npos) WARN(m.huge_kib > 0);
}
