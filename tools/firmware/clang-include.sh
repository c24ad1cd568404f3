#!/usr/bin/env bash
# Prints clang's own include directory (where stdint.h lives) as Debian's libclang-dev installs
# it, /usr/lib/llvm-<N>/lib/clang/<version>/include, newest first; fails if there is none.
# nrf-mpsl-sys's bindgen needs it: BINDGEN_EXTRA_CLANG_ARGS="-I$(bash tools/firmware/clang-include.sh)".
set -euo pipefail
for d in $(ls -d /usr/lib/llvm-*/lib/clang/*/include 2>/dev/null | sort -V -r); do
  if [ -f "$d/stdint.h" ]; then
    echo "$d"
    exit 0
  fi
done
echo "no clang include directory with stdint.h under /usr/lib/llvm-*/lib/clang/ (install libclang-dev)" >&2
exit 1
