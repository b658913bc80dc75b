package fair

import (
	"fmt"
	"testing"
)

// Shares: a tenant at its own bound gives up its own entry; a full table takes from the
// tenant with the most, or from the newcomer when none holds more.
func TestSharesPickWhoGivesUp(t *testing.T) {
	s := NewShares[string](6, 3)
	add := func(tenant string, n int) {
		for i := range n {
			s.Add(tenant, fmt.Sprint(tenant, i))
		}
	}
	add("a", 3)
	if v, crowded := s.Crowded("a"); !crowded || v != "a" {
		t.Errorf("a at its share: Crowded = %q, %v; want a", v, crowded)
	}
	if _, crowded := s.Crowded("b"); crowded {
		t.Error("b crowded in a table with room")
	}
	add("b", 2)
	add("c", 1)
	if v, crowded := s.Crowded("c"); !crowded || v != "a" {
		t.Errorf("full table, c new: Crowded = %q, %v; want a, the largest", v, crowded)
	}
	s.Remove("a", "a0")
	s.Add("b", "b2")
	if v, crowded := s.Crowded("b"); !crowded || v != "b" {
		t.Errorf("full table, b as large as any: Crowded = %q, %v; want b itself", v, crowded)
	}
	s.Add("b", "b2") // counted once
	s.Remove("x", "nothing")
	if s.Len() != 6 || s.Of("b") != 3 || len(s.Keys("a")) != 2 {
		t.Errorf("Len %d, Of(b) %d, Keys(a) %v", s.Len(), s.Of("b"), s.Keys("a"))
	}
}
