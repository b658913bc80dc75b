package fair

import (
	"strings"
	"testing"
)

func tenantOf(s string) string { return s[:strings.IndexByte(s, '/')] }

// pushAll pushes "tenant/name" items in order.
func pushAll(r *RoundRobin[string], items ...string) {
	for _, it := range items {
		r.Push(tenantOf(it), it)
	}
}

func popAll(r *RoundRobin[string]) []string {
	var out []string
	for {
		it, ok := r.Pop()
		if !ok {
			return out
		}
		out = append(out, it)
	}
}

func TestRoundRobinTakesTurns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		push   []string
		remove []string
		want   string
	}{
		{"one tenant is first in first out", []string{"a/1", "a/2", "a/3"}, nil, "a/1 a/2 a/3"},
		{"a late tenant goes second, not last", []string{"a/1", "a/2", "a/3", "a/4", "b/1"}, nil, "a/1 b/1 a/2 a/3 a/4"},
		{"three tenants in turn", []string{"a/1", "a/2", "b/1", "b/2", "c/1"}, nil, "a/1 b/1 c/1 a/2 b/2"},
		{"a duplicate keeps its place", []string{"a/1", "a/2", "a/1", "b/1"}, nil, "a/1 b/1 a/2"},
		{"removed items and emptied tenants leave", []string{"a/1", "b/1", "a/2", "c/1"}, []string{"b/1", "a/1"}, "a/2 c/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRoundRobin[string]()
			pushAll(r, tc.push...)
			for _, it := range tc.remove {
				if !r.Remove(it) {
					t.Fatalf("Remove(%s) found nothing", it)
				}
			}
			if got := strings.Join(popAll(r), " "); got != tc.want {
				t.Errorf("order %q, want %q", got, tc.want)
			}
			if r.Len() != 0 || r.Tenants() != 0 || len(r.lanes) != 0 {
				t.Errorf("left %d items, %d tenants", r.Len(), r.Tenants())
			}
		})
	}
}

// A tenant's turn comes again after every other tenant's, even when it arrives while another
// is mid-turn.
func TestRoundRobinInterleavesPushesAndPops(t *testing.T) {
	r := NewRoundRobin[string]()
	pushAll(r, "a/1", "a/2", "a/3")
	first, _ := r.Pop()
	pushAll(r, "b/1", "b/2")
	got := append([]string{first}, popAll(r)...)
	if want := "a/1 a/2 b/1 a/3 b/2"; strings.Join(got, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(got, " "), want)
	}
}

func TestRoundRobinAhead(t *testing.T) {
	r := NewRoundRobin[string]()
	pushAll(r, "a/1", "a/2", "a/3", "a/4", "b/1")
	for _, tc := range []struct {
		item string
		want int
	}{
		{"a/1", 0}, {"b/1", 0}, {"a/2", 2}, {"a/4", 4}, {"x/9", 0},
	} {
		if got := r.Ahead(tc.item); got != tc.want {
			t.Errorf("Ahead(%s) = %d, want %d", tc.item, got, tc.want)
		}
	}
}
