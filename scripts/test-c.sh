#!/usr/bin/env bash
# The C API as a C or C++ program sees it: installs the library into a
# scratch prefix (scripts/install.sh), builds the tests in tests/c/ against
# the installed header and library only (pkg-config), as C99 and as C++17,
# runs them (test_cuda covers the CUDA path where a GPU is usable and the
# fallbacks where not; its GPU-only tests count as skipped without one; test_abi
# is compiled against the frozen header of the first struct layout, tests/c/abi/,
# as a program built against an older header), links one statically against
# libcuframes.a (pkg-config --static), and runs one under valgrind when it is
# installed (a skipped check when not).
# Prints "C-API: N passed, M failed, K skipped" last; exits non-zero on any
# failure.
set -uo pipefail
cd "$(dirname "$0")/.."

CC=${CC:-cc}
CXX=${CXX:-c++}

# pkg-config is what the tests are about; install it (Debian's pkgconf) when
# the machine lacks it and we may.
if ! command -v pkg-config >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "== installing pkg-config (apt-get install pkgconf)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pkgconf >/dev/null
    fi
    if ! command -v pkg-config >/dev/null 2>&1; then
        echo "test-c.sh: pkg-config not found (apt-get install pkgconf)" >&2
        echo "C-API: 0 passed, 1 failed, 0 skipped (no pkg-config)"
        exit 1
    fi
fi
work=target/capi-test
prefix=$PWD/$work/prefix
static_prefix=$PWD/$work/static-prefix
bin=$work/bin
rm -rf "$work"
mkdir -p "$bin"

echo "== scripts/install.sh --prefix $prefix"
if ! scripts/install.sh --prefix "$prefix"; then
    echo "C-API: 0 passed, 1 failed, 0 skipped (install.sh)"
    exit 1
fi

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
version=$(pkg-config --modversion cuframes)
cflags=$(pkg-config --cflags cuframes)
libs=$(pkg-config --libs cuframes)
define=(-DCUFRAMES_EXPECTED_VERSION="\"$version\"")
c_flags=(-std=c99 -Wall -Wextra -Werror -pedantic)
cxx_flags=(-x c++ -std=c++17 -Wall -Wextra -Werror -pedantic)

passed=0
failed=0
skipped=0
fail() {
    echo "FAILED: $*" >&2
    failed=$((failed + 1))
}

# Builds; a failed build counts as one failure.
build() { # name, compiler and flags..., -- link flags...
    local name=$1
    shift
    echo "== build $name: $*"
    if ! "$@"; then
        fail "building $name"
        return 1
    fi
}

# Runs a test binary and adds its "N passed, M failed, K skipped" to the totals.
run() { # label, command...
    local label=$1
    shift
    echo "== run $label"
    local log=$work/$label.log
    "$@" 2>&1 | tee "$log"
    local status=${PIPESTATUS[0]}
    local summary
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
    if [ -n "$summary" ]; then
        local p f s
        read -r p _ f _ s _ <<<"${summary//,/}"
        passed=$((passed + p))
        failed=$((failed + f))
        skipped=$((skipped + s))
        if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
            fail "$label exited with status $status"
        fi
    else
        fail "$label exited with status $status and no summary"
    fi
}

# One check outside the test binaries, counted as a test.
check() { # description, command...
    local what=$1
    shift
    if "$@"; then
        echo "ok      $what"
        passed=$((passed + 1))
    else
        fail "$what"
    fi
}

for test in test_capi test_two_process test_cuda test_abi; do
    # shellcheck disable=SC2086 # pkg-config output is a list of flags
    build "$test (C99)" "$CC" "${c_flags[@]}" "${define[@]}" $cflags tests/c/$test.c \
        -o "$bin/$test-c" $libs &&
        run "$test-c" env LD_LIBRARY_PATH="$prefix/lib" "$bin/$test-c"
    # shellcheck disable=SC2086
    build "$test (C++17)" "$CXX" "${cxx_flags[@]}" "${define[@]}" $cflags tests/c/$test.c \
        -o "$bin/$test-cxx" $libs &&
        run "$test-cxx" env LD_LIBRARY_PATH="$prefix/lib" "$bin/$test-cxx"
done

needs() { # binary, library: whether the binary records a NEEDED entry for it
    grep -q "NEEDED.*\[$2\]" <<<"$(readelf -d "$1")"
}
# The SONAME: libcuframes.so.<major>, or .so.0.<minor> before 1.0 (build.rs).
minor=${version#*.}
soname=libcuframes.so.${version%%.*}
[ "${version%%.*}" = 0 ] && soname=libcuframes.so.0.${minor%%.*}
check "shared link records the SONAME $soname" needs "$bin/test_capi-c" "$soname"
check "installed $soname is the library's SONAME" bash -c \
    "readelf -d '$prefix/lib/$soname' | grep -q 'SONAME.*\[$soname\]'"
# A program built against 0.1 (no struct_size) cannot bind to this library:
# the 0.1 _config_init symbols, whose structs had no size, are gone.
check "no 0.1 _config_init symbols" bash -c \
    "! nm -D --defined-only '$prefix/lib/$soname' | grep -qE ' cuframes_(publisher|subscriber)_config_init\$'"

# Static: a prefix with the archive alone, so -lcuframes can only mean
# libcuframes.a, and the link line is exactly pkg-config --static's.
mkdir -p "$static_prefix/lib/pkgconfig"
cp -a "$prefix/include" "$static_prefix/"
cp "$prefix/lib/libcuframes.a" "$static_prefix/lib/"
cp "$prefix/lib/pkgconfig/cuframes.pc" "$static_prefix/lib/pkgconfig/"
static_pc=(env PKG_CONFIG_PATH="$static_prefix/lib/pkgconfig" pkg-config
    --define-variable=prefix="$static_prefix")
static_cflags=$("${static_pc[@]}" --cflags cuframes)
static_libs=$("${static_pc[@]}" --static --libs cuframes)
# shellcheck disable=SC2086
if build "test_capi (C99, static: $static_libs)" "$CC" "${c_flags[@]}" "${define[@]}" \
    $static_cflags tests/c/test_capi.c -o "$bin/test_capi-static" $static_libs; then
    check "static link needs no libcuframes.so" bash -c "! readelf -d '$bin/test_capi-static' | grep -q libcuframes"
    run test_capi-static "$bin/test_capi-static"
fi

if command -v valgrind >/dev/null 2>&1; then
    if [ -x "$bin/test_capi-c" ]; then
        run test_capi-valgrind env LD_LIBRARY_PATH="$prefix/lib" valgrind -q --error-exitcode=99 \
            --leak-check=full --errors-for-leak-kinds=definite "$bin/test_capi-c"
    fi
else
    echo "skip    memory check under valgrind (valgrind not installed)"
    skipped=$((skipped + 1))
fi

echo "C-API: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
