package nexmark

import "errors"

// ErrCodec is the error of a state value or input position that does not decode, wrapped
// with what was decoded and the length or field found.
var ErrCodec = errors.New("nexmark: bad state encoding")
