package whatchanged

import "strings"

// Label values of the trigger_manager metric label besides the known managers.
const (
	LabelOther   = "other"
	LabelUnknown = "unknown"
)

// knownManagers are the field managers a metric label names as they are: kubectl's
// commands, and the controllers and tools that write ConfigMaps and Secrets most. Any other
// manager is LabelOther, so that the label's values stay bounded whatever tenants write.
var knownManagers = map[string]bool{
	"kubectl":                       true,
	"kubectl-edit":                  true,
	"kubectl-client-side-apply":     true,
	"kubectl-create":                true,
	"kubectl-replace":               true,
	"kubectl-patch":                 true,
	"kubectl-set":                   true,
	"kubectl-label":                 true,
	"kubectl-annotate":              true,
	"kubectl-rollout":               true,
	"helm":                          true,
	"argocd-controller":             true,
	"argocd-application-controller": true,
	"external-secrets":              true,
	"kustomize-controller":          true,
	"helm-controller":               true,
	"sealed-secrets-controller":     true,
	"vault-secrets-operator":        true,
	"kube-controller-manager":       true,
	"terraform-provider-kubernetes": true,
	"pulumi-kubernetes":             true,
}

// managerPrefixes fold the families whose managers carry a suffix ("cert-manager-certificates-
// issuing") into one label value.
var managerPrefixes = []string{"cert-manager"}

// Label is the metric label value of a manager: itself when known, its family for the
// families of managerPrefixes, LabelUnknown for none, LabelOther otherwise.
func Label(manager string) string {
	switch {
	case manager == "":
		return LabelUnknown
	case knownManagers[manager]:
		return manager
	}
	for _, p := range managerPrefixes {
		if strings.HasPrefix(manager, p) {
			return p
		}
	}
	return LabelOther
}
