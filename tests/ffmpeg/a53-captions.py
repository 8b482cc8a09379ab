#!/usr/bin/env python3
"""Adds ATSC A/53 closed captions to an H.264 Annex-B stream, for the side-data tests.

    a53-captions.py IN.h264 OUT.h264

Before the first slice of every picture it inserts an SEI NAL unit with a
user_data_registered_itu_t_t35 message (country 0xB5, provider 0x0031, "GA94",
cc_data) holding two caption triplets that differ per picture, so a decoder
attaches A/53 side data to each frame and a test can tell frames apart. No
FFmpeg filter makes captions from nothing; our FFmpeg has no caption encoder.
"""

import sys


def nal_units(data):
    """(start, end) of each NAL unit's payload after its 3- or 4-byte start code."""
    starts = []
    i = 0
    while True:
        i = data.find(b"\x00\x00\x01", i)
        if i < 0:
            break
        starts.append(i + 3)
        i += 3
    for n, s in enumerate(starts):
        end = starts[n + 1] - 3 if n + 1 < len(starts) else len(data)
        while end > s and data[end - 1] == 0:  # trailing zeros / the next 4-byte start code
            end -= 1
        yield s, end


def escape(rbsp):
    """Emulation prevention: no 00 00 0x (x <= 3) in the NAL payload."""
    out = bytearray()
    zeros = 0
    for b in rbsp:
        if zeros >= 2 and b <= 3:
            out.append(3)
            zeros = 0
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)


def caption_sei(picture):
    cc = bytes([0xFC, 0x14 | (picture & 1), 0x20 + picture % 64,  # field 1, varies per picture
                0xFD, 0x80, 0x80])                               # field 2, padding
    payload = (bytes([0xB5, 0x00, 0x31]) + b"GA94" + bytes([0x03, 0xC0 | 2, 0xFF]) + cc + bytes([0xFF]))
    message = bytes([4, len(payload)]) + payload  # payload type 4: registered ITU-T T.35
    return b"\x00\x00\x00\x01" + bytes([0x06]) + escape(message + bytes([0x80]))


def main():
    data = open(sys.argv[1], "rb").read()
    out = bytearray()
    picture = 0
    for s, e in nal_units(data):
        nal_type = data[s] & 0x1F
        # first_mb_in_slice == 0 (ue(v) '1': the top bit of the slice header) starts a picture.
        if nal_type in (1, 5) and data[s + 1] & 0x80:
            out += caption_sei(picture)
            picture += 1
        out += b"\x00\x00\x00\x01" + data[s:e]
    open(sys.argv[2], "wb").write(out)
    print("a53-captions: %d pictures captioned" % picture)


if __name__ == "__main__":
    main()
