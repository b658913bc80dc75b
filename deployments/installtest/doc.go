// Package installtest proves that the Helm chart installs a working reloader: for a matrix of
// values it renders the chart, applies every object to a real API server, runs the reloader
// binary with the args and env the chart rendered, authenticated as the chart's
// ServiceAccount, sees each enabled workload kind reload, and finds no 403 for that
// ServiceAccount in the API server's audit log.
package installtest
