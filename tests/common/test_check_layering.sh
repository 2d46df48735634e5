#!/usr/bin/env bash
# scripts/check-layering against a temporary copy of the tree: it must pass
# on the clean copy and fail, naming the line, on each planted back-include.
# Usage: test_check_layering.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
folders=(common codec transport shuffle pusher worker reader broadcast perf scripts)
failures=0

fresh() { # a clean copy of the checked folders in $tmp/tree
    rm -rf "$tmp/tree"
    mkdir "$tmp/tree"
    for d in "${folders[@]}"; do cp -r "$src/$d" "$tmp/tree/"; done
}

expect_pass() {
    if ! "$tmp/tree/scripts/check-layering" "$tmp/tree" >"$tmp/out" 2>&1; then
        echo "FAIL: check-layering refused the clean tree:"; cat "$tmp/out"
        failures=$((failures + 1))
    else
        echo "ok: clean tree passes"
    fi
}

# plant FILE LINE EXPECT: append LINE to FILE (created if new) in a fresh
# copy; check-layering must exit 1 and print EXPECT.
plant() {
    local file=$1 line=$2 expect=$3
    fresh
    echo "$line" >>"$tmp/tree/$file"
    if "$tmp/tree/scripts/check-layering" "$tmp/tree" >"$tmp/out" 2>&1; then
        echo "FAIL: $file with '$line' passed"; failures=$((failures + 1))
    elif ! grep -qF -- "$expect" "$tmp/out"; then
        echo "FAIL: $file with '$line': expected '$expect' in:"; cat "$tmp/out"
        failures=$((failures + 1))
    else
        echo "ok: $file with '$line' refused"
    fi
}

fresh
expect_pass
plant common/x.c '#include "pusher/internal.h"' 'common/x.c includes "pusher/internal.h"'
plant common/x.c '#include <rshuffle/pusher.h>' 'common/x.c includes <rshuffle/pusher.h>'
plant codec/x.h '#include "transport/internal.h"' 'codec/ may not use transport/'
plant shuffle/x.c '#include <rshuffle/pusher.h>' 'shuffle/x.c includes <rshuffle/pusher.h>'
plant transport/ctx.c '#include "transport/ucx/ucx.h"' 'transport/ may not use transport/ucx/'
plant transport/ctx.c '#include "transport/verbs/verbs.h"' 'transport/ may not use transport/verbs/'
plant transport/ucx/am.c '#include "transport/internal.h"' 'transport/ucx/ may not use transport/'
plant transport/verbs/cm.c '#include "transport/ucx/ucx.h"' 'transport/verbs/ may not use transport/ucx/'
plant broadcast/x.c '#include "shuffle/proto.h"' 'broadcast/ may not use shuffle/'
plant perf/x.c '#include "common/log.h"' 'perf/ may not use common/'
plant pusher/x.c 'const char *v = getenv("X");' 'pusher/x.c:1:const char *v = getenv("X");: the library reads'
plant common/log.c 'const char *v = secure_getenv("X");' 'the library reads the environment only through rs_env_get'
# Allowed ones must still pass: a backend using backend.h and common/.
fresh
echo '#include "transport/backend.h"' >>"$tmp/tree/transport/verbs/cm.c"
echo '#include <rshuffle/status.h>' >>"$tmp/tree/pusher/x.c"
expect_pass

[ $failures = 0 ] || { echo "$failures failed"; exit 1; }
echo "all passed"
