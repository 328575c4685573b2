#!/usr/bin/env bash
# The recovery demo: heat3d on 4 ranks under the pessimist protocol, once
# without failure and once with rank 2 killed (SIGKILL) mid-run; vpml
# restarts it alone from its last checkpoint and the job ends with the
# same checksum.
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --quiet --bins --examples
vpml=target/release/vpml
heat=(target/release/examples/heat3d --size small --steps 200 --checkpoint-every 20)

echo "== failure-free run"
ref=$("$vpml" run -n 4 --protocol pessimist "${heat[@]}" --timing)
echo "$ref"
secs=$(awk '/^elapsed_s/ {print $2}' <<<"$ref")
kill_at=$(awk -v s="$secs" 'BEGIN {printf "%.2f", s / 2}')

echo "== the same run, rank 2 killed after ${kill_at} s"
got=$("$vpml" run -n 4 --protocol pessimist --inject-failure "2@${kill_at}" "${heat[@]}")
echo "$got"

want=$(awk '/^checksum/ {print $2}' <<<"$ref")
have=$(awk '/^checksum/ {print $2}' <<<"$got")
echo "== failure-free checksum $want, recovered checksum $have"
if [ "$want" = "$have" ]; then
    echo "equal: the crash left no trace in the result"
else
    echo "DIFFERENT" >&2
    exit 1
fi
