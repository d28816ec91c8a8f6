#!/usr/bin/env bash
# Checks the user docs offline: every relative markdown link [text](target) points at a file
# or folder that exists (and, with #anchor, at a heading of that markdown file), and
# README.md stays the short quick path (under 300 lines).
#   scripts/check_docs.sh            # the docs listed below, from the repository root
#   scripts/check_docs.sh FILE.md... # only those files, no length check
# Links inside fenced code blocks and inline code are not links; http(s)/mailto links are
# skipped (no network). Exit 1 with one line per broken link.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

max_readme_lines=300
if [ $# -gt 0 ]; then
  files=("$@")
  check_length=false
else
  shopt -s nullglob
  files=(README.md configs/README.md results/README.md scripts/*.md tests/*.md)
  check_length=true
fi

# GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped,
# spaces turned into -.
slug() {
  printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

# Prints the anchors of a markdown file's headings (outside code blocks), one a line.
anchors() {
  awk '/^(```|~~~)/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); sub(/ +#*$/, ""); print }' "$1" |
    while IFS= read -r heading; do slug "$heading"; echo; done
}

# Prints "LINE<TAB>TARGET" for each markdown link outside code blocks and inline code.
links() {
  awk '/^(```|~~~)/ { code = !code; next }
       !code {
         line = $0
         gsub(/`[^`]*`/, "", line)   # inline code is not a link
         while (match(line, /\]\([^) ]+( "[^"]*")?\)/)) {
           target = substr(line, RSTART + 2, RLENGTH - 3)
           sub(/ ".*$/, "", target)
           print NR "\t" target
           line = substr(line, RSTART + RLENGTH)
         }
       }' "$1"
}

errors=0
checked=0
for file in "${files[@]}"; do
  if [ ! -f "$file" ]; then
    echo "check_docs: $file: no such file" >&2
    errors=$((errors + 1))
    continue
  fi
  dir="$(dirname "$file")"
  while IFS=$'\t' read -r line target; do
    case "$target" in
      http://* | https://* | mailto:*) continue ;;
    esac
    checked=$((checked + 1))
    path="${target%%#*}"
    anchor=""
    [[ "$target" == *"#"* ]] && anchor="${target#*#}"
    if [ -z "$path" ]; then
      resolved="$file"
    else
      resolved="$dir/$path"
    fi
    if [ ! -e "$resolved" ]; then
      echo "check_docs: $file:$line: link target $target: $resolved does not exist" >&2
      errors=$((errors + 1))
    elif [ -n "$anchor" ]; then
      # The anchors are read whole first: grep -q on a pipe would end the writer early,
      # and pipefail would count that as a miss.
      found=""
      [[ "$resolved" == *.md ]] && found="$(anchors "$resolved")"
      if ! grep -qxF -- "$anchor" <<< "$found"; then
        echo "check_docs: $file:$line: link target $target: no heading with anchor #$anchor in $resolved" >&2
        errors=$((errors + 1))
      fi
    fi
  done < <(links "$file")
done

if $check_length; then
  lines=$(wc -l < README.md)
  if [ "$lines" -ge "$max_readme_lines" ]; then
    echo "check_docs: README.md has $lines lines; the quick path stays under $max_readme_lines (move reference text to configs/README.md, results/README.md, scripts/ or tests/)" >&2
    errors=$((errors + 1))
  fi
fi

# "1 file", "2 files": a count with its noun in the right number.
count() { if [ "$1" -eq 1 ]; then echo "1 $2"; else echo "$1 ${2}s"; fi; }
if [ "$errors" -gt 0 ]; then
  echo "check_docs: $(count "$errors" problem) in $(count "${#files[@]}" file)" >&2
  exit 1
fi
echo "check_docs: $(count "${#files[@]}" file), $(count "$checked" "relative link"), all resolve"
