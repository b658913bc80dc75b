// Package installtest proves that the Helm chart installs a working reloader: for a matrix of
// values it renders the chart, applies every object to a real API server, runs the reloader
// binary with the args and env the chart rendered, authenticated as the chart's
// ServiceAccount, sees each enabled workload kind reload, and finds no 403 for that
// ServiceAccount in the API server's audit log. It also proves the upgrade from upstream's
// chart: a Helm release of a stand-in for it (testdata/upstream-v1.4.21) upgraded onto ours
// keeps its objects, selector and pod labels, gains the ReloaderConfig API, and reloads.
package installtest
