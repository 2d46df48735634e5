#!/usr/bin/env bash
# scripts/check-circles against object files built here from tiny sources:
# it must pass a module whose files call down only, and refuse, naming the
# files, a module where two files call each other directly or through a
# third. Calls between folders are no circle; an allow-listed folder's
# circle (--allow) is reported, not refused.
# Usage: test_check_circles.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
failures=0

# unit FOLDER FILE DEFINES CALLS...: FOLDER/FILE.c.o defining rs_DEFINES
# and calling each rs_CALLS.
unit() {
    local folder=$1 file=$2 def=$3 body="" decl=""
    shift 3
    for c in "$@"; do
        decl+="void rs_$c(void); "
        body+="rs_$c(); "
    done
    mkdir -p "$tmp/b/CMakeFiles/rshuffle_obj.dir/$folder"
    echo "$decl void rs_$def(void); void rs_$def(void) { $body }" >"$tmp/$def.c"
    "$cc" -c -o "$tmp/b/CMakeFiles/rshuffle_obj.dir/$folder/$file.c.o" "$tmp/$def.c"
}

# expect pass|fail TEXT [OPTIONS...]: run the check on $tmp/b, then start a fresh tree.
expect() {
    local want=$1 text=$2 rc=0
    shift 2
    "$src/scripts/check-circles" "$@" "$tmp/b" >"$tmp/out" 2>&1 || rc=$?
    if { [ "$want" = pass ] && [ $rc != 0 ]; } || { [ "$want" = fail ] && [ $rc != 1 ]; }; then
        echo "FAIL: expected $want (rc $rc):"; cat "$tmp/out"; failures=$((failures + 1))
    elif ! grep -qF -- "$text" "$tmp/out"; then
        echo "FAIL: expected '$text' in:"; cat "$tmp/out"; failures=$((failures + 1))
    else
        echo "ok: $want: $text"
    fi
    rm -rf "$tmp/b"
}

# Down only: a -> b -> c, a -> c.
unit mod a a_top b_mid c_low
unit mod b b_mid c_low
unit mod c c_low
expect pass "check-circles: ok"

# Two files calling each other.
unit mod a a_x b_y
unit mod b b_y a_x
expect fail "circle in mod/: a.c b.c"

# Through a third: a -> b -> c -> a (c's call closes it).
unit mod a a_x b_y
unit mod b b_y c_z
unit mod c c_z a_x
unit mod d d_w a_x
expect fail "circle in mod/: a.c b.c c.c"
unit mod a a_x b_y
unit mod b b_y c_z
unit mod c c_z a_x
expect fail "c.c -> a.c (rs_a_x)"

# A backend folder is a folder of its own.
unit transport a a_x b_y
unit transport/verbs b b_y a_x
unit transport/verbs c c_z
expect pass "check-circles: ok"

# Across folders, calls both ways are the layering check's business, not this one's.
unit one a a_x b_y
unit two b b_y a_x
expect pass "check-circles: ok"

# A folder on the allow-list is reported, with its reason.
unit reader a a_x b_y
unit reader b b_y a_x
expect pass "allowed in reader/: a.c b.c (planted)" --allow "reader=planted"

# The tree's own allow-list is empty: the same circle is refused without --allow.
unit reader a a_x b_y
unit reader b b_y a_x
expect fail "circle in reader/: a.c b.c"

# An unknown option is refused, not taken for the build folder.
unit mod a a_top
expect fail "Usage:" --bogus

[ $failures = 0 ] || { echo "$failures failed"; exit 1; }
echo "all passed"
