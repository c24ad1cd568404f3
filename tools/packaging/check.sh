#!/usr/bin/env bash
# The published crates compile from their packages alone. `cargo package` makes each one's
# .crate (the files its manifest keeps, the manifest as crates.io would get it); the .crates are
# unpacked side by side into one workspace, each sibling dependency patched to its unpacked
# package as the registry would give it, and checked in one `cargo check` sharing this target
# directory's third-party builds. (`cargo package`'s own verification builds each package in a
# build of its own: the core compiled once per package, 150 s on 2 cores against about 30 s.)
set -euo pipefail
cd "$(dirname "$0")/../.."

crates=(blerpc-proto blerpc-build blerpc blerpc-demo blerpc-schema blerpc-gateway blerpc-dissect
  blerpc-report blerpc-cli)
target="${CARGO_TARGET_DIR:-$PWD/target}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
if [ -z "$version" ]; then
  echo "error: no [workspace.package] version in Cargo.toml" >&2
  exit 1
fi

args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done
cargo package --no-verify --locked --allow-dirty "${args[@]}"

unpacked="$target/package/unpacked"
rm -rf "$unpacked"
mkdir -p "$unpacked"
{
  echo '[workspace]'
  echo 'resolver = "3"'
  printf 'members = ['
  for c in "${crates[@]}"; do printf '"%s-%s", ' "$c" "$version"; done
  echo ']'
  echo '[patch.crates-io]'
  for c in "${crates[@]}"; do printf '%s = { path = "%s-%s" }\n' "$c" "$c" "$version"; done
} >"$unpacked/Cargo.toml"
for c in "${crates[@]}"; do
  tar -xzmf "$target/package/$c-$version.crate" -C "$unpacked"
  # -m: the files dated now, so the check never takes an earlier run's build for current
done
# The workspace's lock: the same third-party versions as every other build here.
cp Cargo.lock "$unpacked/Cargo.lock"
CARGO_TARGET_DIR="$target" cargo check --manifest-path "$unpacked/Cargo.toml" --workspace --lib --bins
