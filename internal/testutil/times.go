package testutil

import "time"

// Earlier and Later return the earlier and the later of two times.
func Earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
