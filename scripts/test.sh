#!/usr/bin/env bash
# Runs headroom's test suite, first installing the Debian packages the tests drive for real
# (`scripts/test-deps.sh`: chromium, its driver, cloud-init) and building the real yubaba that
# one test runs (`scripts/yubaba.sh`). Extra arguments go to `cargo test`.
#
# In CI (`CI=true`) a test that did not run is a failure: neither the browser tests
# (HEADROOM_SKIP_BROWSER) nor the real yubaba's (HEADROOM_SKIP_YUBABA) may be skipped, the
# browser and its driver must be on PATH after the install step, and a run that reports any
# test as ignored fails after cargo's own verdict.
set -euo pipefail
cd "$(dirname "$0")/.."

in_ci=false
case "${CI:-}" in true | 1) in_ci=true ;; esac

for skip in HEADROOM_SKIP_BROWSER HEADROOM_SKIP_YUBABA; do
  if $in_ci && [ -n "${!skip+set}" ]; then
    echo "CI: $skip is set, which would report tests as ignored; unset it" >&2
    exit 1
  fi
done

scripts/test-deps.sh
if $in_ci; then
  for tool in chromium chromedriver; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "CI: $tool is not on PATH, so the browser tests cannot run" >&2
      exit 1
    fi
  done
fi

# The real open-source yubaba, which one test runs as a three-node cluster (built once;
# HEADROOM_SKIP_YUBABA=1 outside CI reports that test as ignored instead).
if [ -z "${HEADROOM_SKIP_YUBABA+set}" ]; then
  HEADROOM_YUBABA_BIN=$(scripts/yubaba.sh)
  export HEADROOM_YUBABA_BIN
fi

if ! $in_ci; then
  exec cargo test --locked "$@"
fi

# In CI: keep the report to count what was ignored once cargo has passed.
report=$(mktemp)
trap 'rm -f "$report"' EXIT
cargo test --locked "$@" 2>&1 | tee "$report"
ignored=$(grep -E '^test .* \.\.\. ignored' "$report" || true)
if [ -n "$ignored" ]; then
  echo "CI: $(printf '%s\n' "$ignored" | wc -l) test(s) ignored; every test must run in CI:" >&2
  printf '%s\n' "$ignored" >&2
  exit 1
fi
