#!/usr/bin/env bash
# The soak (issue 18): builds the release binary and `benches/soak.rs`, then runs ten minutes
# of mixed load against `headroom serve` with 100 simulated fleets scraped on loopback and the
# Hetzner fake answering one provision a minute, printing memory, open files, WAL size and p99
# every 10 s. Exits 1 when a goal is missed (see the top of benches/soak.rs). Not run in CI.
#
# HEADROOM_SOAK_SECONDS (default 600), HEADROOM_SOAK_CLIENTS (4), HEADROOM_SOAK_PAUSE_MS (20),
# HEADROOM_SOAK_HISTORY_HOURS (48: the history each fleet gets before the load; 0 starts empty).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --locked --bench soak "$@"
