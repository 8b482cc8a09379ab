set -o pipefail; export OUT; (scripts/gpu-test.sh run rust crash > $OUT/parts.log 2>&1; echo "parts exit $?" >> $OUT/parts.log)
rm -f $OUT/*.list $OUT/*.skipped $OUT/rust-backends.log
scripts/gpu/ring-before-after.sh .gpu/before/cuframes .gpu/bin/cuframes 2 2>&1 | tee $OUT/ring.txt
LD_LIBRARY_PATH=$PWD/.gpu/ffmpeg/lib FFMPEG=$PWD/.gpu/ffmpeg/bin/ffmpeg CUFRAMES_BIN=$PWD/.gpu/bin/cuframes timeout 200 scripts/gpu/exporter-host.sh 16 3 1200
