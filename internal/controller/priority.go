package controller

import "sigs.k8s.io/controller-runtime/pkg/handler"

// Work queue priorities (internal/fair serves the highest first). A reload whose coalescing
// window is open comes back at reloadPriority when the window closes, ahead of everything
// else queued; a first record waiting for its slot (--first-sight-rate) comes back at
// handler.LowPriority, as the informers' first list queues it, behind changes. A worker
// that comes free takes the highest first: a due reload waits for at most the writes in
// flight, never for the first records queued.
const reloadPriority = 100

const firstSightPriority = handler.LowPriority
