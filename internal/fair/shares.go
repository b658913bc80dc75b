package fair

// Shares keeps the count of a bounded table's entries per tenant, and says whose entry must go
// to make room for one more, so that no tenant evicts another's entries by filling the table:
// a tenant at its own bound gives up one of its own; when the table is full, the tenant with
// the most entries gives one up (the newcomer itself when it holds as many as any other). It
// holds the keys of each tenant, so that a table picks its victim among them without scanning
// the others'. It is not safe for concurrent use: the table's lock guards it.
type Shares[K comparable] struct {
	max, perTenant int
	n              int
	keys           map[string]map[K]struct{}
}

// NewShares bounds a table at max entries and perTenant entries of one tenant (at most max;
// max when 0 or more).
func NewShares[K comparable](max, perTenant int) *Shares[K] {
	if perTenant <= 0 || perTenant > max {
		perTenant = max
	}
	return &Shares[K]{max: max, perTenant: perTenant, keys: map[string]map[K]struct{}{}}
}

// Add counts k as tenant's; a key counted already changes nothing.
func (s *Shares[K]) Add(tenant string, k K) {
	ks := s.keys[tenant]
	if ks == nil {
		ks = map[K]struct{}{}
		s.keys[tenant] = ks
	}
	if _, ok := ks[k]; !ok {
		ks[k] = struct{}{}
		s.n++
	}
}

// Remove uncounts k; a key not counted changes nothing.
func (s *Shares[K]) Remove(tenant string, k K) {
	ks := s.keys[tenant]
	if _, ok := ks[k]; !ok {
		return
	}
	delete(ks, k)
	s.n--
	if len(ks) == 0 {
		delete(s.keys, tenant)
	}
}

// Crowded reports whether a new entry of tenant needs room, and if so the tenant one of whose
// entries must go (Keys names them).
func (s *Shares[K]) Crowded(tenant string) (string, bool) {
	if len(s.keys[tenant]) >= s.perTenant {
		return tenant, true
	}
	if s.n < s.max {
		return "", false
	}
	victim, most := tenant, len(s.keys[tenant])
	for t, ks := range s.keys {
		if len(ks) > most {
			victim, most = t, len(ks)
		}
	}
	return victim, true
}

// Keys are tenant's keys counted (read-only, valid until the next Add or Remove).
func (s *Shares[K]) Keys(tenant string) map[K]struct{} { return s.keys[tenant] }

// Len is the number of entries counted.
func (s *Shares[K]) Len() int { return s.n }

// Of is the number of tenant's entries counted.
func (s *Shares[K]) Of(tenant string) int { return len(s.keys[tenant]) }
