# What the benchmark scripts share: medians, ratios, and reading wrk's and pgbench's results. Sourced after RUNS and
# work (the scripts' scratch folder) are set.

# The median of the RUNS numbers on stdin.
median() { sort -g | sed -n "$(( (RUNS + 1) / 2 ))p"; }
# col FILE N: the median of column N of $work/FILE, one line a round.
col() { awk -v c="$2" '{print $c}' "$work/$1" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# wrk_result OUTPUT -> "requests/s p99-ms", with any non-2xx responses reported on stderr.
wrk_result() {
    grep -q "Non-2xx" <<<"$1" && { echo "non-2xx responses:" >&2; grep "Non-2xx" <<<"$1" >&2; }
    echo "$(awk '/Requests\/sec/ {print $2}' <<<"$1") $(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v=v*1000}; print v}' <<<"$1")"
}
# pgbench_result OUTPUT -> "tps p99-ms", the p99 from the pgbench_log.* files of a run with -l in $work.
pgbench_result() {
    echo "$(awk '/^tps/ {print $3; exit}' <<<"$1") $(cat "$work"/pgbench_log.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print a[int(NR*0.99)]/1000}')"
}
