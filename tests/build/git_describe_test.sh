#!/bin/sh
# cmake/git_describe.cmake: the header names the checkout's commit as of the build (not of the
# configure), and is left untouched (same mtime) while the commit stays the same.
# Usage: git_describe_test.sh <path to git_describe.cmake>
set -eu
script="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
git init -q repo
git -C repo -c user.name=t -c user.email=t@t commit -q --allow-empty -m one
stamp() { cmake -DSRC="$dir/repo" -DOUT="$dir/korch_git.h" -P "$script"; }
expect() {
  want="#define KORCH_GIT_DESCRIBE \"$1\""
  got=$(cat "$dir/korch_git.h")
  [ "$got" = "$want" ] || { echo "got '$got', want '$want'"; exit 1; }
}
stamp
expect "$(git -C repo rev-parse --short HEAD)"
touch -d '2000-01-01' korch_git.h
stamp
[ "$(stat -c %Y korch_git.h)" = "$(date -d '2000-01-01' +%s)" ] || { echo "rewritten without a change"; exit 1; }
git -C repo -c user.name=t -c user.email=t@t commit -q --allow-empty -m two
stamp
expect "$(git -C repo rev-parse --short HEAD)"
echo x > repo/f && git -C repo add f
stamp
expect "$(git -C repo rev-parse --short HEAD)-dirty"
echo "git_describe.cmake: ok"
