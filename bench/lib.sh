# What the benchmark scripts share: medians, ratios, reading wrk's and pgbench's results, and one interleaved round's
# runs with the CPU they cost. Sourced after RUNS, DURATION, CONNECTIONS, STATE (the stack's state folder), PG_PORT,
# PG_DB (the database pgbench runs in: the service's own, named after it) and work (the scripts' scratch folder) are
# set.

# The median of the RUNS numbers on stdin.
median() { sort -g | sed -n "$(( (RUNS + 1) / 2 ))p"; }
# col FILE N: the median of column N of $work/FILE, one line a round.
col() { awk -v c="$2" '{print $c}' "$work/$1" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# paired FILE REF: the median of the rounds' own ratios, column 1 of $work/FILE over $work/REF round by round (each
# pair of runs saw the same minute of the machine; a quotient of two medians could take them from different rounds).
paired() { awk 'NR == FNR {a[FNR] = $1; next} {print a[FNR] / $1}' "$work/$1" "$work/$2" | median | xargs printf "%.2f"; }
# wrk_result OUTPUT -> "requests/s p99-ms", with any non-2xx responses reported on stderr.
wrk_result() {
    grep -q "Non-2xx" <<<"$1" && { echo "non-2xx responses:" >&2; grep "Non-2xx" <<<"$1" >&2; }
    echo "$(awk '/Requests\/sec/ {print $2}' <<<"$1") $(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v=v*1000}; print v}' <<<"$1")"
}
# pgbench_result OUTPUT -> "tps p99-ms", the p99 from the pgbench_log.* files of a run with -l in $work.
pgbench_result() {
    echo "$(awk '/^tps/ {print $3; exit}' <<<"$1") $(cat "$work"/pgbench_log.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print a[int(NR*0.99)]/1000}')"
}

# bench_topic NAME: creates the topic that the outbox rows of a pgbench script name. The stack's services create only
# their own topics, and the outbox relay retries an event whose topic the broker does not know until it does.
bench_topic() {
    LD_LIBRARY_PATH= "$ROOT/.local/venv/bin/python" - "$1" "127.0.0.1:${STACK_KAFKA_PORT:-9092}" <<'PY'
import os, sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[2]})
if sys.argv[1] not in admin.list_topics(timeout=10).topics:
    # The services' count: a relay publishes nothing to a topic with another.
    for f in admin.create_topics([NewTopic(sys.argv[1], int(os.environ.get("KAFKA_TOPIC_PARTITIONS", "3")), 1)]).values():
        f.result()
PY
}

pid_of() { cat "$STATE/$1.pid"; }
# service_settings SERVICE [NAME=VALUE...]: sets the array `settings` to the running stack service's own environment
# (its database, broker, keys), each NAME given taking its new value, for another instance of it. A list of a
# script's own falls behind the settings a service comes to require, and the instance refuses to start.
service_settings() {
    local pid kv given keep
    pid="$(pid_of "$1")"; shift
    settings=()
    while IFS= read -r -d '' kv; do
        keep=1
        for given in "$@"; do [ "${kv%%=*}" = "${given%%=*}" ] && keep=""; done
        [ -z "$keep" ] || settings+=("$kv")
    done <"/proc/$pid/environ"
    settings+=("$@")
}
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# PostgreSQL's CPU: the postmaster's own and its exited children's (pgbench's backends end with the run), plus the
# live backends'.
pg_cpu() {
    local master t p; master="$(head -1 "$STATE/pg/postmaster.pid")"
    t="$(awk '{print $14 + $15 + $16 + $17}' "/proc/$master/stat")"
    for p in $(pgrep -P "$master"); do t=$((t + $(cpu_of "$p" 2>/dev/null || echo 0))); done
    echo "$t"
}
tick="$(getconf CLK_TCK)"

# wrk_once SERVICE URL [lua] [header] -> "rps p99ms service-cpu-ms/1000 pg-cpu-ms/1000" (SERVICE "-": none, e.g. nginx)
wrk_once() {
    local s0=0 p0 out reqs service="$1"; shift
    [ "$service" = - ] || s0="$(cpu_of "$(pid_of "$service")")"
    p0="$(pg_cpu)"
    out="$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency ${2:+-s "$2"} ${3:+-H "$3"} "$1")"
    reqs="$(awk '/requests in/ {print $1}' <<<"$out")"
    local s1=0; [ "$service" = - ] || s1="$(cpu_of "$(pid_of "$service")")"
    echo "$(wrk_result "$out") $(( (s1 - s0) * 1000 * 1000 / tick / reqs )) $(( ($(pg_cpu) - p0) * 1000 * 1000 / tick / reqs ))"
}
# pg_once SCRIPT -> "tps p99ms pg-cpu-ms/1000"
pg_once() {
    local p0 out n
    p0="$(pg_cpu)"; rm -f "$work"/pgbench_log.*
    out="$(cd "$work" && pgbench -h 127.0.0.1 -p "$PG_PORT" -U postgres -n -M extended -c "$CONNECTIONS" -j 2 -T "$DURATION" -l -f "$1" "$PG_DB" 2>&1)"
    n="$(cat "$work"/pgbench_log.* | wc -l)"
    echo "$(pgbench_result "$out") $(( ($(pg_cpu) - p0) * 1000 * 1000 / tick / n ))"
}

# pair_rows WIDTH LABEL NAME REF_LABEL REF: the result rows of a target (its rounds in $work/NAME, as wrk_once prints
# them) and of its pgbench reference ($work/REF, as pg_once prints them), under pair_header WIDTH.
pair_header() { printf "%-${1}s %10s %9s %8s %20s\n" "target" "per second" "p99 ms" "ratio" "CPU ms/1000: svc, pg"; }
pair_rows() {
    printf "%-${1}s %10.0f %9.2f %8s %20s\n" "$2" "$(col "$3" 1)" "$(col "$3" 2)" "$(paired "$3" "$5")" "$(col "$3" 3), $(col "$3" 4)"
    printf "%-${1}s %10.0f %9.2f %8s %20s\n" "$4" "$(col "$5" 1)" "$(col "$5" 2)" "1.00" "-, $(col "$5" 3)"
}
