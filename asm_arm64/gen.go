package asm_arm64

// The WORD files are generated from the mnemonic sources with Go 1.27.3's
// assembler (fetched through GOTOOLCHAIN); scripts/check-asm.sh fails if they drift.
//go:generate go run ../internal/tools/sve2word -pkg github.com/strata-db/strata/asm_arm64 -in neon_arm64.s -out neon_words_arm64.s
//go:generate go run ../internal/tools/sve2word -pkg github.com/strata-db/strata/asm_arm64 -in sve_arm64.s -out sve_words_arm64.s
