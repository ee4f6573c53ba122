#!/usr/bin/env bash
# The command line's reference and its man pages are made from the
# commands' tables and the option list (tools/cli_help.c), never by hand:
# docs/cli.md is what `dptrain help --markdown` prints today (`cmake --build
# build --target cli-docs` writes it), each man page the build made is what
# `dptrain help --man COMMAND` prints, man renders each without a warning,
# and each lists every flag the command's --help does.
# Usage: cli_docs.sh path/to/dptrain
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0
ok() { passes=$((passes + 1)); echo "ok   $*"; }
bad() { fails=$((fails + 1)); echo "FAIL $*"; }

"$bin" help --markdown >"$dir/cli.md"
if cmp -s "$dir/cli.md" "$root/docs/cli.md"; then
  ok "docs/cli.md is what dptrain help --markdown prints"
else
  bad "docs/cli.md differs from dptrain help --markdown: run cmake --build build --target cli-docs"
  diff -u "$root/docs/cli.md" "$dir/cli.md" | head -20 | sed 's/^/     /'
fi

# flags CMD: the flags CMD --help lists, one a line.
flags() { "$bin" "$1" --help | grep -Eo '^  --[a-z0-9-]+' | sed 's/^  //'; }
# section CMD: CMD's part of docs/cli.md.
section() { awk -v h="## dptrain $1" '/^## / { on = ($0 == h) } on' "$root/docs/cli.md"; }

man_dir=$(dirname "$bin")/man
for cmd in "" $("$bin" help --commands); do
  page=dptrain${cmd:+-$cmd}
  "$bin" help --man $cmd >"$dir/$page.1"
  if cmp -s "$dir/$page.1" "$man_dir/$page.1"; then ok "$page.1 is the build's"
  else bad "$man_dir/$page.1 is not what dptrain help --man $cmd prints"; fi
  if command -v man >/dev/null; then
    MANWIDTH=80 man --warnings -l "$dir/$page.1" >"$dir/$page.txt" 2>"$dir/$page.err"
    if [[ $? -eq 0 && ! -s $dir/$page.err && -s $dir/$page.txt ]]; then
      ok "man -l $page.1 renders $(wc -l <"$dir/$page.txt") lines, no warning"
    else bad "man -l $page.1: $(head -3 "$dir/$page.err")"; fi
  fi
  [[ -z $cmd ]] && continue
  missing=""
  for flag in $(flags "$cmd"); do
    grep -qF -- "\`$flag" <(section "$cmd") || missing+=" $flag(docs/cli.md)"
    if command -v man >/dev/null; then
      grep -qF -- "$flag" "$dir/$page.txt" || missing+=" $flag($page.1)"
    fi
  done
  if [[ -z $missing ]]; then ok "docs/cli.md and $page.1 list every flag of $cmd --help"
  else bad "$cmd --help's flags missing:$missing"; fi
done

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
