#!/usr/bin/env bash
# scripts/check-docs against a temporary copy of the tree: it must pass the
# clean copy and refuse, naming the cause, each planted drift: an RS_API
# function missing from docs/api.md, a public comment naming an internal
# macro, a comment (or a doc, a man page, a script's comment) citing a path
# that does not exist, a comment or doc that assumes the writer's machine,
# a public header that does not compile alone.
# Usage: test_check_docs.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fresh() { # the tree outside git (check-docs walks it), without build folders
    rm -rf "$tmp/tree"
    mkdir "$tmp/tree"
    for f in "$src"/*; do
        case $(basename "$f") in build*) continue ;; esac
        cp -r "$f" "$tmp/tree/"
    done
}

run() { "$tmp/tree/scripts/check-docs" "$tmp/tree" >"$tmp/out" 2>&1; }

expect_pass() {
    if run; then echo "ok: clean tree passes"; else
        echo "FAIL: check-docs refused the clean tree:"; cat "$tmp/out"; failures=$((failures + 1))
    fi
}

# plant FILE TEXT EXPECT: append TEXT to FILE in a fresh copy; the check
# must exit 1 and print EXPECT.
plant() {
    fresh
    printf '%s\n' "$2" >>"$tmp/tree/$1"
    if run; then
        echo "FAIL: $1 with '$2' passed"; failures=$((failures + 1))
    elif ! grep -qF -- "$3" "$tmp/out"; then
        echo "FAIL: $1 with '$2': expected '$3' in:"; cat "$tmp/out"; failures=$((failures + 1))
    else
        echo "ok: $1 with '$2' refused"
    fi
}

fresh
expect_pass
plant include/rshuffle/log.h 'RS_API int rs_log_planted(void);' 'rs_log_planted is not in docs/api.md'
plant include/rshuffle/log.h '/* bounded by RS_PLANTED_MAX */' 'a comment names RS_PLANTED_MAX'
plant common/log.c '/* see common/planted.c */' 'a comment cites common/planted.c'
plant common/log.c '/* see docs/planted.md */' 'a comment cites docs/planted.md'
plant docs/shuffle.md 'As `pusher/planted.c` does.' 'docs/shuffle.md: a comment cites pusher/planted.c'
plant man/rshuffle.7 'See docs/planted.md.' 'man/rshuffle.7: a comment cites docs/planted.md'
plant scripts/check-format '# as tests/common/planted.sh does' 'a comment cites tests/common/planted.sh'
plant docs/perf.md 'Slow on this machine.' "docs/perf.md: 'on this machine' assumes"
plant common/log.c '/* measured under other engineers builds */' "'other engineers' assumes"
plant include/rshuffle/log.h 'static inline int planted(void) { return undeclared_thing; }' \
    'log.h does not compile alone as c'
plant include/rshuffle/log.h 'static inline void *planted(void *p) { int *q = p; return q; }' \
    'log.h does not compile alone as c++'
# Cited paths that exist, and public names, still pass.
fresh
printf '%s\n' '/* see common/log.h and docs/api.md, RS_ERR_CONFIG, RS_WITH_UCX */' \
    >>"$tmp/tree/include/rshuffle/log.h"
expect_pass

[ $failures = 0 ] || { echo "$failures failed"; exit 1; }
echo "all passed"
