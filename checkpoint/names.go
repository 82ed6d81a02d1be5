package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Object names. The layout (drawn in doc.go, "Object layout") is designed for object stores:
// every name is written once and never reused, names spread by owner and key-group range, and
// one List of "<owner>/" finds everything a lineage wrote.

// MaxNameLen is the longest object name in bytes: S3's limit on object keys (1024).
const MaxNameLen = 1024

// ManifestFile is the last segment of every manifest name: "<owner>/chk-<id>/MANIFEST".
const ManifestFile = "MANIFEST"

// ValidateName reports whether name is a valid object name, returning a *NameError
// (errors.Is(err, ErrInvalidName)) if not. A name is "/"-separated segments, each non-empty
// and made of ASCII letters, digits, '-', '_' and '.', not beginning with '.' (so neither "."
// nor ".." nor a hidden or temporary file of DirStorage); it is relative (no leading "/"), has
// no trailing "/" and is at most MaxNameLen bytes. These are the characters every object store
// and file system accepts as they are (S3's "safe characters" minus those a shell or URL would
// quote).
func ValidateName(name string) error {
	if name == "" {
		return &NameError{Name: name, Reason: "empty"}
	}
	if len(name) > MaxNameLen {
		return &NameError{Name: name, Reason: fmt.Sprintf("%d bytes, longer than %d", len(name), MaxNameLen)}
	}
	if name[0] == '/' {
		return &NameError{Name: name, Reason: "absolute"}
	}
	for seg := range strings.SplitSeq(name, "/") {
		if err := validateSegment(name, seg); err != nil {
			return err
		}
	}
	return nil
}

// ValidatePrefix reports whether prefix is a valid List prefix — "" or the start of a valid
// name — returning a *NameError (errors.Is(err, ErrInvalidName)) if not. Storage
// implementations outside this package call it first in List, as DirStorage does.
func ValidatePrefix(prefix string) error { return validatePrefix(prefix) }

// validatePrefix checks a List prefix: "" or the start of a valid name — its complete segments
// valid, its last (possibly partial or empty, after a trailing "/") segment made of valid
// characters.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxNameLen {
		return &NameError{Name: prefix, Reason: fmt.Sprintf("%d bytes, longer than %d", len(prefix), MaxNameLen)}
	}
	if prefix[0] == '/' {
		return &NameError{Name: prefix, Reason: "absolute"}
	}
	segs := strings.Split(prefix, "/")
	for i, seg := range segs {
		if i == len(segs)-1 {
			if seg != "" && seg[0] == '.' {
				return &NameError{Name: prefix, Reason: "segment begins with '.'"}
			}
			if c, ok := badChar(seg); ok {
				return &NameError{Name: prefix, Reason: fmt.Sprintf("character %q not allowed", c)}
			}
			break
		}
		if err := validateSegment(prefix, seg); err != nil {
			return err
		}
	}
	return nil
}

func validateSegment(name, seg string) error {
	if seg == "" {
		return &NameError{Name: name, Reason: "empty segment"}
	}
	if seg[0] == '.' {
		if seg == "." || seg == ".." {
			return &NameError{Name: name, Reason: fmt.Sprintf("segment %q is reserved", seg)}
		}
		return &NameError{Name: name, Reason: "segment begins with '.'"}
	}
	if c, ok := badChar(seg); ok {
		return &NameError{Name: name, Reason: fmt.Sprintf("character %q not allowed", c)}
	}
	return nil
}

func badChar(s string) (byte, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return c, true
		}
	}
	return 0, false
}

// ValidateOwner reports whether owner can own objects: exactly one valid name segment (no
// "/"), so that "<owner>/" is a prefix no other owner's names share. Errors: *NameError.
func ValidateOwner(owner string) error {
	if strings.Contains(owner, "/") {
		return &NameError{Name: owner, Reason: "an owner is one segment, without '/'"}
	}
	return ValidateName(owner)
}

// OwnerPrefix returns "<owner>/", the prefix of every object the owner writes: List it to see
// its lineage, GC it to collect it.
func OwnerPrefix(owner string) string { return owner + "/" }

// ManifestName returns the name of checkpoint id's manifest, "<owner>/chk-<id>/MANIFEST" with
// id in 20 decimal digits, so that names sort by id (as Flink's "chk-<n>/_metadata", padded).
// It does not validate owner (Commit does, through the storage).
func ManifestName(owner string, id uint64) string {
	return fmt.Sprintf("%s/chk-%020d/%s", owner, id, ManifestFile)
}

// ParseManifestName reverses ManifestName: it reports the owner and checkpoint id of a manifest
// name, and false for any other name (an object, a temporary, an id not in 20 digits).
func ParseManifestName(name string) (owner string, id uint64, ok bool) {
	owner, rest, ok := strings.Cut(name, "/")
	if !ok || owner == "" {
		return "", 0, false
	}
	dir, file, ok := strings.Cut(rest, "/")
	if !ok || file != ManifestFile {
		return "", 0, false
	}
	id, ok = parseChkDir(dir)
	return owner, id, ok
}

// parseChkDir parses "chk-<20 digits>".
func parseChkDir(dir string) (uint64, bool) {
	digits, ok := strings.CutPrefix(dir, "chk-")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	return id, err == nil
}

// SharedName returns a new, unique name for an object that later checkpoints may reference
// again (an sstable, a changelog segment):
//
//	<owner>/shared/<kgStart>-<kgEnd>/<id>-<random>.<ext>
//
// kgStart and kgEnd in 5 digits, id (the checkpoint that first uploads it) in 20 digits,
// random 16 hex digits of a randomly seeded generator, so two writers — a zombie and its
// successor, or two processes restored from one checkpoint — never pick the same name
// (invariant 1 in doc.go). ext is a short extension such as "sst" or "log". The name is not
// validated here; Put validates it.
func SharedName(owner string, kg KeyGroupRange, id uint64, ext string) string {
	return fmt.Sprintf("%s/shared/%05d-%05d/%020d-%016x.%s", owner, kg.Start, kg.End, id, rand.Uint64(), ext)
}

// PrivateName returns a new, unique name for an object only checkpoint id uses (the copied
// mutable part of its cut), next to its manifest:
//
//	<owner>/chk-<id>/<kgStart>-<kgEnd>-<random>.<ext>
//
// It is unreachable, and collected, once that checkpoint's manifest is no longer retained.
func PrivateName(owner string, id uint64, kg KeyGroupRange, ext string) string {
	return fmt.Sprintf("%s/chk-%020d/%05d-%05d-%016x.%s", owner, id, kg.Start, kg.End, rand.Uint64(), ext)
}

// ClaimMarkerName returns the name of the claim marker that claimant writes into lineage owner
// when it restores owner's checkpoint id in CLAIM mode: "<owner>/claims/<claimant>-<id>" with
// id in 20 decimal digits (doc.go, "Claims shared by several Stores"). It does not validate.
func ClaimMarkerName(owner, claimant string, id uint64) string {
	return fmt.Sprintf("%s/claims/%s-%020d", owner, claimant, id)
}

// ParseClaimMarkerName reverses ClaimMarkerName: the lineage, the claimant and the restored
// checkpoint id of a claim marker's name, and false for any other name.
func ParseClaimMarkerName(name string) (owner, claimant string, id uint64, ok bool) {
	owner, rest, ok := strings.Cut(name, "/")
	if !ok || owner == "" {
		return "", "", 0, false
	}
	file, ok := strings.CutPrefix(rest, "claims/")
	if !ok || strings.Contains(file, "/") {
		return "", "", 0, false
	}
	i := strings.LastIndexByte(file, '-')
	if i <= 0 || len(file)-i-1 != 20 {
		return "", "", 0, false
	}
	id, ok = parseChkDir("chk-" + file[i+1:])
	return owner, file[:i], id, ok
}
