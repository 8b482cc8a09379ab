#!/usr/bin/env bash
# Makes the test clips the GPU tests decode with NVDEC but our FFmpeg cannot encode
# (HEVC needs libx265): 10- and 12-bit 4:2:0, 4:4:4 at 8, 10 and 12 bits, and tagged
# clips for the frame-property tests (BT.709 limited, BT.601 full range, HDR10 with
# mastering-display and content-light SEI).
#
#   scripts/gpu/make-clips.sh DIR     (an ffmpeg with libx265 on PATH or in $CLIP_FFMPEG)
#
# Run by `scripts/gpu-test.sh stage` here; tests/ffmpeg/gpu.sh finds them in $CLIPS.
set -euo pipefail
dir=${1:?usage: make-clips.sh DIR}
ff=${CLIP_FFMPEG:-ffmpeg}
# (The list is captured first: grep -q closing the pipe early fails it under pipefail.)
encoders=$("$ff" -hide_banner -encoders 2>/dev/null || true)
if ! grep -q libx265 <<<"$encoders"; then
    echo "make-clips: $ff has no libx265 (apt-get install ffmpeg); GPU format tests will be skipped" >&2
    exit 0
fi
mkdir -p "$dir"
src=(-f lavfi -i "testsrc2=size=1280x720:rate=30" -frames:v 60)
x265() { "$ff" -nostdin -hide_banner -loglevel error -y "${src[@]}" -c:v libx265 -preset ultrafast \
    -x265-params log-level=error "$@"; }

# Formats NVDEC outputs: p010 (main10), p016 (main12), yuv444p (main444-8),
# yuv444p16 (main444-10 and -12).
x265 -pix_fmt yuv420p10le "$dir/hevc-420-10.mkv"
x265 -pix_fmt yuv420p12le "$dir/hevc-420-12.mkv"
x265 -pix_fmt yuv444p "$dir/hevc-444-8.mkv"
x265 -pix_fmt yuv444p10le "$dir/hevc-444-10.mkv"
x265 -pix_fmt yuv444p12le "$dir/hevc-444-12.mkv"

# Tagged clips: what a decoder reports is what the subscriber must report.
"$ff" -nostdin -hide_banner -loglevel error -y "${src[@]}" -c:v libx264 -preset ultrafast \
    -pix_fmt yuv420p -color_range tv -colorspace bt709 -color_primaries bt709 -color_trc bt709 \
    "$dir/h264-bt709-tv.mkv"
"$ff" -nostdin -hide_banner -loglevel error -y "${src[@]}" -vf setsar=16/15 -c:v libx264 -preset ultrafast \
    -pix_fmt yuv420p -color_range pc -colorspace smpte170m -color_primaries smpte170m \
    -color_trc smpte170m "$dir/h264-bt601-pc.mkv"
# (info=0: x265's encoder-settings SEI, over 2 KB, which FFmpeg 9.0 attaches to the
# first frame twice, would exceed the 4 KiB of side data a frame carries, D30; this
# clip is about the HDR metadata.)
x265 -pix_fmt yuv420p10le -color_range tv -colorspace bt2020nc -color_primaries bt2020 \
    -color_trc smpte2084 \
    -x265-params "log-level=error:info=0:hdr10=1:repeat-headers=1:master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,1):max-cll=1000,400" \
    "$dir/hevc-hdr10.mkv"
# A/53 closed captions, a different pair on every frame (tests/ffmpeg/a53-captions.py).
"$ff" -nostdin -hide_banner -loglevel error -y "${src[@]}" -c:v libx264 -preset ultrafast \
    -pix_fmt yuv420p -bsf:v h264_mp4toannexb -f h264 "$dir/h264-plain.h264"
python3 "$(dirname "$0")/../../tests/ffmpeg/a53-captions.py" "$dir/h264-plain.h264" "$dir/h264-a53cc.h264"
rm -f "$dir/h264-plain.h264"
ls -la "$dir"
