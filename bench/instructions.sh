#!/usr/bin/env bash
# What one request costs a service in instructions, this build beside a reference build: a count that does not drift
# with the machine, where requests per second on this shared 2-core machine move by a quarter from one hour to the next.
#   bench/instructions.sh /path/to/reference/bin         REQUESTS=10000 PAGES=1000
# The reference is a folder holding another build's release binaries (`auth` and `chat` are used), say of the last commit:
#   git worktree add /tmp/ref HEAD~1 && (cd /tmp/ref && swift build -c release) && bench/instructions.sh /tmp/ref/.build/release
# For each build and each path (auth's GET /healthz and an authenticated GET /v1/users/me; chat's latest page of a
# room's 20 messages, which reads them from PostgreSQL and writes their JSON), another instance of the service with
# the stack's settings runs under valgrind's callgrind and answers 2,000 and then 2,000 + REQUESTS requests (chat: 200
# and 200 + PAGES) on one keep-alive connection with one user's bearer token; the difference of the two runs' totals,
# divided by the requests, is one request's instructions in the process (the kernel's and PostgreSQL's are not
# counted). Prints each and the ratio. Installs valgrind if missing.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REF="${1:?usage: bench/instructions.sh REFERENCE_BIN_FOLDER}"
REQUESTS="${REQUESTS:-10000}" PAGES="${PAGES:-1000}" PORT="${PORT:-8091}"
for s in auth chat; do [ -x "$REF/$s" ] || { echo "no $s in $REF" >&2; exit 1; }; done
command -v valgrind >/dev/null || { echo "==> installing valgrind" >&2; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null; }
"$ROOT/deploy/local/stack" up >&2
STATE="/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)"
work="$(mktemp -d)"
trap 'pkill -f "callgrind-out-file=$work" 2>/dev/null || true; rm -rf "$work"' EXIT
source "$ROOT/bench/lib.sh"  # service_settings, ratio
export LD_LIBRARY_PATH="$ROOT/.local/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Valgrind 3.19 (Debian 12) cannot read the DWARF 5 of Swift's debug information: the copies it runs have none.
for s in auth chat; do
    (cd "$ROOT" && swift build -c release --product "$s" >&2)
    strip -g "$(cd "$ROOT" && swift build -c release --show-bin-path)/$s" -o "$work/$s-this"
    strip -g "$REF/$s" -o "$work/$s-reference"
done

user="instructions$RANDOM$RANDOM"
token="$(curl -fs http://127.0.0.1:8081/v1/auth/signup -H 'Content-Type: application/json' \
    -d "{\"username\":\"$user\",\"email\":\"$user@example.com\",\"password\":\"benchmark password\",\"fullName\":\"Bench\"}" |
    python3 -c 'import sys, json; print(json.load(sys.stdin)["accessToken"])')"
# A room of 20 messages for chat's page.
room="$(curl -fs http://127.0.0.1:8083/v1/rooms -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"name":"Instructions"}' | python3 -c 'import sys, json; print(json.load(sys.stdin)["id"])')"
for n in $(seq 1 20); do
    curl -fs -o /dev/null "http://127.0.0.1:8083/v1/rooms/$room/messages" -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/json' -d "{\"text\":\"Message $n of the page, long enough to be a sentence someone wrote.\"}"
done

# instructions SERVICE BUILD PATH COUNT: another instance's whole run under callgrind, COUNT requests answered.
instructions() {
    rm -f "$work"/cg.*
    service_settings "$1" PORT="$PORT" LOG_LEVEL=warn
    env -i "${settings[@]}" valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" "$work/$1-$2" >"$work/valgrind.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
    local bearer="$token"; [ "$3" = /healthz ] && bearer=""
    python3 - "$PORT" "$3" "$4" "$bearer" <<'PY' || { kill -TERM "$pid"; exit 1; }
import socket, sys
port, path, count, token = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.create_connection(("127.0.0.1", port))
authorization = f"Authorization: Bearer {token}\r\n" if token else ""
request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{authorization}\r\n".encode()
for _ in range(count):
    s.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 200"):
        sys.exit(f"{path} answered {lines[0].decode()}")
    length = int(next(l for l in lines if l.lower().startswith(b"content-length:")).split(b":")[1])
    while len(body) < length:
        body += s.recv(65536)
PY
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    awk '/^summary:/ {s += $2} END {print s}' "$work"/cg.*
}

echo "instructions per request, $(date -u +%F): the difference of a run of W and of W + N requests, / N"
printf '%-40s %14s %14s %8s\n' request reference this ratio
for case in "auth /healthz 2000 $REQUESTS" "auth /v1/users/me 2000 $REQUESTS" "chat /v1/rooms/$room/messages 200 $PAGES"; do
    read -r service path warm n <<<"$case"
    # A fresh access token for each case: one lives 15 minutes, and a case under callgrind can take several.
    token="$(curl -fs http://127.0.0.1:8081/v1/auth/login -H 'Content-Type: application/json' \
        -d "{\"username\":\"$user\",\"password\":\"benchmark password\"}" | python3 -c 'import sys, json; print(json.load(sys.stdin)["accessToken"])')"
    declare -A per=()
    for build in reference this; do
        short=$(instructions "$service" "$build" "$path" "$warm")
        long=$(instructions "$service" "$build" "$path" $((warm + n)))
        per[$build]=$(( (long - short) / n ))
    done
    label="$service GET ${path/$room/{id\}}"
    printf '%-40s %14d %14d %8s\n' "$label" "${per[reference]}" "${per[this]}" "$(ratio "${per[this]}" "${per[reference]}")"
done
