// Package installtest proves that the Helm chart installs a working reloader: for a matrix of
// values it renders the chart, applies every object to a real API server, runs the reloader
// binary with the args and env the chart rendered, authenticated as the chart's
// ServiceAccount, sees each enabled workload kind reload, and finds no 403 for that
// ServiceAccount in the API server's audit log. It also proves the upgrade from upstream's
// charts: a Helm release of a stand-in for each (testdata/upstream-v1.4.21 for 2.2.16,
// testdata/upstream-chart-3.0.0-beta.1) upgraded onto ours keeps its objects, selector and
// pod labels, gains the ReloaderConfig API, and reloads; and that `helm install` against the
// local API server passes the chart's kubeVersion constraint.
package installtest
