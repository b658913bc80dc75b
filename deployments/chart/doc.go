// Package chart holds the Helm chart (reloader/) and its tests: RBAC against internal/rbac,
// Helm lint, the values schema, and the flags and env that upstream's values keys render.
package chart
