#!/bin/sh
# The table of subcommands (cli/commands.h: PN_COMMANDS) as the program shows it:
# every command that `pipenet --help` lists, read from that list and never written
# here, has a summary, answers --help with its usage on stdout (exit 0) and refuses
# an unknown option with one "pipenet: error:" line (exit 2).
set -u
. "$(dirname "$0")/script_fixture.sh"

"$PIPENET" --help >"$tmp/help" || fail "pipenet --help exited non-zero"
awk '/^commands:$/ { on = 1; next } on && /^$/ { exit } on { print }' "$tmp/help" >"$tmp/commands"
n=$(wc -l <"$tmp/commands")
[ "$n" -ge 2 ] || fail "pipenet --help lists $n commands: $(cat "$tmp/help")"
while read -r name summary; do
    [ -n "$summary" ] || fail "command $name has no summary in --help"
    "$PIPENET" "$name" --help >"$tmp/usage" 2>"$tmp/err" || fail "$name --help exited non-zero"
    head -1 "$tmp/usage" | grep -q "^usage: pipenet $name\\b" ||
        fail "$name --help does not start with its usage: $(head -1 "$tmp/usage")"
    [ ! -s "$tmp/err" ] || fail "$name --help wrote to stderr: $(cat "$tmp/err")"
    "$PIPENET" "$name" --no-such-option >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || fail "$name --no-such-option: exit $rc, not 2"
    head -1 "$tmp/err" | grep -q '^pipenet: error: ..' ||
        fail "$name --no-such-option: no 'pipenet: error:' line first: $(head -1 "$tmp/err")"
done <"$tmp/commands"
echo "$n commands"
