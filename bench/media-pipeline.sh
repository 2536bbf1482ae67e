#!/usr/bin/env bash
# Uploads: the image pipeline's cost per upload beside libvips' own command-line tool doing the same work on the same files:
# ImagePipeline.process (decode with the pixel limit, upright, the stored JPEG at most 2048 px without metadata, the
# 1080 and 320 px renditions, a 32 px thumbnail for the BlurHash) against vipsthumbnail making the same four images
# (one process for REPEAT copies of every file at each size, so that starting it is not what is measured), one thread each
# (VIPS_CONCURRENCY=1, as the services run it). Photos are made by Pillow and pillow-heif: phone-camera sizes, with Exif.
# Prints images/s for each and the pipeline's ratio to vipsthumbnail (median of RUNS rounds, interleaved).
# Not measured here: the HTTP upload and the object store's write. Reads by signed URL beside nginx: bench/media.sh.
#   bench/media-pipeline.sh   SECONDS_PER_RUN=5 RUNS=3 SIZES="4032x3024 1600x1200" REPEAT=8
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_RUN="${SECONDS_PER_RUN:-5}"; RUNS="${RUNS:-3}"; SIZES="${SIZES:-4032x3024 1600x1200}"; REPEAT="${REPEAT:-8}"
"$ROOT/deploy/local/stack" install >&2
command -v vipsthumbnail >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libvips-tools >/dev/null; }
(cd "$ROOT" && swift build -c release --product media-bench >&2)
BIN="$(cd "$ROOT" && swift build -c release --show-bin-path)/media-bench"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
export VIPS_CONCURRENCY=1 VIPS_WARNING=0
median() { sort -g | sed -n "$(( (RUNS + 1) / 2 ))p"; }

for size in $SIZES; do
    w="${size%x*}"; h="${size#*x}"
    files=()
    for format in heic jpeg png webp; do
        "$ROOT/.local/venv/bin/python" "$ROOT/Tests/ImagingTests/camera_photo.py" "$format" "$w" "$h" 6 "$work/photo-$size-$format.$format"
        files+=("$work/photo-$size-$format.$format")
        # vipsthumbnail takes REPEAT copies of each in one process, so that its start is not what is measured.
        for r in $(seq 1 "$REPEAT"); do ln -sf "$work/photo-$size-$format.$format" "$work/copy-$size-$format-$r.$format"; done
    done
    copies=("$work"/copy-"$size"-*)
    : >"$work/pipeline"; : >"$work/vips"
    for _ in $(seq 1 "$RUNS"); do
        "$BIN" "$SECONDS_PER_RUN" "${files[@]}" | awk '{print $1}' >>"$work/pipeline"
        # vipsthumbnail: the same four images of every file, rounds of all the files until the time is up.
        n=0; t0=$(date +%s.%N)
        while awk -v t0="$t0" -v now="$(date +%s.%N)" -v s="$SECONDS_PER_RUN" 'BEGIN {exit !(now - t0 < s)}'; do
            rm -f "$work"/out-*
            vipsthumbnail -s "2048x2048>" -o "$work/out-%s-full.jpg[Q=82,strip,optimize_coding]" "${copies[@]}"
            fulls=("$work"/out-*-full.jpg)
            vipsthumbnail -s "1080x1080>" -o "$work/out-%s-large.jpg[Q=82,strip,optimize_coding]" "${fulls[@]}"
            vipsthumbnail -s "320x320>" -o "$work/out-%s-small.jpg[Q=82,strip,optimize_coding]" "${fulls[@]}"
            vipsthumbnail -s "32x32>" -o "$work/out-%s-tiny.v" "${fulls[@]}"
            n=$((n + ${#copies[@]}))
        done
        awk -v n="$n" -v t0="$t0" -v now="$(date +%s.%N)" 'BEGIN {printf "%.1f\n", n / (now - t0)}' >>"$work/vips"
    done
    p="$(median <"$work/pipeline")"; v="$(median <"$work/vips")"
    printf '%-10s pipeline %6s images/s   vipsthumbnail %6s images/s   ratio %s\n' "$size" "$p" "$v" \
        "$(awk -v a="$p" -v b="$v" 'BEGIN {printf "%.2f", a / b}')"
done
