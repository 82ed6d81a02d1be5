package timer

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/strata-db/strata/internal/base"
)

// The section format (doc.go, "Section format").
const (
	sectionMagic   = "STRATATM"
	sectionVersion = 1 // part of the format; do not change
	sectionCRC32C  = 1 // checksum type 1 = CRC32C; part of the format; do not change
	sectionHeader  = 16
	sectionFixed   = 8 // kg, reserved, block count
	blockFixed     = 8 // name length, domain, reserved, timer count (besides the name)
	// MaxSectionPayload bounds a section's payload (its length field is a u32).
	MaxSectionPayload = 1<<32 - 1
)

// Block is the timers of one service in one time domain of a section.
type Block struct {
	Service string
	Domain  Domain
	Timers  []Timer // KeyGroup is the section's; Key, Namespace, KeyHash, Timestamp are stored
}

// blockLess is the order of blocks in a section: by service name, then domain.
func blockCmp(as string, ad Domain, bs string, bd Domain) int {
	if c := cmp.Compare(as, bs); c != 0 {
		return c
	}
	return cmp.Compare(ad, bd)
}

// AppendSection appends the section of key group kg holding blocks (in strictly increasing
// (Service, Domain) order, each with at least one timer, names of 1..65535 bytes, keys and
// namespaces within MaxKeyLen and MaxNamespaceLen) to dst. It panics when blocks break a rule
// (the caller builds them) and returns the extended slice.
func AppendSection(dst []byte, kg int, blocks []Block) []byte {
	if len(blocks) == 0 || kg < 0 || kg > 0xffff {
		panic(fmt.Sprintf("strata: invariant: timer section of key group %d with %d blocks", kg, len(blocks)))
	}
	le := binary.LittleEndian
	start := len(dst)
	dst = append(dst, sectionMagic...)
	dst = le.AppendUint16(dst, sectionVersion)
	dst = append(dst, sectionCRC32C, 0)
	dst = le.AppendUint32(dst, 0) // length, below
	dst = le.AppendUint16(dst, uint16(kg))
	dst = le.AppendUint16(dst, 0)
	dst = le.AppendUint32(dst, uint32(len(blocks)))
	for i, b := range blocks {
		if len(b.Timers) == 0 || len(b.Service) == 0 || len(b.Service) > 0xffff ||
			(i > 0 && blockCmp(blocks[i-1].Service, blocks[i-1].Domain, b.Service, b.Domain) >= 0) {
			panic(fmt.Sprintf("strata: invariant: timer section block %d (%q, %v, %d timers) breaks the format's rules", i, b.Service, b.Domain, len(b.Timers)))
		}
		dst = le.AppendUint16(dst, uint16(len(b.Service)))
		dst = append(dst, b.Service...)
		dst = append(dst, byte(b.Domain), 0)
		dst = le.AppendUint32(dst, uint32(len(b.Timers)))
		for _, t := range b.Timers {
			if len(t.Key) > MaxKeyLen || len(t.Namespace) > MaxNamespaceLen {
				panic("strata: invariant: timer section: key or namespace too large")
			}
			dst = le.AppendUint64(dst, uint64(t.Timestamp))
			dst = le.AppendUint32(dst, uint32(t.KeyHash))
			dst = le.AppendUint16(dst, uint16(len(t.Key)))
			dst = le.AppendUint16(dst, uint16(len(t.Namespace)))
			dst = append(dst, t.Key...)
			dst = append(dst, t.Namespace...)
		}
	}
	n := len(dst) - start - sectionHeader
	if n > MaxSectionPayload {
		panic("strata: invariant: timer section payload over 4 GiB")
	}
	le.PutUint32(dst[start+12:], uint32(n))
	return le.AppendUint32(dst, crc32.Checksum(dst[start:], base.CRC32C))
}

// DecodeSection decodes the section at the start of b (b may hold more after it; off is b's
// offset in file, for errors) and calls fn for every timer in stored order, blocks in order;
// the timers' Key and Namespace alias b. It returns the section's key group and its length in
// bytes. Errors: a *base.CorruptionError (errors.Is(err, base.ErrCorruption)) naming file and
// the byte offset, with the cause the format's order of checks gives (doc.go, "Section
// format"); fn's error, returned as is (decoding stops). It never panics and allocates
// nothing beyond its errors and the service names.
func DecodeSection(file string, off int64, b []byte, fn func(service string, d Domain, t Timer) error) (kg int, n int, err error) {
	bad := func(cause error, at int, format string, args ...any) error {
		return base.Corrupt(file, off+int64(at), cause, format, args...)
	}
	le := binary.LittleEndian
	if len(b) < 8 {
		return 0, 0, bad(base.ErrTruncated, 0, "%d bytes, shorter than the magic", len(b))
	}
	if string(b[:8]) != sectionMagic {
		return 0, 0, bad(base.ErrBadMagic, 0, "magic %q, want %q", b[:8], sectionMagic)
	}
	if len(b) < sectionHeader+4 {
		return 0, 0, bad(base.ErrTruncated, 0, "%d bytes, shorter than the header and checksum", len(b))
	}
	if v := le.Uint16(b[8:]); v != sectionVersion {
		return 0, 0, bad(base.ErrFormatVersion, 8, "format version %d, this code reads %d", v, sectionVersion)
	}
	if c := b[10]; c != sectionCRC32C {
		return 0, 0, bad(base.ErrChecksumType, 10, "checksum type %d, want %d (CRC32C)", c, sectionCRC32C)
	}
	if b[11] != 0 {
		return 0, 0, bad(nil, 11, "reserved byte %#x is not zero", b[11])
	}
	plen := int64(le.Uint32(b[12:]))
	if int64(len(b))-sectionHeader-4 < plen {
		return 0, 0, bad(base.ErrTruncated, 12, "payload of %d bytes, %d present", plen, len(b)-sectionHeader-4)
	}
	end := sectionHeader + int(plen)
	if got, want := le.Uint32(b[end:]), crc32.Checksum(b[:end], base.CRC32C); got != want {
		return 0, 0, bad(base.ErrChecksum, end, "crc32c %#08x, computed %#08x", got, want)
	}
	p := b[:end]
	at := sectionHeader
	if end-at < sectionFixed {
		return 0, 0, bad(base.ErrTruncated, at, "payload of %d bytes, shorter than its fixed fields", plen)
	}
	kg = int(le.Uint16(p[at:]))
	if r := le.Uint16(p[at+2:]); r != 0 {
		return 0, 0, bad(nil, at+2, "reserved field %#x is not zero", r)
	}
	count := le.Uint32(p[at+4:])
	if count == 0 {
		return 0, 0, bad(nil, at+4, "no blocks")
	}
	at += sectionFixed
	var prevName []byte
	var prevDomain Domain
	for i := range count {
		bat := at
		if end-at < 2 {
			return 0, 0, bad(base.ErrTruncated, at, "block %d runs past the payload", i)
		}
		nl := int(le.Uint16(p[at:]))
		if end-at < 2+nl+6 {
			return 0, 0, bad(base.ErrTruncated, at, "block %d runs past the payload", i)
		}
		name := p[at+2 : at+2+nl]
		at += 2 + nl
		d := Domain(p[at])
		if nl == 0 {
			return 0, 0, bad(nil, bat, "block %d: empty service name", i)
		}
		if d != EventTime && d != ProcessingTime {
			return 0, 0, bad(nil, at, "block %d: unknown time domain %d", i, d)
		}
		if p[at+1] != 0 {
			return 0, 0, bad(nil, at+1, "block %d: reserved byte %#x is not zero", i, p[at+1])
		}
		if i > 0 {
			if c := bytes.Compare(prevName, name); c > 0 || (c == 0 && prevDomain >= d) {
				return 0, 0, bad(nil, bat, "block %d (%q, %v) not after (%q, %v)", i, name, d, prevName, prevDomain)
			}
		}
		prevName, prevDomain = name, d
		tn := le.Uint32(p[at+2:])
		at += 6
		if tn == 0 {
			return 0, 0, bad(nil, at-4, "block %d: no timers", i)
		}
		if uint64(tn)*recHeader > uint64(end-at) {
			return 0, 0, bad(base.ErrTruncated, at-4, "block %d: %d timers cannot fit in the %d bytes left", i, tn, end-at)
		}
		service := string(name)
		for j := range tn {
			if end-at < recHeader {
				return 0, 0, bad(base.ErrTruncated, at, "block %d timer %d runs past the payload", i, j)
			}
			ts := int64(le.Uint64(p[at:]))
			kh := int32(le.Uint32(p[at+8:]))
			kl, nsl := int(le.Uint16(p[at+12:])), le.Uint16(p[at+14:])
			if nsl&deadBit != 0 {
				return 0, 0, bad(nil, at+14, "block %d timer %d: namespace length %#x has the dead bit", i, j, nsl)
			}
			if end-at-recHeader < kl+int(nsl) {
				return 0, 0, bad(base.ErrTruncated, at, "block %d timer %d runs past the payload", i, j)
			}
			k := at + recHeader
			t := Timer{KeyGroup: kg, KeyHash: kh, Key: p[k : k+kl : k+kl], Namespace: p[k+kl : k+kl+int(nsl) : k+kl+int(nsl)], Timestamp: ts}
			if err := fn(service, d, t); err != nil {
				return 0, 0, err
			}
			at = k + kl + int(nsl)
		}
	}
	if at != end {
		return 0, 0, bad(nil, at, "%d bytes after the last block", end-at)
	}
	return kg, end + 4, nil
}

// DecodeSections decodes a sequence of sections filling b (the Store directory's timer file),
// as DecodeSection does for each; fn gets each timer with its key group in Timer.KeyGroup.
// Errors: DecodeSection's; two sections of one key group are corruption.
func DecodeSections(file string, b []byte, fn func(service string, d Domain, t Timer) error) error {
	seen := map[int]bool{}
	for off := 0; off < len(b); {
		kg, n, err := DecodeSection(file, int64(off), b[off:], fn)
		if err != nil {
			return err
		}
		if seen[kg] {
			return base.Corrupt(file, int64(off), nil, "a second section of key group %d", kg)
		}
		seen[kg] = true
		off += n
	}
	return nil
}
