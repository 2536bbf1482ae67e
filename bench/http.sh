#!/usr/bin/env bash
# HTTP benchmark: wrk against auth's GET /healthz and an authenticated GET /v1/users/me, and against nginx
# answering a fixed body, in the same run on the same machine. Prints requests/s, p99 latency and the ratio
# to nginx (medians of RUNS runs). Not a test: absolute numbers drift on shared machines, ratios less so.
#   bench/http.sh                      DURATION=10 CONNECTIONS=64 THREADS=2 RUNS=3
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-10}"; CONNECTIONS="${CONNECTIONS:-64}"; THREADS="${THREADS:-2}"; RUNS="${RUNS:-3}"
NGINX_PORT="${NGINX_PORT:-18080}"
AUTH="http://127.0.0.1:8081"

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
if ((${#need[@]})); then
    echo "==> installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

"$ROOT/deploy/local/stack" up >&2

work="$(mktemp -d)"
cat >"$work/nginx.conf" <<CONF
worker_processes auto;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / { default_type application/json; return 200 '{"status":"ok"}'; }
    }
}
CONF
/usr/sbin/nginx -c "$work/nginx.conf"
trap '/usr/sbin/nginx -c "$work/nginx.conf" -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

user="bench_$(date +%s%N | tail -c 9)"
token="$(curl -fs "$AUTH/v1/auth/signup" -H 'Content-Type: application/json' \
    -d "{\"username\":\"$user\",\"email\":\"$user@example.com\",\"password\":\"benchmark password\",\"fullName\":\"Bench\"}" |
    python3 -c 'import sys, json; print(json.load(sys.stdin)["accessToken"])')"

# run URL [header] -> "rps p99ms" (median of RUNS)
run() {
    local url="$1" header="${2:-}" rps=() p99=()
    for i in $(seq 1 "$RUNS"); do
        local out
        if [ -n "$header" ]; then
            out="$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "$header" "$url")"
        else
            out="$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$url")"
        fi
        if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx responses from $url" >&2; grep "Non-2xx" <<<"$out" >&2; fi
        rps+=("$(awk '/Requests\/sec/ {print $2}' <<<"$out")")
        p99+=("$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v=v*1000}; print v}' <<<"$out")")
        echo "  $url run $i: ${rps[-1]} req/s, p99 ${p99[-1]} ms" >&2
    done
    printf '%s %s\n' "$(printf '%s\n' "${rps[@]}" | sort -g | sed -n "$(( (RUNS + 1) / 2 ))p")" \
                     "$(printf '%s\n' "${p99[@]}" | sort -g | sed -n "$(( (RUNS + 1) / 2 ))p")"
}

echo "==> wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s, median of $RUNS runs ($(nproc) cores)" >&2
read -r nginx_rps nginx_p99 <<<"$(run "http://127.0.0.1:$NGINX_PORT/")"
read -r health_rps health_p99 <<<"$(run "$AUTH/healthz")"
read -r me_rps me_p99 <<<"$(run "$AUTH/v1/users/me" "Authorization: Bearer $token")"

printf '\n%-28s %12s %10s %14s\n' "target" "requests/s" "p99 ms" "ratio to nginx"
printf '%-28s %12.0f %10.2f %14s\n' "nginx fixed body" "$nginx_rps" "$nginx_p99" "1.00"
printf '%-28s %12.0f %10.2f %14.2f\n' "auth GET /healthz" "$health_rps" "$health_p99" "$(awk -v a="$health_rps" -v b="$nginx_rps" 'BEGIN {print a / b}')"
printf '%-28s %12.0f %10.2f %14.2f\n' "auth GET /v1/users/me" "$me_rps" "$me_p99" "$(awk -v a="$me_rps" -v b="$nginx_rps" 'BEGIN {print a / b}')"
