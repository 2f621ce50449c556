#!/bin/sh
# Cold start on the GPU machine: what a user waits for in a fresh process with
# an empty driver JIT cache (CUDA_CACHE_DISABLE=1, as in every new container or
# CI job), ours beside cuBLAS (examples/cold_start.rs), the README's main job
# (examples/dgemm) by the wall clock, and the size of each example binary.
#
# Run from the directory holding the unpacked bundle (`cargo xtask gpu-bundle`,
# then `tar xJf gpu-bundle.tar.xz`):
#   sh benches/cold_start.sh
# Rows are appended to ${OUT:-gpu-bundle/out}/cold_start.csv
# (device,date,commit,step,ours_s,cublas_s). Exit status is non-zero on any failure.
set -u
B=${BUNDLE:-gpu-bundle}
O=${OUT:-$B/out}
mkdir -p "$O"
fail=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

echo "== example binaries (bytes)"
ls -l "$B"/examples/

echo "== cold_start: ours beside cuBLAS, each in a fresh process"
CUDA_CACHE_DISABLE=1 "$B"/examples/cold_start --csv "$O/cold_start.csv" || fail=1

echo "== examples/dgemm (the README's main job), JIT cache off"
t0=$(date +%s.%N)
CUDA_CACHE_DISABLE=1 "$B"/examples/dgemm || fail=1
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "dgemm_example_wall_s,%.2f\n", b - a }'
exit $fail
