#!/usr/bin/env bash
# Runs a command at the lowest CPU priority, so it takes the cores only while nothing else
# wants them. Start it with `setsid` (a session of its own, stopped as a whole by
# `kill -- -PID`): the kernel's autogroup scheduling then puts the session in a group of its
# own, and between groups only the group's nice counts, so that is raised too; `nice` alone
# would rank the command only among its own session's processes and it would take a fair
# share of the cores from the rest (measured: a release build beside clippy took CI from
# about 22 to 30 minutes on two cores).
echo 19 >/proc/self/autogroup 2>/dev/null || true
exec nice -n 19 "$@"
