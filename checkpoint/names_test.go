package checkpoint

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"job-1/chk-00000000000000000007/MANIFEST", true},
		{"job_1/shared/00000-00127/00000000000000000001-0123456789abcdef.sst", true},
		{"a.b/c.d", true},
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{"..", false},
		{"a/../b", false},
		{"a/./b", false},
		{".hidden", false},
		{"a/.tmp.0123", false},
		{"a b", false},
		{"a\\b", false},
		{"a\x00b", false},
		{"é", false},
		{strings.Repeat("a", MaxNameLen), true},
		{strings.Repeat("a", MaxNameLen+1), false},
	} {
		err := ValidateName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, not ErrInvalidName", tc.name, err)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"", true}, {"a", true}, {"a/", true}, {"a/b", true}, {"a/chk-0", true},
		{"/", false}, {"/a", false}, {"a//", false}, {"../", false}, {"a/.", false}, {"a/.tmp", false}, {"a b", false},
	} {
		if err := validatePrefix(tc.prefix); (err == nil) != tc.ok {
			t.Errorf("validatePrefix(%q) = %v, want ok=%v", tc.prefix, err, tc.ok)
		}
	}
}

func TestNames(t *testing.T) {
	kg := KeyGroupRange{Start: 3, End: 127}
	for _, tc := range []struct {
		got, wantPrefix, wantSuffix string
	}{
		{ManifestName("job", 7), "job/chk-00000000000000000007/MANIFEST", ""},
		{ManifestName("job", ^uint64(0)), "job/chk-18446744073709551615/MANIFEST", ""},
		{SharedName("job", kg, 9, "sst"), "job/shared/00003-00127/00000000000000000009-", ".sst"},
		{PrivateName("job", 9, kg, "bin"), "job/chk-00000000000000000009/00003-00127-", ".bin"},
	} {
		if !strings.HasPrefix(tc.got, tc.wantPrefix) || !strings.HasSuffix(tc.got, tc.wantSuffix) {
			t.Errorf("name %q, want %q…%q", tc.got, tc.wantPrefix, tc.wantSuffix)
		}
		if err := ValidateName(tc.got); err != nil {
			t.Errorf("generated name %q is invalid: %v", tc.got, err)
		}
	}
	if a, b := SharedName("job", kg, 1, "sst"), SharedName("job", kg, 1, "sst"); a == b {
		t.Errorf("SharedName repeated %q", a)
	}
	for _, tc := range []struct {
		name  string
		owner string
		id    uint64
		ok    bool
	}{
		{"job/chk-00000000000000000007/MANIFEST", "job", 7, true},
		{"job/chk-18446744073709551615/MANIFEST", "job", ^uint64(0), true},
		{"job/chk-99999999999999999999/MANIFEST", "", 0, false}, // overflows uint64
		{"job/chk-7/MANIFEST", "", 0, false},
		{"job/chk-0000000000000000000x/MANIFEST", "", 0, false},
		{"job/chk-00000000000000000007/other", "", 0, false},
		{"job/x/chk-00000000000000000007/MANIFEST", "", 0, false},
		{"job/shared/00000-00001/x.sst", "", 0, false},
		{"chk-00000000000000000007/MANIFEST", "", 0, false},
	} {
		owner, id, ok := ParseManifestName(tc.name)
		if ok != tc.ok || ok && (owner != tc.owner || id != tc.id) {
			t.Errorf("ParseManifestName(%q) = %q, %d, %v; want %q, %d, %v", tc.name, owner, id, ok, tc.owner, tc.id, tc.ok)
		}
	}
	for _, tc := range []struct {
		owner string
		ok    bool
	}{{"job", true}, {"job-1.a_b", true}, {"a/b", false}, {"", false}, {"..", false}} {
		if err := ValidateOwner(tc.owner); (err == nil) != tc.ok {
			t.Errorf("ValidateOwner(%q) = %v, want ok=%v", tc.owner, err, tc.ok)
		}
	}
}
