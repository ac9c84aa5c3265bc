#!/bin/sh
# The include rule of docs/architecture.md ("Folders, and what each may include"),
# read from its table: a file of src/X includes headers of X and of what X's row
# allows ("everything below": every folder of a lower floor; else the folders its
# row names), never others. Fails naming each include against the table, and each
# folder of src/ the table lacks (a new floor is written down before it is used).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/script_fixture.sh"
top=$here/..
doc=$top/docs/architecture.md
[ -f "$doc" ] || fail "no $doc"

# "FLOOR FOLDER ALLOWED..." per row: | 3 | `src/io` | ... | base, math, layers |
sed -n 's/^| \([0-9][0-9]*\) | `src\/\([a-z]*\)` | .* | \([^|]*\) |$/\1 \2 \3/p' "$doc" |
    tr -d ',' >"$tmp/floors"
[ -s "$tmp/floors" ] || fail "no floor table in $doc"

floor_of() { awk -v d="$1" '$2 == d { print $1 }' "$tmp/floors"; }
# allowed FROM TO: FROM's row lets it include TO
allowed() {
    awk -v from="$1" -v to="$2" '
        { floor[$2] = $1; row[$2] = $0 }
        END {
            if (!(from in row) || !(to in floor)) exit 1
            n = split(row[from], w, " ")
            if (w[3] == "everything" && w[4] == "below") exit !(floor[to] < floor[from])
            for (i = 3; i <= n; i++) if (w[i] == to) exit 0
            exit 1
        }' "$tmp/floors"
}

bad=0
for dir in "$top"/src/*/; do
    from=$(basename "$dir")
    [ -n "$(floor_of "$from")" ] || { echo "src/$from has no row in docs/architecture.md"; bad=1; continue; }
    # every "folder/header.h" a file of it includes (its subfolders too: math/cpu)
    grep -rHo '^#include "[a-z_]*/[a-z_0-9/]*\.h"' --include='*.c' --include='*.h' \
        --include='*.cu' "$dir" |
        sed 's|^\([^:]*\):#include "\([a-z_]*\)/.*|\1 \2|' | sort -u >"$tmp/includes"
    while read -r file to; do
        [ "$to" = "$from" ] && continue
        [ -d "$top/src/$to" ] || continue # <jansson.h>-like or generated, not a floor
        allowed "$from" "$to" || {
            echo "${file#"$top"/}: includes $to/, which src/$from may not (docs/architecture.md)"
            bad=1
        }
    done <"$tmp/includes"
done
[ $bad -eq 0 ] || fail "includes against the floors"
echo "PASS: $(wc -l <"$tmp/floors") folders, every include of src/ within them"
