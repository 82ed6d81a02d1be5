package tests

// must returns v, panicking on err: for the set-up calls of a test (registering a state).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
