#!/usr/bin/env bash
# Runs every fuzz target for N seconds and writes a table of exec counts to fuzz/RESULTS.md.
#
#   fuzz/run-all.sh [SECONDS=600] [JOBS=1] [TARGET...]
#   RESULTS_ONLY=1 fuzz/run-all.sh [SECONDS] [JOBS] [TARGET...]   # only rewrite those rows from the logs
#
# Extra libFuzzer flags can be given in FUZZ_ARGS, e.g. FUZZ_ARGS='-fork=1 -ignore_crashes=1' to
# keep fuzzing past a known crash (every crash still lands in fuzz/artifacts/<target>/).
#
# JOBS is 1 (sequential) or 2 (two targets at a time). New inputs go to fuzz/work/<target>/
# (gitignored); the committed seeds in fuzz/corpus/<target>/ and fuzz/regressions/<target>/ are
# read, never written. Crashes land in fuzz/artifacts/<target>/. Logs: fuzz/work/logs/<target>.log.
set -u
cd "$(dirname "$0")"
SECONDS_PER_TARGET=${1:-600}
JOBS=${2:-1}
shift $(( $# > 2 ? 2 : $# ))
if [ $# -gt 0 ]; then
    TARGETS=("$@")
else
    mapfile -t TARGETS < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^blerpc-proto-fuzz$')
fi

mkdir -p work/logs
# RESULTS_ONLY=1 rebuilds RESULTS.md from the logs of the last run without fuzzing.
[ "${RESULTS_ONLY:-0}" = 1 ] || cargo +nightly fuzz build || exit 1

run_one() {
    local t=$1
    local seeds=(corpus/"$t")
    [ -d regressions/"$t" ] && seeds+=(regressions/"$t")
    mkdir -p work/"$t"
    cargo +nightly fuzz run "$t" work/"$t" "${seeds[@]}" -- \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -print_final_stats=1 ${FUZZ_ARGS:-} \
        > work/logs/"$t".log 2>&1
    echo $? > work/logs/"$t".rc
}

running=0
[ "${RESULTS_ONLY:-0}" = 1 ] && TO_RUN=() || TO_RUN=("${TARGETS[@]}")
for t in "${TO_RUN[@]}"; do
    echo "fuzzing $t for ${SECONDS_PER_TARGET}s"
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

# RESULTS.md keeps one row per target: the targets of this run get new rows, the others keep theirs,
# and everything from the "## Findings" heading on (written by hand) is kept as it is.
declare -A ROW
if [ -f RESULTS.md ]; then
    while IFS= read -r line; do
        name=$(printf '%s' "$line" | sed -n 's/^| \([a-z_0-9]*\) | [0-9].*/\1/p')
        [ -n "$name" ] && ROW[$name]=$line
    done < <(sed '/^## Findings/,$d' RESULTS.md)
    findings=$(sed -n '/^## Findings/,$p' RESULTS.md)
fi
for t in "${TARGETS[@]}"; do
    log=work/logs/"$t".log
    [ -f "$log" ] || continue
    when=$(date -u -r "$log" '+%Y-%m-%d %H:%M')
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    [ -z "$execs" ] && execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
    # Fork mode (-fork=N) prints no final stats: take the parent's last status line.
    [ -z "$execs" ] && execs=$(sed -n 's/^#\([0-9]*\): cov.*/\1/p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    [ -z "$rate" ] && rate=$(grep -E '^#[0-9]+: cov' "$log" | tail -1 | sed -n 's/.*exec\/s: \([0-9]*\).*/\1/p')
    corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | sed 's/corp: //')
    rc=$(cat work/logs/"$t".rc 2>/dev/null || echo '?')
    if [ "$rc" = 0 ]; then
        status=ok
    else
        crashes=$(ls artifacts/"$t"/crash-* 2>/dev/null | wc -l)
        status="FAILED (rc $rc): ${crashes} crash file(s) in artifacts/$t/"
    fi
    ROW[$t]="| $t | $when | ${SECONDS_PER_TARGET} | ${JOBS} | ${execs:-?} | ${rate:-?} | ${corpus:-?} | $status |"
done
mapfile -t ALL < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^blerpc-proto-fuzz$')
{
    echo "# Fuzz results"
    echo
    echo "One row per target: its latest run by \`fuzz/run-all.sh SECONDS JOBS TARGET...\` on $(nproc) CPUs"
    echo "(every committed seed as a read-only corpus; logs in \`fuzz/work/logs/\`). A run rewrites the rows of"
    echo "the targets it ran and keeps the others."
    echo
    echo "| target | run (UTC) | seconds | at a time | execs | execs/s | corpus | status |"
    echo "|---|---|---:|---:|---:|---:|---:|---|"
    for t in "${ALL[@]}"; do
        echo "${ROW[$t]:-| $t | never | | | | | | no run yet: \`fuzz/run-all.sh 600 1 $t\` |}"
    done
    if [ -n "${findings:-}" ]; then
        echo
        printf '%s\n' "$findings"
    fi
} > RESULTS.md.new && mv RESULTS.md.new RESULTS.md
cat RESULTS.md
