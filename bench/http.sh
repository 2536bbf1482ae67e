#!/usr/bin/env bash
# HTTP benchmark: wrk against auth's GET /healthz and an authenticated GET /v1/users/me, against nginx answering a
# fixed body, and pgbench running the query users/me makes (the session check and the user in one SELECT),
# interleaved round by round on the same machine. Prints requests/s, p99 latency, the ratios and the CPU per 1,000
# requests of auth and PostgreSQL (medians of RUNS rounds). The same two routes through the stack's gateway (nginx in
# front of auth, as clients reach it) beside direct, as ratios. Not a test: absolute numbers drift on shared
# machines, ratios less so.
#   bench/http.sh                      DURATION=10 CONNECTIONS=64 RUNS=3
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-10}"; CONNECTIONS="${CONNECTIONS:-64}"; RUNS="${RUNS:-3}"
NGINX_PORT="${NGINX_PORT:-18080}"
AUTH="http://127.0.0.1:8081"
GATEWAY="http://127.0.0.1:${STACK_GATEWAY_PORT:-8080}"

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

STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
PG_PORT="$(cat "$STATE/pg.port" 2>/dev/null || echo 5432)" PG_DB=auth
source "$ROOT/bench/lib.sh"

# The query users/me makes, for the caller's own user and session (from the token's claims), as pgbench runs it.
sub="$(python3 -c 'import base64, json, sys
p = sys.argv[1].split(".")[1]; c = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
print(c["sub"], c["sid"])' "$token")"
read -r user_id session_id <<<"$sub"
cat >"$work/me.sql" <<SQL
SELECT id, username, email, full_name, avatar_media_id, created_at, updated_at FROM auth.users WHERE id = '$user_id'
AND EXISTS (SELECT 1 FROM auth.sessions WHERE id = '$session_id' AND user_id = '$user_id' AND revoked_at IS NULL);
SQL

echo "==> $CONNECTIONS connections, ${DURATION}s each, $RUNS interleaved rounds ($(nproc) cores)" >&2
for name in nginx health me me_pg gw_health gw_me; do : >"$work/$name"; done
for i in $(seq 1 "$RUNS"); do
    wrk_once - "http://127.0.0.1:$NGINX_PORT/" >>"$work/nginx"
    wrk_once auth "$AUTH/healthz" >>"$work/health"
    wrk_once auth "$AUTH/v1/users/me" "" "Authorization: Bearer $token" >>"$work/me"
    pg_once "$work/me.sql" >>"$work/me_pg"
    # The gateway answers its own /healthz; auth's is not routed through it, so the gateway's liveness stands in.
    wrk_once - "$GATEWAY/healthz" >>"$work/gw_health"
    wrk_once auth "$GATEWAY/v1/users/me" "" "Authorization: Bearer $token" >>"$work/gw_me"
    echo "  round $i: nginx $(tail -1 "$work/nginx") | healthz $(tail -1 "$work/health") | users/me $(tail -1 "$work/me") | pgbench $(tail -1 "$work/me_pg") | gateway healthz $(tail -1 "$work/gw_health") | gateway users/me $(tail -1 "$work/gw_me")" >&2
done

echo
echo "auth, $(date -u +%Y-%m-%d), $(nproc) cores, $CONNECTIONS connections, medians of $RUNS interleaved ${DURATION}s rounds"
printf '%-28s %10s %9s %14s %20s\n' "target" "per second" "p99 ms" "ratio" "CPU ms/1000: svc, pg"
printf '%-28s %10.0f %9.2f %14s %20s\n' "nginx fixed body" "$(col nginx 1)" "$(col nginx 2)" "1.00" "-, -"
printf '%-28s %10.0f %9.2f %14s %20s\n' "auth GET /healthz" "$(col health 1)" "$(col health 2)" "$(paired health nginx)" "$(col health 3), $(col health 4)"
printf '%-28s %10.0f %9.2f %14s %20s\n' "auth GET /v1/users/me" "$(col me 1)" "$(col me 2)" "$(paired me me_pg) of pg" "$(col me 3), $(col me 4)"
printf '%-28s %10.0f %9.2f %14s %20s\n' "  pgbench, the same SELECT" "$(col me_pg 1)" "$(col me_pg 2)" "1.00" "-, $(col me_pg 3)"
printf '%-28s %10.0f %9.2f %14s %20s\n' "gateway GET /healthz" "$(col gw_health 1)" "$(col gw_health 2)" "$(paired gw_health nginx)" "-, -"
printf '%-28s %10.0f %9.2f %14s %20s\n' "gateway GET /v1/users/me" "$(col gw_me 1)" "$(col gw_me 2)" "$(paired gw_me me) of direct" "$(col gw_me 3), $(col gw_me 4)"
