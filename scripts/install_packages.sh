#!/usr/bin/env bash
# Installs the given Debian packages that are not installed yet (apt-get, as root or via
# sudo); does nothing, quickly, when all are present. Used by setup.sh, sanitize.sh, fuzz.sh.
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "normlab: installing ${missing[*]} (apt-get)" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
# apt's and dpkg's own lines (hundreds for chromium) only when it fails: the line above
# says what happens.
if ! log="$({ $sudo apt-get update -qq &&
              DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"; } 2>&1)"; then
  printf '%s\n' "$log" >&2
  echo "normlab: apt-get could not install ${missing[*]}" >&2
  exit 1
fi
