#!/bin/sh
# Writes seeds for the structure-aware targets into DIR: the input that takes one
# decision away from the default (a zero byte always chooses what pipenet expects),
# for each of the first POSITIONS decisions and a few values.
# usage: make_seeds.sh DIR [POSITIONS]
set -eu
dir=$1 positions=${2:-48}
mkdir -p "$dir"
p=0
while [ "$p" -lt "$positions" ]; do
    for v in 1 2 3 5 7; do
        { head -c "$p" /dev/zero; printf "\\$(printf %o "$v")"; } >"$dir/decision-$p-$v"
    done
    p=$((p + 1))
done
