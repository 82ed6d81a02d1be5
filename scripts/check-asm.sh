#!/usr/bin/env bash
# Proves the generated WORD assembly files are in sync with their mnemonic
# sources: regenerates every *_words_arm64.s with internal/tools/sve2word
# (Go 1.27.3's assembler, GOEXPERIMENT=simd, fetched through GOTOOLCHAIN)
# into a temporary directory and fails on any difference. Fix drift with
# `go generate ./asm_arm64/`.
set -euo pipefail
cd "$(dirname "$0")/.."
pkg_dir=asm_arm64
pkg=github.com/strata-db/strata/$pkg_dir
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/sve2word" ./internal/tools/sve2word
status=0
n=0
for words in "$pkg_dir"/*_words_arm64.s; do
  src=${words%_words_arm64.s}_arm64.s
  [ -f "$src" ] || { echo "drift: $words has no mnemonic source $src"; status=1; continue; }
  "$tmp/sve2word" -pkg "$pkg" -in "$src" -out "$tmp/$(basename "$words")"
  if ! diff -u "$words" "$tmp/$(basename "$words")"; then
    echo "drift: $words differs from what sve2word generates from $src"; status=1
  fi
  n=$((n + 1))
done
# Every mnemonic source (files carrying the generator's source build tag) needs its WORD file.
for src in $(grep -l '^//go:build arm64 && !purego && go1.27 && goexperiment.simd$' "$pkg_dir"/*_arm64.s); do
  [ -f "${src%_arm64.s}_words_arm64.s" ] || { echo "drift: $src has no generated ${src%_arm64.s}_words_arm64.s"; status=1; }
done
[ "$n" -gt 0 ] || { echo "no *_words_arm64.s files found in $pkg_dir"; exit 1; }
[ "$status" -eq 0 ] && echo "check-asm: $n WORD files in sync with their mnemonic sources"
exit "$status"
