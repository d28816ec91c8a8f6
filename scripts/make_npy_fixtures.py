#!/usr/bin/python3
"""Writes the small .npy fixtures that tests/test_data_npy.cpp reads (tests/data/npy/).

Run with Debian's interpreter, which has python3-numpy:  /usr/bin/python3 scripts/make_npy_fixtures.py
The files are committed; rerun only to change them. Each valid file holds values the C++
tests check literally; the broken ones exercise the reader's error messages.
"""
import os
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "npy")


def save(name, arr, version=None):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=True)
    return path


def main():
    os.makedirs(OUT, exist_ok=True)
    # Every numeric dtype, little endian, shape (2, 3), values 0..5 except where noted.
    base = np.arange(6).reshape(2, 3)
    for dt in ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"]:
        save(f"{np.dtype(dt).name}.npy", base.astype("<" + dt))
    # float16: normal, negative, max finite, min subnormal, inf, nan.
    save("float16.npy", np.array([0.5, -2.0, 65504.0, 2.0**-24, np.inf, np.nan], dtype="<f2"))
    # Integer extremes.
    save("int8_extremes.npy", np.array([-128, 127], dtype="i1"))
    save("int64_extremes.npy", np.array([-(2**63), 2**53, -1], dtype="<i8"))
    save("uint64_max.npy", np.array([2**64 - 1, 0], dtype="<u8"))
    save("bool.npy", np.array([[True, False, True], [False, False, True]]))
    # Big endian.
    save("big_f8.npy", np.array([1.5, -0.25, 1e300], dtype=">f8"))
    save("big_i4.npy", np.array([[-1, 2], [70000, -70000]], dtype=">i4"))
    save("big_f2.npy", np.array([0.5, -2.0, 65504.0], dtype=">f2"))
    save("big_u2.npy", np.array([1, 65535], dtype=">u2"))
    # Fortran order: the same logical (2, 3) array stored column by column.
    save("fortran_f8.npy", np.asfortranarray(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])))
    save("fortran_i2_3d.npy", np.asfortranarray(np.arange(24, dtype="<i2").reshape(2, 3, 4)))
    # Format versions 2.0 and 3.0.
    save("v2.npy", np.array([1.0, 2.0, 3.0], dtype="<f4"), version=(2, 0))
    save("v3.npy", np.array([[7, 8]], dtype="<i4"), version=(3, 0))
    # Scalar and empty arrays.
    save("scalar.npy", np.array(3.25))
    save("empty.npy", np.zeros((0, 3), dtype="<f4"))
    # Hidden states (B, T, D) = (2, 3, 4) with a (B, T) padding mask, for the npy source.
    save("hidden.npy", np.arange(24, dtype="<f4").reshape(2, 3, 4) / 8)
    save("mask_bool.npy", np.array([[True, True, False], [True, False, False]]))
    save("mask_u8.npy", np.array([[1, 1, 1], [1, 1, 0]], dtype="u1"))
    save("mask_bad_values.npy", np.array([[1, 2, 0], [1, 0, 0]], dtype="i4"))
    save("mask_wrong_shape.npy", np.ones((2, 4), dtype=bool))

    # Unsupported dtypes.
    save("complex64.npy", np.array([1 + 2j], dtype="c8"))
    save("unicode.npy", np.array(["ab", "c"]))
    save("object.npy", np.array([1, "a"], dtype=object))
    save("structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i2")]))
    save("longdouble.npy", np.zeros(2, dtype=np.longdouble))

    # Broken files.
    good = open(save("_tmp.npy", np.arange(6, dtype="<f8")), "rb").read()
    os.remove(os.path.join(OUT, "_tmp.npy"))
    with open(os.path.join(OUT, "truncated.npy"), "wb") as f:
        f.write(good[:-5])
    with open(os.path.join(OUT, "extra_bytes.npy"), "wb") as f:
        f.write(good + b"\0" * 8)
    with open(os.path.join(OUT, "bad_magic.npy"), "wb") as f:
        f.write(b"\x93NUMPX" + good[6:])
    with open(os.path.join(OUT, "bad_header.npy"), "wb") as f:
        f.write(good.replace(b"'shape': (6,)", b"'shape': [6,]"))
    with open(os.path.join(OUT, "truncated_header.npy"), "wb") as f:
        f.write(good[:40])
    with open(os.path.join(OUT, "not_npy.npy"), "wb") as f:
        f.write(b"a,b,c\n1,2,3\n")


if __name__ == "__main__":
    main()
