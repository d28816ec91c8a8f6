#!/usr/bin/python3
"""Writes the CSV, image and text fixtures that tests/test_data_loaders.cpp reads.

Run with Debian's interpreter (python3-pil for the images):
    /usr/bin/python3 tests/data/make_data_fixtures.py
The files are committed; rerun only to change them. (.npy fixtures: scripts/make_npy_fixtures.py.)
"""
import gzip
import io
import os

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))


def write(rel, data):
    path = os.path.join(HERE, rel)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    # CSV: a header, a text label column, quoting, CRLF, blank lines.
    write("csv/header_label.csv", "a,b,label\n1,2,x\n3,4.5,y\r\n\n-5e-1,+7,z\n")
    write("csv/quoted_semicolon.csv", 'size line to skip\n"x";"y"\n"1";"2"\n" 3 ";4\n')
    write("csv/ragged.csv", "1,2,3\n4,5,6\n7,8\n")
    write("csv/nonnumeric.csv", "p,q,r\n1,2,3\n4,abc,6\n")
    write("csv/empty_cell.csv", "1,2,3\n4,,6\n")
    write("csv/nan_inf.csv", "nan,inf,-inf\n")
    write("csv/only_header.csv", "a,b\n")
    table = "\n".join(",".join(str(r * 4 + c) for c in range(4)) for r in range(3)) + "\n"
    write("csv/table.csv.gz", gzip.compress(table.encode(), mtime=0))
    write("csv/truncated.csv.gz", gzip.compress(table.encode(), mtime=0)[:-12])

    # Images: pixel (y, x) of the 6 x 8 RGB image is (10 y + x, 100 + y, 200 + x).
    h, w = 6, 8
    rgb = np.zeros((h, w, 3), dtype=np.uint8)
    for y in range(h):
        for x in range(w):
            rgb[y, x] = (10 * y + x, 100 + y, 200 + x)
    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, "PNG")
    png = buf.getvalue()
    write("images/ok/a_rgb_6x8.png", png)
    grey = np.arange(48, dtype=np.uint8).reshape(6, 8) * 5
    buf = io.BytesIO()
    Image.fromarray(grey, "L").save(buf, "PNG")
    write("images/ok/b_grey_6x8.png", buf.getvalue())
    buf = io.BytesIO()
    Image.fromarray(np.full((10, 4, 3), 128, dtype=np.uint8), "RGB").save(buf, "JPEG", quality=95)
    write("images/ok/c_flat_10x4.jpg", buf.getvalue())
    write("images/ok/notes.txt", "not an image; folder listings skip it\n")
    write("images/bad/text.png", "this is not a PNG\n")
    write("images/bad/truncated.png", png[: len(png) // 2])

    # Text: sentence ends, a blank line, apostrophes, abbreviations.
    write("text/small.txt",
          "Hello world. The cat's hat is RED!\nIs it? Yes, e.g. this one\nspans lines.\n\n"
          "A paragraph without a full stop\n\n'Quoted' words, 3.5 and 42.\n")
    write("text/no_words.txt", "... !!! ???\n")


if __name__ == "__main__":
    main()
