package asm_arm64

const (
	lsb8 uint64 = 0x0101010101010101
	msb8 uint64 = 0x8080808080808080
)

// MatchTag8 returns 0x80 in every byte of ctrl equal to tag and 0 elsewhere
// (exact: no false positives, unlike the cheaper (v-lsb)&^v&msb form). Byte i
// of ctrl is bits 8i..8i+7, so bits.TrailingZeros64(m)/8 is the first match
// and m&(m-1) drops it.
//
// Pure-Go SWAR on every architecture, on purpose: it inlines (cost well
// under the budget) into the probe loop, and a separate assembly call costs
// more than the match itself (doc.go, "Tag match").
func MatchTag8(ctrl uint64, tag byte) uint64 {
	v := ctrl ^ (lsb8 * uint64(tag)) // zero bytes where equal
	// (v&0x7f..)+0x7f.. sets bit 7 of a byte iff its low 7 bits are non-zero;
	// or-ing v adds its own bit 7: a byte's bit 7 stays clear iff it is zero.
	return ^((v &^ msb8) + ^msb8 | v) & msb8
}
