#!/usr/bin/env bash
# Builds the real open-source yubaba that `tests/api/real_yubaba.rs` runs as a three-node raft
# cluster on loopback, and prints the binary's path: crates.io `yubaba` at the version below,
# checked against its sha256, built with its own published Cargo.lock (`--locked`) without
# default features (no ACME, litestream or pond: nothing it would fetch; its workload runtime
# is the stub), as a debug build without debug info (about 3 minutes cold on two cores;
# nothing to do once built).
#
# `HEADROOM_YUBABA_BIN`, when set, names a binary to use instead; it must answer the same
# version.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.8.48
crate_sha256=d5e7ba0e10387bcac12b99357389d401a5c7b36386c9ea85037918ccf2f48188

answers_version() {
  [ -f "$1" ] && [ -x "$1" ] && [ "$("$1" --version 2>/dev/null)" = "yubaba $version" ]
}

if [ -n "${HEADROOM_YUBABA_BIN:-}" ]; then
  if ! answers_version "$HEADROOM_YUBABA_BIN"; then
    echo "scripts/yubaba.sh: HEADROOM_YUBABA_BIN=$HEADROOM_YUBABA_BIN is not a yubaba $version binary" >&2
    exit 1
  fi
  echo "$HEADROOM_YUBABA_BIN"
  exit 0
fi

root="$(pwd)/target/yubaba"
bin="$root/bin/yubaba"
if answers_version "$bin"; then
  echo "$bin"
  exit 0
fi

echo "building yubaba $version for tests/api/real_yubaba.rs (once: about 3 minutes)" >&2
src="$root/src/yubaba-$version"
if [ ! -f "$src/Cargo.toml" ]; then
  # Prepared in a folder of its own and moved into place last, so a run stopped half-way
  # (CI stops this build when a lint fails) leaves nothing that looks prepared.
  mkdir -p "$root/src"
  work=$(mktemp -d "$root/src/.prepare-XXXXXX")
  archive="$work/yubaba-$version.crate"
  curl -fsSL --retry 3 -o "$archive" "https://static.crates.io/crates/yubaba/yubaba-$version.crate"
  echo "$crate_sha256  $archive" | sha256sum -c --quiet -
  tar xzf "$archive" -C "$work"
  # Its own workspace: otherwise cargo takes headroom's Cargo.toml above it for one.
  printf '\n[workspace]\n' >>"$work/yubaba-$version/Cargo.toml"
  # The one change to the published lock: webpki-roots 1.0.11, which it names, is not on
  # every registry mirror yet; 1.0.10 is the release before it (same API).
  (cd "$work/yubaba-$version" && cargo update --quiet -p webpki-roots@1.0.11 --precise 1.0.10)
  rm -rf "$src"
  mv "$work/yubaba-$version" "$src"
  rm -rf "$work"
fi
CARGO_TARGET_DIR="$root/build" CARGO_PROFILE_DEV_DEBUG=0 \
  cargo build --quiet --locked --manifest-path "$src/Cargo.toml" --no-default-features --bin yubaba >&2
install -D -m 0755 "$root/build/debug/yubaba" "$bin"
if ! answers_version "$bin"; then
  echo "scripts/yubaba.sh: the built $bin does not answer 'yubaba $version' to --version" >&2
  exit 1
fi
echo "$bin"
