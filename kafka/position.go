package kafka

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Position is what the runner stores as a checkpoint's input position
// (strata.CheckpointHandle.InputPosition): which job, topic and partition the state belongs
// to and the offset of the next record to read. It lets a restore refuse another job's
// checkpoint (ErrForeignCheckpoint) and check the checkpoint against the consumer group's
// committed offset.
//
// Encoding (version 1; part of the format, do not change):
//
//	+--------+---------+---------------+-----+-----------------+-------+-----------+--------+--------+
//	| "SKP1" | version | uvarint len(job) | job | uvarint len(topic) | topic | partition | offset | crc32c |
//	| 4 B    | 1 B = 1 |               |     |                 |       | u32 BE    | u64 BE | u32 BE |
//	+--------+---------+---------------+-----+-----------------+-------+-----------+--------+--------+
//
// The CRC32C (Castagnoli) covers every byte before it.
type Position struct {
	Job       string
	Topic     string
	Partition int32
	Offset    int64
}

const (
	positionMagic   = "SKP1"
	positionVersion = 1 // part of the format; do not change
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Append appends p's encoding to dst.
func (p Position) Append(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, positionMagic...)
	dst = append(dst, positionVersion)
	dst = binary.AppendUvarint(dst, uint64(len(p.Job)))
	dst = append(dst, p.Job...)
	dst = binary.AppendUvarint(dst, uint64(len(p.Topic)))
	dst = append(dst, p.Topic...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Offset))
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodePosition decodes what Position.Append wrote. Errors (wrapping ErrBadPosition): a
// wrong magic, an unknown version, a truncated or overlong encoding, a CRC mismatch — each
// named.
func DecodePosition(b []byte) (Position, error) {
	if len(b) < len(positionMagic) || string(b[:len(positionMagic)]) != positionMagic {
		return Position{}, fmt.Errorf("%w: bad magic", ErrBadPosition)
	}
	if len(b) < 5 {
		return Position{}, fmt.Errorf("%w: truncated before the version", ErrBadPosition)
	}
	if b[4] != positionVersion {
		return Position{}, fmt.Errorf("%w: version %d, want %d", ErrBadPosition, b[4], positionVersion)
	}
	if len(b) < 5+4 {
		return Position{}, fmt.Errorf("%w: truncated (%d bytes)", ErrBadPosition, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return Position{}, fmt.Errorf("%w: checksum %08x, want %08x", ErrBadPosition, got, sum)
	}
	rest := body[5:]
	str := func(what string) (string, error) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return "", fmt.Errorf("%w: truncated %s", ErrBadPosition, what)
		}
		s := string(rest[k : k+int(n)])
		rest = rest[k+int(n):]
		return s, nil
	}
	var p Position
	var err error
	if p.Job, err = str("job"); err != nil {
		return Position{}, err
	}
	if p.Topic, err = str("topic"); err != nil {
		return Position{}, err
	}
	if len(rest) != 12 {
		return Position{}, fmt.Errorf("%w: %d bytes after the topic, want 12", ErrBadPosition, len(rest))
	}
	p.Partition = int32(binary.BigEndian.Uint32(rest))
	p.Offset = int64(binary.BigEndian.Uint64(rest[4:]))
	return p, nil
}
