#!/usr/bin/env bash
# Installs the Debian packages headroom's tests drive for real, when missing: chromium +
# chromium-driver (browser tests over WebDriver), cloud-init (its own schema check of
# rendered payloads) and postgresql (the second store; scripts/postgres.sh starts a
# throwaway cluster of it; Debian's package also creates and starts a system cluster on port
# 5432, which the tests leave alone). Does nothing when all are there. Called by scripts/test.sh, and by
# .ci/run ahead of time so the download overlaps the lint build.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v cloud-init >/dev/null 2>&1 || missing+=(cloud-init)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing test dependencies: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! { $sudo apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
  echo "could not install ${missing[*]}" >&2
  exit 1
fi
