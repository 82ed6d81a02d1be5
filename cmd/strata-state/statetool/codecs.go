package statetool

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/strata-db/strata"
)

// The codec ids of the root package's built-in codecs in a registry (the root's codecID:
// import path and type name), and the short names write accepts for them.
const (
	codecBytes   = "github.com/strata-db/strata.bytesCodec"
	codecString  = "github.com/strata-db/strata.stringCodec"
	codecInt64   = "github.com/strata-db/strata.int64Codec"
	codecUint64  = "github.com/strata-db/strata.uint64Codec"
	codecFloat64 = "github.com/strata-db/strata.float64Codec"
)

var shortCodecs = map[string]string{"bytes": codecBytes, "string": codecString, "int64": codecInt64, "uint64": codecUint64, "float64": codecFloat64}

// numeric reports whether codec id c prints its values as JSON numbers.
func numeric(c string) bool { return c == codecInt64 || c == codecUint64 || c == codecFloat64 }

// decodeValue returns b as dump prints a value of codec id c: a number for a built-in numeric
// codec, else text (raw bytes as base64 where text would not round-trip).
func decodeValue(c string, b []byte) any {
	switch c {
	case codecInt64:
		if v, err := strata.Int64.Decode(b); err == nil {
			return v
		}
	case codecUint64:
		if v, err := strata.Uint64.Decode(b); err == nil {
			return v
		}
	case codecFloat64:
		if v, err := strata.Float64.Decode(b); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v
		}
	default:
		return text(b)
	}
	return map[string][]byte{"base64": b}
}

// text returns b as a string when it is valid UTF-8 without control characters, else as
// {"base64": …} (encoding/json encodes a []byte as base64).
func text(b []byte) any {
	if utf8.Valid(b) {
		ok := true
		for _, r := range string(b) {
			if unicode.IsControl(r) {
				ok = false
				break
			}
		}
		if ok {
			return string(b)
		}
	}
	return map[string][]byte{"base64": b}
}

// parseBytes reads a byte string as dump prints one: a JSON string (its UTF-8 bytes) or
// {"base64": "…"}; absent or null is nil.
func parseBytes(m json.RawMessage) ([]byte, error) {
	if len(m) == 0 || string(m) == "null" {
		return nil, nil
	}
	switch m[0] {
	case '"':
		var s string
		if err := json.Unmarshal(m, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	case '{':
		var o struct {
			Base64 *string `json:"base64"`
		}
		d := json.NewDecoder(bytes.NewReader(m))
		d.DisallowUnknownFields()
		if err := d.Decode(&o); err != nil || o.Base64 == nil {
			return nil, fmt.Errorf("want a string or {\"base64\": \"…\"}, have %s", m)
		}
		return base64.StdEncoding.DecodeString(*o.Base64)
	}
	return nil, fmt.Errorf("want a string or {\"base64\": \"…\"}, have %s", m)
}

// encodeValue reads a value as dump prints one for codec id c (decodeValue's inverse): a JSON
// number only for a numeric codec, which takes no string.
func encodeValue(c string, m json.RawMessage) ([]byte, error) {
	if len(m) == 0 || string(m) == "null" {
		return nil, fmt.Errorf("no value")
	}
	if m[0] == '{' {
		return parseBytes(m)
	}
	if !numeric(c) {
		if m[0] != '"' {
			return nil, fmt.Errorf("a number for codec %q, which is not a built-in numeric codec (give a string or {\"base64\": …})", c)
		}
		return parseBytes(m)
	}
	if m[0] == '"' {
		return nil, fmt.Errorf("a string for the numeric codec %q (give a number, or {\"base64\": …} for raw bytes)", c)
	}
	s := string(m)
	switch c {
	case codecInt64:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("codec int64: %s is not an int64", s)
		}
		return strata.Int64.Append(nil, v), nil
	case codecUint64:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("codec uint64: %s is not a uint64", s)
		}
		return strata.Uint64.Append(nil, v), nil
	default:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("codec float64: %s is not a number", s)
		}
		return strata.Float64.Append(nil, v), nil
	}
}
