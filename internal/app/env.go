package app

import "os"

// leaderNamespace is where the Lease lives: POD_NAMESPACE as upstream's chart sets it, else
// controller-runtime's default (the in-cluster namespace).
func leaderNamespace() string {
	return os.Getenv("POD_NAMESPACE")
}
