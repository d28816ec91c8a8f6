#!/usr/bin/python3
"""Makes prose.txt (real English sentences for the "text" source) from the data-set
descriptions that python3-sklearn ships (sklearn/datasets/descr/*.rst, BSD-3-Clause).

Usage: /usr/bin/python3 configs/data/make_prose.py DIR_WITH_RST_FILES > configs/data/prose.txt
Keeps the plain paragraphs (not headings, tables, field lists, code, reference lists) and
strips reStructuredText markup; writes one paragraph per line, paragraphs separated by a
blank line. Only the standard library is used.
"""
import glob
import os
import re
import sys

SKIP_PREFIXES = ("..", ":", "=", "-", "~", "*", ">>>", "|", "[", "+")


def clean(text):
    text = re.sub(r":\w+:`~?([^`<]*?)\s*(<[^>]*>)?`", r"\1", text)  # :func:`x` -> x
    text = re.sub(r"``([^`]*)``", r"\1", text)                       # ``code`` -> code
    text = re.sub(r"`([^`<]*?)\s*(<[^>]*>)?`_+", r"\1", text)       # `link <url>`_ -> link
    text = re.sub(r"\*\*([^*]*)\*\*", r"\1", text)
    text = re.sub(r"\*([^*]*)\*", r"\1", text)
    text = text.replace("::", ":")
    return re.sub(r"\s+", " ", text).strip()


def paragraphs(rst):
    blocks = re.split(r"\n\s*\n", rst)
    for block in blocks:
        lines = block.split("\n")
        if not lines or not lines[0].strip():
            continue
        first = lines[0]
        if first[0].isspace() or first.startswith(SKIP_PREFIXES):
            continue
        if len(lines) >= 2 and re.fullmatch(r"[-=~^\"']{3,}\s*", lines[1]):
            continue  # a heading
        if any(l.strip().startswith(">>>") for l in lines):
            continue
        text = clean(" ".join(lines))
        if len(text.split()) >= 4:
            yield text


def main():
    folder = sys.argv[1]
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.rst"))):
        with open(path, encoding="utf-8") as f:
            out.extend(paragraphs(f.read()))
    sys.stdout.write("\n\n".join(out) + "\n")


if __name__ == "__main__":
    main()
