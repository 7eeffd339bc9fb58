#!/usr/bin/env bash
# Runs headroom's test suite, first installing the Debian packages the tests drive for real
# (`scripts/test-deps.sh`: chromium, its driver, cloud-init, postgresql), building the real
# yubaba that one test runs (`scripts/yubaba.sh`) and starting a throwaway PostgreSQL for the
# PostgreSQL tests (`scripts/postgres.sh`, stopped and removed at the end). Runs the whole
# suite on SQLite, then the app tests (tests/api) again on PostgreSQL.
# Extra arguments go to `cargo test` in both passes.
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
# Last in, first out: the test passes stop before the database they use.
trap 'set +e; for ((i = ${#cleanup[@]} - 1; i >= 0; i--)); do eval "${cleanup[i]}"; done' EXIT
if [ -z "${HEADROOM_SKIP_POSTGRES+set}" ]; then
  pg_dir=$(mktemp -d)
  cleanup+=("scripts/postgres.sh stop '$pg_dir' 2>/dev/null; rm -rf '$pg_dir'")
  HEADROOM_TEST_POSTGRES_URL=$(scripts/postgres.sh start "$pg_dir")
  export HEADROOM_TEST_POSTGRES_URL
fi

# Two passes, one after the other: everything on SQLite, then the app tests (tests/api:
# storage, operations, integration, browser) again with every app on a PostgreSQL database of
# its own (HEADROOM_TEST_STORE=postgres). Side by side they took a quarter less time, but the
# load turned timing-bound tests (render fairness, a browser's contrast check mid-swap) red
# one run in two. HEADROOM_TEST_STORES=sqlite (outside CI) runs the first only.
stores=${HEADROOM_TEST_STORES:-sqlite postgres}
if [ -n "${HEADROOM_SKIP_POSTGRES+set}" ]; then
  stores=sqlite
fi
if $in_ci && [ "$stores" != "sqlite postgres" ]; then
  echo "CI: HEADROOM_TEST_STORES is set to '$stores'; CI runs both stores" >&2
  exit 1
fi
for store in $stores; do
  case "$store" in
    sqlite | postgres) ;;
    *) echo "HEADROOM_TEST_STORES: unknown store $store (sqlite, postgres)" >&2; exit 1 ;;
  esac
done

reports=$(mktemp -d)
cleanup+=("rm -rf '$reports'")
# The PostgreSQL pass leaves out the modules that never open the configured store (they name
# a SQLite file of their own, or no database at all): the SQLite pass runs them.
pg_skips=()
for module in backup cli demo_loop demo_provider demo_walk docs migrations postgres layers cloud_init; do
  pg_skips+=(--skip "$module::")
done
pg_args=(--test api "$@")
if [[ " $* " == *" -- "* ]]; then pg_args+=("${pg_skips[@]}"); else pg_args+=(-- "${pg_skips[@]}"); fi
failed=()
for store in $stores; do
  echo "== tests on $store"
  case "$store" in
    sqlite) cargo test --locked "$@" 2>&1 | tee "$reports/$store" || failed+=("$store") ;;
    postgres)
      HEADROOM_TEST_STORE=postgres cargo test --locked "${pg_args[@]}" 2>&1 |
        tee "$reports/$store" || failed+=("$store")
      ;;
  esac
done

if $in_ci; then
  # Every test must run in CI: a pass that reports any test as ignored fails.
  for store in $stores; do
    ignored=$(grep -E '^test .* \.\.\. ignored' "$reports/$store" || true)
    if [ -n "$ignored" ]; then
      echo "CI: $(printf '%s\n' "$ignored" | wc -l) test(s) ignored on $store; every test must run in CI:" >&2
      printf '%s\n' "$ignored" >&2
      failed+=("$store (ignored tests)")
    fi
  done
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "tests failed: ${failed[*]}" >&2
  exit 1
fi
