#!/usr/bin/env bash
# Runs headroom's test suite, first installing the Debian packages the tests drive for real:
# chromium + chromium-driver (browser tests over WebDriver) and cloud-init (its own schema
# check of rendered payloads). Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v cloud-init >/dev/null 2>&1 || missing+=(cloud-init)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing test dependencies: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cargo test --locked "$@"
