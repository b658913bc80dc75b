package ledger

// Flying reports whether a flush's entries for namespace are not in the informer yet.
func (l *Ledger) Flying(namespace string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.flying[namespace]
	return f != nil && !f.landed(l.stored(namespace))
}
