#!/usr/bin/env bash
# The Kotlin bindings' check (JVM): builds crates/blerpc-ffi (the library the bindings load) and
# UniFFI's generator in the workspace's target directory (tools/bindings/common.sh, shared with
# the Python check), generates the Kotlin code from the library, compiles it with the
# hand-written layer (bindings/kotlin/src) and the tests (bindings/kotlin/tests) with kotlinc
# from the npm package kotlin-compiler (which carries kotlinx-coroutines and kotlin-test) and
# Debian's JNA, and runs the tests with java against real `blerpc serve` processes
# ($BLERPC_BIN, default target/debug/blerpc: `cargo build -p blerpc-cli` makes it).
# tools/install.sh installs kotlin-compiler 2.4.20 and libjna-java.
#
#   bash tools/bindings/kotlin.sh [TEST NAME SUBSTRINGS...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$repo"
fail() {
  printf '\n!!! error: Kotlin bindings: %s\n' "$*" >&2
  exit 1
}

kotlin_home="${KOTLIN_HOME:-$(npm root -g 2>/dev/null || true)/kotlin-compiler}"
kotlinc="$kotlin_home/bin/kotlinc"
klib="$kotlin_home/lib"
[ -x "$kotlinc" ] || fail "no kotlinc at $kotlinc: npm install -g kotlin-compiler@2.4.20 (tools/install.sh), or set KOTLIN_HOME"
for jar in kotlin-stdlib kotlin-test kotlinx-coroutines-core-jvm; do
  [ -f "$klib/$jar.jar" ] || fail "no $klib/$jar.jar in the kotlin-compiler package"
done
jna="${JNA_JAR:-/usr/share/java/jna.jar}"
[ -f "$jna" ] || fail "no JNA at $jna: apt-get install libjna-java (tools/install.sh), or set JNA_JAR"
command -v java >/dev/null || fail "no java on PATH (OpenJDK 17: apt-get install openjdk-17-jre-headless)"
export BLERPC_BIN="${BLERPC_BIN:-$target/debug/blerpc}"
[ -x "$BLERPC_BIN" ] || fail "no blerpc binary at $BLERPC_BIN: run cargo build -p blerpc-cli"

cargo build --quiet --locked -p blerpc-ffi || fail "cannot build crates/blerpc-ffi"
lib="$target/debug/libblerpc_ffi.so"
bindgen="$(uniffi_bindgen)" || fail "cannot build crates/uniffi-bindgen"

# Generated code lives in the target directory, never in the tree. It is replaced only when it
# changed, so the jars below are recompiled only when an input did.
out="$target/bindings/kotlin"
mkdir -p "$out/gen"
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
# crates/blerpc-ffi/uniffi.toml names the package (dev.blerpc.ffi).
"$bindgen" generate --library "$lib" --language kotlin --no-format --out-dir "$fresh" >/dev/null \
  || fail "uniffi-bindgen could not generate the Kotlin code"
generated="dev/blerpc/ffi/blerpc_ffi.kt"
if ! cmp -s "$fresh/$generated" "$out/gen/$generated"; then
  mkdir -p "$out/gen/dev/blerpc/ffi"
  cp "$fresh/$generated" "$out/gen/$generated"
fi

# Compiles SOURCES into JAR against CLASSPATH with kotlinc, unless JAR is newer than all of
# them and every jar of CLASSPATH.
compile() {
  local jar="$1" cp="$2"
  shift 2
  local -a cp_jars
  IFS=: read -ra cp_jars <<<"$cp"
  if [ -f "$jar" ] && [ -z "$(find "$@" "${cp_jars[@]}" -newer "$jar" -print -quit)" ]; then
    return 0
  fi
  echo "kotlinc -> $(basename "$jar")" >&2
  "$kotlinc" -cp "$cp" "$@" -d "$jar.tmp.jar" || fail "kotlinc could not compile $*"
  mv "$jar.tmp.jar" "$jar"
}
deps="$jna:$klib/kotlinx-coroutines-core-jvm.jar"
# The library an app puts on its class path: the generated code and the hand-written layer.
compile "$out/blerpc-kotlin.jar" "$deps" "$out/gen/$generated" bindings/kotlin/src
compile "$out/blerpc-kotlin-tests.jar" "$out/blerpc-kotlin.jar:$deps:$klib/kotlin-test.jar" \
  bindings/kotlin/tests

# The default known-keys file and identity live under $XDG_CONFIG_HOME: never the user's.
config="$(mktemp -d)"
trap 'rm -rf "$fresh" "$config"' EXIT
XDG_CONFIG_HOME="$config" timeout 600 java -Djna.library.path="$(dirname "$lib")" \
  -cp "$out/blerpc-kotlin-tests.jar:$out/blerpc-kotlin.jar:$deps:$klib/kotlin-stdlib.jar:$klib/kotlin-test.jar" \
  dev.blerpc.test.MainKt "$@"
