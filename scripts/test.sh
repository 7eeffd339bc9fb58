#!/usr/bin/env bash
# Runs headroom's test suite, first installing the Debian packages the tests drive for real
# (`scripts/test-deps.sh`: chromium, its driver, cloud-init, postgresql), building the real
# yubaba that one test runs (`scripts/yubaba.sh`) and starting a throwaway PostgreSQL for the
# PostgreSQL tests (`scripts/postgres.sh`, stopped and removed at the end). Extra arguments go
# to `cargo test`.
#
# In CI (`CI=true`) a test that did not run is a failure: neither the browser tests
# (HEADROOM_SKIP_BROWSER), the real yubaba's (HEADROOM_SKIP_YUBABA) nor PostgreSQL's
# (HEADROOM_SKIP_POSTGRES) may be skipped, the browser and its driver must be on PATH after
# the install step, and a run that reports any test as ignored fails after cargo's own verdict.
set -euo pipefail
cd "$(dirname "$0")/.."

in_ci=false
case "${CI:-}" in true | 1) in_ci=true ;; esac

for skip in HEADROOM_SKIP_BROWSER HEADROOM_SKIP_YUBABA HEADROOM_SKIP_POSTGRES; do
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

# A throwaway PostgreSQL on a Unix socket in a temporary folder (HEADROOM_SKIP_POSTGRES=1
# outside CI reports its tests as ignored instead).
# Every step runs even if one fails (set -e would stop the rest and turn a green run red).
cleanup=()
trap 'set +e; for c in "${cleanup[@]}"; do eval "$c"; done' EXIT
if [ -z "${HEADROOM_SKIP_POSTGRES+set}" ]; then
  pg_dir=$(mktemp -d)
  cleanup+=("scripts/postgres.sh stop '$pg_dir' 2>/dev/null; rm -rf '$pg_dir'")
  HEADROOM_TEST_POSTGRES_URL=$(scripts/postgres.sh start "$pg_dir")
  export HEADROOM_TEST_POSTGRES_URL
fi

if ! $in_ci; then
  cargo test --locked "$@"
  exit
fi

# In CI: keep the report to count what was ignored once cargo has passed.
report=$(mktemp)
cleanup+=("rm -f '$report'")
cargo test --locked "$@" 2>&1 | tee "$report"
ignored=$(grep -E '^test .* \.\.\. ignored' "$report" || true)
if [ -n "$ignored" ]; then
  echo "CI: $(printf '%s\n' "$ignored" | wc -l) test(s) ignored; every test must run in CI:" >&2
  printf '%s\n' "$ignored" >&2
  exit 1
fi
