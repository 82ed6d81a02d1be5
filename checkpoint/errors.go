package checkpoint

import (
	"errors"
	"strconv"
)

// Errors of package checkpoint. Storage implementations wrap them with %w and the object's name,
// so errors.Is(err, ErrExists) and the others hold whatever Storage produced the error. Damaged
// manifests are reported as *base.CorruptionError (errors.Is(err, base.ErrCorruption)), never
// with these.
var (
	// ErrExists: Storage.Create found an object of that name already there. For a manifest it
	// means another writer committed that checkpoint id first — the caller is a zombie and
	// must stop (S3's 412 Precondition Failed to a PUT with If-None-Match: *).
	ErrExists = errors.New("checkpoint: object already exists")

	// ErrFenced: a checkpoint's manifest was written by a writer epoch that a restore of its
	// lineage fenced (doc.go, "Writer fencing"): the writer is a zombie — a process that
	// still runs after another restored its lineage — and must stop. Commit returns it, and
	// a reader never treats a fenced manifest as committed.
	ErrFenced = errors.New("checkpoint: writer fenced by a newer writer epoch")

	// ErrNotFound: Storage.Get or GetRange named an object that does not exist (S3's 404).
	// Errors from DirStorage also match fs.ErrNotExist.
	ErrNotFound = errors.New("checkpoint: object not found")

	// ErrInvalidName matches every *NameError: an object name or prefix that breaks the rules
	// of ValidateName.
	ErrInvalidName = errors.New("checkpoint: invalid object name")

	// ErrRange: Storage.GetRange asked for bytes past the end of the object, or for a negative
	// offset or length (S3's 416 Range Not Satisfiable, which Strata also reports for a range
	// that only partly fits, since a manifest always records exact ranges).
	ErrRange = errors.New("checkpoint: byte range outside the object")
)

// NameError reports an object name (or List prefix) that ValidateName refuses, and why.
// errors.Is(err, ErrInvalidName) holds for it.
type NameError struct {
	Name   string // the name as given
	Reason string // which rule it breaks, e.g. `segment ".." is reserved`
}

// Error returns "checkpoint: invalid object name "<Name>": <Reason>".
func (e *NameError) Error() string {
	return "checkpoint: invalid object name " + strconv.Quote(e.Name) + ": " + e.Reason
}

// Is reports whether target is ErrInvalidName.
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }
