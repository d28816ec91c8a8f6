#pragma once
// The tensor type every module passes around: an xtensor array plus the run's dtype.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

namespace normlab {

/// Element type of a run. float16 and bfloat16 values are held in float32 storage,
/// rounded to their format (round to nearest even), as frameworks hold them in registers.
enum class DType { float16, bfloat16, float32, float64 };

using Shape = std::vector<std::size_t>;
using Axes = std::vector<std::size_t>;  ///< canonical axes: non-negative, sorted, unique

/// "float32", "float64", ... ; the names numpy uses.
std::string dtype_name(DType d);
/// Inverse of dtype_name; nullopt for any other name. Messages naming a refused name are
/// built above tensor/ (json/text's parse_dtype), where a typed name can be shown escaped.
std::optional<DType> dtype_from_name(const std::string& name);
/// The accepted dtype names, as a message lists them: "float16, bfloat16, float32 or float64".
extern const char* const kDtypeNames;
/// Machine epsilon of the dtype (torch.finfo(dtype).eps).
double machine_eps(DType d);
/// The type a framework does a layer's arithmetic in for inputs of dtype d (PyTorch's
/// opmath type, at::opmath_type): float32 for float16 and bfloat16, d itself otherwise.
/// Defaults that depend on the dtype follow it (RMSNorm's eps, PyTorch >= 2.6, pytorch/pytorch#142848).
DType compute_dtype(DType d);
/// Rounds v to the nearest value representable in d (round to nearest even; overflow
/// gives +-inf as IEEE does).
double round_to(DType d, double v);

/// A dense row-major tensor. Exactly one of f32/f64 holds the values: f64 for float64,
/// f32 otherwise. Invariant: every stored value is representable in `dtype`.
struct Tensor {
    DType dtype = DType::float32;
    xt::xarray<float> f32;
    xt::xarray<double> f64;

    Shape shape() const;
    std::size_t size() const;
    std::size_t rank() const { return shape().size(); }
    /// A float64 copy of the values (exact: every dtype widens to double losslessly).
    xt::xarray<double> to_double() const;
    /// Builds a tensor of dtype d from doubles, rounding each value to d.
    static Tensor from_double(const xt::xarray<double>& values, DType d);
};

/// "[2, 3, 4]" (the form error messages use).
std::string format_shape(const Shape& s);
/// "[2,3,4]" (the compact form CSV cells use).
std::string compact_shape(const Shape& s);
std::size_t num_elements(const Shape& s);
/// The number of elements of `s`, or std::nullopt when the product does not fit in a
/// std::size_t: a shape read from a config or the command line may name more elements
/// than any machine holds, and its wrapped count would look small.
std::optional<std::size_t> checked_num_elements(const Shape& s);
/// A count with its noun in the right number, for messages: "1 file", "3 files", "0 points".
/// `noun` is the singular of a regular English noun (the plural adds "s").
std::string count_noun(std::size_t n, const std::string& noun);
/// The items for a message, "a, b, c", or "a, b or c" with `last` " or ".
std::string join_words(const std::vector<std::string>& items, const std::string& last = ", ");
/// `s` in ASCII lower case (names compared without regard to case).
std::string lower_case(std::string s);

/// Converts possibly negative axes to canonical ones for a tensor of rank `rank`
/// (Python-style: -1 is the last axis), sorted ascending. Throws InputError
/// "axis A out of range for input of rank R" or "axis A repeated" (`what` prefixes the
/// message, e.g. "layernorm axes").
Axes canonicalize_axes(const std::vector<long long>& axes, std::size_t rank,
                       const std::string& what);
/// Single-axis version of canonicalize_axes.
std::size_t canonicalize_axis(long long axis, std::size_t rank, const std::string& what);
/// Converts a possibly negative index into `count` items (a column, a feature; -1 is the
/// last) to a non-negative one. Throws InputError "<what> I out of range for <of> (valid:
/// -N to N-1)": for indices that are not axes, whose bound is a size, not a rank.
std::size_t canonicalize_index(long long index, std::size_t count, const std::string& what, const std::string& of);
/// The axes of [0, rank) not in `axes`.
Axes complement_axes(const Axes& axes, std::size_t rank);
/// Shape with the given axes set to 1 (the keep-dims statistics shape).
Shape keepdims_shape(const Shape& s, const Axes& reduced);
/// The dims of s at the given axes, in order.
Shape select_dims(const Shape& s, const Axes& axes);

}  // namespace normlab
