#!/usr/bin/env bash
# Image reads by signed URL: stories answering GET /v1/media/{id}?exp=..&sig=.. (the signature checked, the row read,
# the object read from the media store, the bytes sent), directly and through the stack's gateway, beside nginx
# sending the very same object file from disk (sendfile, nothing checked), interleaved round by round on the same
# machine. The photo is a 1600 × 1200 JPEG uploaded through the pipeline; the stack's media store is its folder
# (MEDIA_STORE=file://$STATE/media), and nginx sends a copy of the object's file. Prints reads/s, p99 latency, the ratio
# to nginx and stories' CPU per 1,000 reads (medians of RUNS rounds). Not a test: absolute numbers drift on shared
# machines, ratios less so.
#   bench/media.sh                DURATION=10 CONNECTIONS=16 RUNS=3 SIZE=full (or a rendition: small, large)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-10}"; CONNECTIONS="${CONNECTIONS:-16}"; RUNS="${RUNS:-3}"; SIZE="${SIZE:-full}"
NGINX_PORT="${NGINX_PORT:-18081}"
AUTH="http://127.0.0.1:8081"; API="http://127.0.0.1:8082"; GATEWAY="http://127.0.0.1:${STACK_GATEWAY_PORT:-8080}"

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
if ((${#need[@]})); then
    echo "==> installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

"$ROOT/deploy/local/stack" up >&2
STATE="${STACK_STATE_DIR:-/tmp/backend-stack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)}"
PG_PORT="$(cat "$STATE/pg.port" 2>/dev/null || echo 5432)" PG_DB=stories
work="$(mktemp -d)"
source "$ROOT/bench/lib.sh"
json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }

# A camera-sized photo, uploaded as an app would.
"$ROOT/.local/venv/bin/python" - "$work/photo.jpg" <<'PY'
import sys
from PIL import Image
w, h = 1600, 1200
img = Image.new("RGB", (w, h))
img.putdata([((x * 255) // w, (y * 255) // h, (x ^ y) & 255) for y in range(h) for x in range(w)])
img.save(sys.argv[1], "JPEG", quality=88)
PY
user="media_$(date +%s%N | tail -c 9)"
token="$(curl -fs "$AUTH/v1/auth/signup" -H 'Content-Type: application/json' \
    -d "{\"username\":\"$user\",\"email\":\"$user@example.com\",\"password\":\"benchmark password\",\"fullName\":\"Bench\"}" |
    json '["accessToken"]')"
upload="$(curl -fs "$API/v1/media" -H "Authorization: Bearer $token" -H 'Content-Type: image/jpeg' --data-binary "@$work/photo.jpg")"
id="$(json '["id"]' <<<"$upload")"
url="$(json "[\"urls\"][\"$SIZE\"]" <<<"$upload")"  # signed, naming the gateway (PUBLIC_BASE_URL)
path="${url#*://*/}"; path="/$path"
file="$STATE/media/stories/$id$([ "$SIZE" = full ] || echo "/${url##*size=}" | cut -d'&' -f1).blob"
[ -s "$file" ] || { echo "bench: $file is missing (is MEDIA_STORE the stack's folder?)" >&2; exit 1; }
bytes="$(stat -c %s "$file")"
[ "$(curl -fs "$API$path" | wc -c)" = "$bytes" ] || { echo "bench: the signed URL does not load the object's bytes" >&2; exit 1; }

# nginx's workers (not root) read a copy of it: the store's files are its owner's alone.
chmod 755 "$work" && install -m 644 "$file" "$work/photo.blob"
cat >"$work/nginx.conf" <<CONF
worker_processes auto;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location = /photo { default_type image/jpeg; alias $work/photo.blob; }
    }
}
CONF
/usr/sbin/nginx -c "$work/nginx.conf"
trap '/usr/sbin/nginx -c "$work/nginx.conf" -s stop 2>/dev/null || true; rm -rf "$work"' EXIT

echo "==> a $bytes-byte image ($SIZE), $CONNECTIONS connections, ${DURATION}s each, $RUNS interleaved rounds ($(nproc) cores)" >&2
for name in nginx direct gateway; do : >"$work/$name"; done
for i in $(seq 1 "$RUNS"); do
    wrk_once - "http://127.0.0.1:$NGINX_PORT/photo" >>"$work/nginx"
    wrk_once stories "$API$path" >>"$work/direct"
    wrk_once stories "$GATEWAY$path" >>"$work/gateway"
    echo "  round $i: nginx $(tail -1 "$work/nginx") | stories $(tail -1 "$work/direct") | gateway $(tail -1 "$work/gateway")" >&2
done

echo
echo "image reads by signed URL, $(date -u +%Y-%m-%d), $(nproc) cores, a $bytes-byte JPEG ($SIZE), $CONNECTIONS connections, medians of $RUNS interleaved ${DURATION}s rounds"
printf '%-36s %10s %9s %8s %20s\n' "target" "per second" "p99 ms" "ratio" "CPU ms/1000: svc, pg"
printf '%-36s %10.0f %9.2f %8s %20s\n' "nginx, the object file from disk" "$(col nginx 1)" "$(col nginx 2)" "1.00" "-, -"
printf '%-36s %10.0f %9.2f %8s %20s\n' "stories, signed URL" "$(col direct 1)" "$(col direct 2)" "$(paired direct nginx)" "$(col direct 3), $(col direct 4)"
printf '%-36s %10.0f %9.2f %8s %20s\n' "stories through the gateway" "$(col gateway 1)" "$(col gateway 2)" "$(paired gateway nginx)" "$(col gateway 3), $(col gateway 4)"
