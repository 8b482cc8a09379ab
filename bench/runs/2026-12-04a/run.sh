set -o pipefail; mkdir -p $OUT; (scripts/gpu-test.sh run rust c python 2>&1 | tee $OUT/run-a.log) | tail -80
