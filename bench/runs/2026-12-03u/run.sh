#!/usr/bin/env bash
# Session 21 run 1: what a context's memory is made of (stack limit, connections), and the
# ceiling of lean contexts.
set -u
cd "$(dirname "$0")/.."
R=/tmp/r21; rm -rf $R; mkdir -p $R
export PYTHONUNBUFFERED=1
start=$SECONDS
C="python3 scripts/gpu/context-ceiling.py"
for v in "default:-1" "stack1024:1024" "stack256:256" "stack0:0"; do
  name=${v%%:*}; st=${v#*:}
  echo "== $name (8 connections)" | tee -a $R/memory.txt
  $C --max 16 --step 16 --stack-size $st >> $R/memory.txt 2>&1
  echo "== $name (1 connection)" | tee -a $R/memory.txt
  CUDA_DEVICE_MAX_CONNECTIONS=1 $C --max 16 --step 16 --stack-size $st >> $R/memory.txt 2>&1
done
echo "== default, eager module loading" >> $R/memory.txt
CUDA_MODULE_LOADING=EAGER $C --max 16 --step 16 >> $R/memory.txt 2>&1
cat $R/memory.txt
echo "at $((SECONDS-start)) s"
CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 240 $C --max 448 --step 64 --stack-size 0 > $R/ceiling-lean.txt 2>&1
tail -4 $R/ceiling-lean.txt
echo "all done at $((SECONDS-start)) s"
tar czf $OUT/r21.tgz -C $R .
