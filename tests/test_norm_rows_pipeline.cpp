// The forward of large float32 outputs whose rows are whole statistics of mid length (256
// to 2048 values, engine.cpp's rows_impl pipeline: the next chunk's moments interleaved
// with this chunk's streamed output): every row's output and statistics must have the bits
// of the walk's path, for any thread count, with row counts that leave a partial chunk and
// a partial group of rows, at the ends of the pipelined range and just outside it.
#include <doctest/doctest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include <xtensor/xrandom.hpp>

#include "norm/engine.hpp"

#include "norm_util.hpp"

using namespace normlab;

TEST_CASE("mid-length rows of streamed outputs: the walk's bits, every row, on 1, 2 and 3 threads, pipelined or not") {
    xt::random::seed(36);
    // (rows, n): 8 MiB and more of float32 each. 255 and 2049 fall just outside the range,
    // 256 and 2048 at its ends; 768 leaves 85-row chunks with a remainder; 1000 is no
    // multiple of the 16-float store.
    const std::vector<std::pair<std::size_t, std::size_t>> shapes = {
        {8300, 256}, {8300, 255}, {2800, 768}, {2113, 1000}, {1031, 2048}, {1030, 2049}};
    const norm_test::EngineSetting restore;  // threads and the pipeline's mode, failed REQUIREs included
    for (const auto& [rows, n] : shapes) {
        CAPTURE(rows);
        CAPTURE(n);
        xt::xarray<double> v = xt::random::randn<double>({rows, n}) * 2.0 + 40.0;
        for (std::size_t i = 0; i < v.size(); i += 5 * n + 3) v.data()[i] = -3e4;  // outliers, some first in a row
        const Tensor x = Tensor::from_double(v, DType::float32);
        const xt::xarray<double> w = xt::random::randn<double>({n}) + 1.0, b = xt::random::randn<double>({n});
        const xt::xarray<std::uint8_t> ones = xt::ones<std::uint8_t>({rows, n});
        for (bool center : {true, false}) {
            CAPTURE(center);
            NormSpec spec;
            spec.reduction_axes = {1};
            spec.param_axes = {1};
            spec.center = center;
            ForwardInputs plain, masked;
            plain.weight = masked.weight = &w;
            plain.bias = masked.bias = &b;
            masked.mask = &ones;  // a mask of ones: the walk's moments and output, the same bits
            set_engine_threads(1);
            const ForwardResult ref = forward(x, spec, masked);
            for (int pipeline : {1, 0})  // the pipeline and whole chunks, whichever this CPU takes
                for (unsigned threads : {1u, 2u, 3u}) {
                    CAPTURE(pipeline);
                    CAPTURE(threads);
                    set_rows_pipeline(pipeline);
                    set_engine_threads(threads);
                    const ForwardResult got = forward(x, spec, plain);
                    norm_test::check_same_forward(got, ref);
                }
        }
    }
}
