#pragma once
// numpy .npy files (format versions 1.0, 2.0, 3.0; numpy's NEP 1 "A simple file format for
// NumPy arrays", implemented in numpy/lib/format.py): read any numeric array numpy writes,
// write what numpy reads back exactly.
#include <cstdint>
#include <filesystem>
#include <string>

#include <xtensor/xarray.hpp>

#include "tensor/tensor.hpp"

namespace normlab {

/// An array read from an .npy file, converted to double.
struct NpyArray {
    /// The values in row-major (C) order whatever the file's order. Exact for every dtype
    /// except int64/uint64 magnitudes above 2^53, which round to the nearest double.
    xt::xarray<double> values;
    std::string descr;   ///< the file's dtype descriptor, e.g. "<f4", ">i8", "|b1"
    std::string dtype;   ///< numpy's name for it: "float32", "int64", "bool", ...
    bool fortran_order = false;  ///< as stored in the file (values are row-major anyway)
    int major_version = 1;       ///< format version of the file: 1, 2 or 3
};

/// The header of an .npy file: what the array is, known before its data is read.
struct NpyHeader {
    Shape shape;
    std::string descr;           ///< e.g. "<f4"
    std::string dtype;           ///< numpy's name: "float32", ...
    std::size_t item_size = 0;   ///< bytes per element
    std::size_t data_offset = 0; ///< where the data starts in the file
    bool fortran_order = false;
    int major_version = 1;
    /// Elements of `shape` (saturating at SIZE_MAX when the product does not fit).
    std::size_t count() const;
};

/// Parses the magic string, version and header dict at the start of `bytes` (the data
/// need not follow, so a prefix of a large file is enough). Throws InputError as
/// parse_npy does for a bad magic string, version, header or dtype, or when `bytes` ends
/// inside the header.
NpyHeader parse_npy_header(const std::string& bytes, const std::string& what);

/// The header of the .npy file at `path` of `file_bytes` bytes, read from its first MiB (a
/// prefix is enough: parse_npy_header). Throws InputError as parse_npy_header does.
NpyHeader read_npy_header(const std::filesystem::path& path, std::size_t file_bytes);

/// The values a file of `file_bytes` with header `h` holds: the header's count, or fewer
/// when the file is shorter than the header says.
std::size_t npy_values_held(const NpyHeader& h, std::size_t file_bytes);

/// What read_npy holds at its peak for a file of `file_bytes` with header `h`: the file's
/// bytes, and the values the file holds as doubles (twice for Fortran order: the array in
/// file order and its transpose). A header that claims more values than the file holds
/// counts only those (parse_npy refuses the file before allocating for them). Saturates at
/// SIZE_MAX.
std::size_t npy_read_bytes(const NpyHeader& h, std::size_t file_bytes);

/// Throws InputError "<path>: reading it takes about <bytes> of memory (...), more than
/// <limit_what>" when reading the .npy file at `path` would hold more than `limit` bytes
/// (npy_read_bytes), judged from the file's size and its header alone. Does nothing for a
/// path that is not a regular file or whose header does not parse: read_npy says why.
void check_npy_fits(const std::filesystem::path& path, std::size_t limit, const std::string& limit_what);

/// Parses the bytes of an .npy file. `what` names the file in messages. Accepts dtypes
/// bool, int8..int64, uint8..uint64, float16/32/64 in either byte order. Throws InputError
/// "<what>: <problem>" for a bad magic string, an unsupported version, a malformed header,
/// an unsupported dtype (complex, object, strings, structured, ...), a truncated file or
/// data whose size does not match the header's shape.
NpyArray parse_npy(const std::string& bytes, const std::string& what);

/// Reads an .npy file. Throws InputError naming the path when it is missing, is a
/// directory, cannot be read, or is not a valid numeric .npy (see parse_npy), and before
/// reading it when it would take more than the memory and swap this process may use
/// (check_npy_fits against physical_memory_bytes() + swap_bytes(), whatever --max-memory
/// says: a file that large cannot be read, and trying would end in the process being
/// killed, not in a message).
NpyArray read_npy(const std::filesystem::path& path);

/// The bytes of an .npy file (version 1.0, little endian, C order) holding `values`
/// rounded to `dtype`: float16 -> "<f2", float32 -> "<f4", float64 -> "<f8". bfloat16 is
/// written as "<f4" (numpy has no bfloat16; every bfloat16 value is exact in float32).
std::string npy_bytes(const xt::xarray<double>& values, DType dtype);
/// npy_bytes of a tensor in its own dtype.
std::string npy_bytes(const Tensor& t);
/// The bytes of an .npy file of dtype bool ("|b1"): 0 is False, anything else True.
/// Used for padding masks.
std::string npy_bytes_bool(const xt::xarray<std::uint8_t>& mask);
/// The bytes of an .npy file of dtype uint8 ("|u1").
std::string npy_bytes_u8(const xt::xarray<std::uint8_t>& values);

/// Writes `bytes` to `path` (not atomically: the report module renames a temporary file).
/// Throws EnvError naming the path when the file cannot be written.
void write_file_bytes(const std::filesystem::path& path, const std::string& bytes);
/// write_file_bytes(path, npy_bytes(t)).
void write_npy(const std::filesystem::path& path, const Tensor& t);

}  // namespace normlab
