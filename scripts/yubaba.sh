#!/usr/bin/env bash
# Builds the real open-source yubaba that `tests/api/real_yubaba.rs` runs as a three-node raft
# cluster on loopback: crates.io `yubaba` at the version below, without its default features
# (no ACME, litestream or pond: nothing it would fetch, and its workload runtime is the stub),
# as a debug build (about 3.5 minutes cold on two cores; nothing to do once installed).
#
# Prints the binary's path. `HEADROOM_YUBABA_BIN`, when set to an existing file, is used as is.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.8.48
if [ -n "${HEADROOM_YUBABA_BIN:-}" ] && [ -x "$HEADROOM_YUBABA_BIN" ]; then
  echo "$HEADROOM_YUBABA_BIN"
  exit 0
fi

root=target/yubaba
bin="$root/bin/yubaba"
# `cargo install` skips a version already installed in the root; its build stays in its own
# target directory so a later version rebuilds only what changed.
#
# Not `--locked`: yubaba's published lock names crate versions the package mirror may not
# carry yet (webpki-roots 1.0.11 here); resolving afresh takes the newest compatible ones.
CARGO_TARGET_DIR=target/yubaba-build cargo install "yubaba@$version" \
  --no-default-features --bin yubaba --debug --root "$root" --quiet >&2
if [ "$("$bin" --version 2>/dev/null)" != "yubaba $version" ]; then
  echo "scripts/yubaba.sh: $bin does not answer 'yubaba $version' to --version" >&2
  exit 1
fi
echo "$(pwd)/$bin"
