#!/usr/bin/env bash
# What a parcel costs the whole machine, this build beside a reference build, interleaved round by round:
#   bench/dispatch-cost.sh /path/to/reference/bin      RATE=100 DURATION=20 RUNS=3
# The reference is a folder holding the six services' release binaries of another build, say of the last commit:
#   git worktree add /tmp/ref HEAD~1 && (cd /tmp/ref && swift build -c release) && bench/dispatch-cost.sh /tmp/ref/.build/release
# Each round starts the stack afresh on one build's services and an empty database, books parcels at RATE for
# DURATION (dispatch-load, 1,000 couriers, no fixes: every parcel offered and accepted), waits until nothing moves
# (chat and notify act on the parcels' events after the load stops), and divides the CPU the machine spent (all
# processes, from /proc/stat) by the parcels. Prints each run, the medians and their ratio. The stack is down at the end.
# FIXES=20000 measures location fixes instead: 100,000 couriers send FIXES fixes/s for DURATION (and a parcel a
# second), and the machine's CPU in the drive's steady middle (from its 3rd second to 2 s before its end: seeding the
# couriers is not a fix's cost) is divided by the fixes applied then.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
STACK="$ROOT/deploy/local/stack"
REF="${1:?usage: bench/dispatch-cost.sh REFERENCE_BIN_FOLDER}"
RATE="${RATE:-100}" DURATION="${DURATION:-20}" RUNS="${RUNS:-3}" FIXES="${FIXES:-0}"
SERVICES=(auth stories chat dispatch curation notify)
for s in "${SERVICES[@]}"; do [ -x "$REF/$s" ] || { echo "no $s in $REF" >&2; exit 1; }; done
work="$(mktemp -d)"
source "$ROOT/bench/lib.sh"  # median, ratio

(cd "$ROOT" && swift build -c release >/dev/null 2>&1) || { echo "the build failed" >&2; exit 1; }
BIN="$(cd "$ROOT" && swift build -c release --show-bin-path)"
mkdir -p "$work/build"
for s in "${SERVICES[@]}"; do cp "$BIN/$s" "$work/build/"; done
# However it ends, this build's services go back where the build put them.
trap '"$STACK" down >/dev/null 2>&1; for s in "${SERVICES[@]}"; do cp "$work/build/$s" "$BIN/$s"; done; rm -rf "$work"' EXIT
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }  # user, nice, system, irq, softirq (ticks)
tick="$(getconf CLK_TCK)"

if [ "$FIXES" -gt 0 ]; then
    echo "fix cost, $(date -u +%F): 100,000 couriers sending $FIXES fixes/s for $DURATION s; machine CPU per 1,000 fixes"
else
    echo "dispatch cost, $(date -u +%F): $RATE parcels/s for $DURATION s, 1,000 couriers, no fixes; machine CPU per parcel until idle"
fi
for round in $(seq 1 "$RUNS"); do
    for build in reference this; do
        "$STACK" down --wipe >/dev/null 2>&1  # every round on an empty database, as the first
        from="$REF"; [ "$build" = this ] && from="$work/build"
        for s in "${SERVICES[@]}"; do cp "$from/$s" "$BIN/$s"; done
        "$STACK" start >/dev/null 2>&1
        if [ "$FIXES" -gt 0 ]; then
            # The machine's busy ticks every half second, and the load's lines with when they came: the drive starts
            # at "set up in".
            (while :; do echo "$(date +%s.%N) $(busy)"; sleep 0.5; done) >"$work/cpu-$build-$round" &
            sampler=$!
            "$STACK" load --couriers 100000 --fix-rate "$FIXES" --parcel-rate 1 --duration "$DURATION" \
                --out "$work/$build-$round" 2>&1 | while IFS= read -r line; do echo "$(date +%s.%N) $line"; done \
                >"$work/$build-$round.txt" || { kill "$sampler"; cat "$work/$build-$round.txt" >&2; exit 1; }
            kill "$sampler"
            python3 - "$work/$build-$round" "$work/cpu-$build-$round" "$build" "$round" "$tick" "$DURATION" \
                >>"$work/$build" <<'EOF'
import json, sys
run, cpu, build, round_, tick, duration = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
r = json.load(open(run + ".json"))
start = next(float(l.split()[0]) for l in open(run + ".txt") if "set up in" in l)
samples = [tuple(map(float, l.split())) for l in open(cpu)]
def busy_at(t):  # between the samples around t
    for (t0, b0), (t1, b1) in zip(samples, samples[1:]):
        if t0 <= t <= t1: return b0 + (b1 - b0) * (t - t0) / (t1 - t0)
    sys.exit("no CPU sample around second %.1f of the drive" % (t - start))
a, b = 3, duration - 2
fixes = max(sum(s["fixes"] for s in r["series"] if a <= s["t"] < b), 1)
ms = (busy_at(start + b) - busy_at(start + a)) * 1000 / tick
print(f'{ms * 1000 / fixes:.1f}')
print(f'  round {round_}, {build:<9}: {fixes / (b - a):.0f} fixes/s, {ms * 1000 / fixes:.1f} ms of CPU per 1,000 fixes',
      file=sys.stderr)
EOF
            continue
        fi
        b0="$(busy)"
        "$STACK" load --couriers 1000 --fix-rate 0 --parcel-rate "$RATE" --duration "$DURATION" --out "$work/$build-$round" \
            >"$work/$build-$round.txt" 2>&1 || { cat "$work/$build-$round.txt" >&2; exit 1; }
        # Until the machine is idle: under 0.4 of a core for a second (Tansu alone burns about 0.2 answering the
        # consumers' polls), at most a minute.
        for _ in $(seq 1 60); do a="$(busy)"; sleep 1; [ $(( $(busy) - a )) -lt $((tick * 2 / 5)) ] && break; done
        b1="$(busy)"
        python3 - "$work/$build-$round.json" "$build" "$round" "$(( (b1 - b0) * 1000 / tick ))" >>"$work/$build" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
n, d = max(r["parcelsCreated"], 1), r["dispatchOfferedMs"]
print(f'{int(sys.argv[4]) / n:.1f}')
print(f'  round {sys.argv[3]}, {sys.argv[2]:<9}: {n} parcels, created -> offered p50 {d["p50"]:.0f} / p99 {d["p99"]:.0f} ms,'
      f' {int(sys.argv[4]) / n:.1f} ms of CPU a parcel', file=sys.stderr)
EOF
    done
done
ref="$(median <"$work/reference")" this="$(median <"$work/this")"
what="a parcel"; [ "$FIXES" -gt 0 ] && what="per 1,000 fixes"
echo "machine CPU $what, median of $RUNS: reference $ref ms, this build $this ms, ratio $(ratio "$this" "$ref")"
