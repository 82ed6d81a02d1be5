module github.com/strata-db/strata

go 1.26.0

require (
	github.com/dgryski/go-metro v0.0.0-20250106013310-edb8663e5e33
	github.com/klauspost/cpuid/v2 v2.4.2
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/sys v0.50.0
)
