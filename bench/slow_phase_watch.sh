#!/bin/bash
# Watches this machine's slow phases: every few seconds, 100 parallel passes over 1.8 MB on two
# threads (static and dynamic schedules, no idle gap) and on each core alone (one thread, taskset).
# A slow phase where two threads do the work of one, with each core alone at its usual speed, is
# a resource the vCPUs share being taken, not one vCPU running slow (bench/results/omp_wait_policy.md).
#
#   bash bench/slow_phase_watch.sh [SAMPLES]     # one line per sample, ~4 s apart
set -e
here=$(cd "$(dirname "$0")" && pwd)
probe=${TMPDIR:-/tmp}/omp_wait_policy_probe
g++ -O3 -march=native -fopenmp "$here/omp_wait_policy.cc" -o "$probe"
last=$(($(nproc) - 1))
for i in $(seq "${1:-40}"); do
  two=$(OMP_NUM_THREADS=2 "$probe" 5 0 | sed 's/100 passes, ms: //; s/, 5 samples//')
  c0=$(OMP_NUM_THREADS=1 taskset -c 0 "$probe" 3 0 | sed 's/.*static median \([0-9.]*\).*/\1/')
  c1=$(OMP_NUM_THREADS=1 taskset -c "$last" "$probe" 3 0 | sed 's/.*static median \([0-9.]*\).*/\1/')
  echo "$(date +%T) | two threads: $two | one thread: core 0 $c0, core $last $c1"
  sleep 4
done
