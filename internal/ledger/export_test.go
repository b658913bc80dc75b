package ledger

// Unechoed reports whether namespace has entries written that the informer's ConfigMap does
// not hold yet.
func (l *Ledger) Unechoed(namespace string) bool {
	data := cmData(l.stored(namespace))
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, e := range l.pending[namespace] {
		if e.written != 0 && !e.echoed(data, k) {
			return true
		}
	}
	return false
}
