package installtest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// reloader.netpol.to and from are lists of peers, as in upstream's chart: `to` is the peers
// of one egress rule on port 443, `from` those of one ingress rule on the metrics port. The
// rendered policy is applied and read back, so what is checked is what the API server keeps.
func TestNetworkPolicyPeersAsUpstream(t *testing.T) {
	needCluster(t)
	tcp := func(p intstr.IntOrString) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Port: &p, Protocol: ptr.To(corev1.ProtocolTCP)}
	}
	https := []networkingv1.NetworkPolicyPort{tcp(intstr.FromInt32(443))}
	metrics := []networkingv1.NetworkPolicyPort{tcp(intstr.FromString("http"))}
	apiServer := networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.96.0.1/32"}}
	prometheus := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}

	for _, tt := range []struct {
		name, values    string
		egress, ingress []networkingv1.NetworkPolicyEgressRule
		from            []networkingv1.NetworkPolicyPeer
	}{
		{name: "peers", values: `reloader: {netpol: {enabled: true,
			to: [{ipBlock: {cidr: 10.96.0.1/32}}],
			from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]}}`,
			egress: []networkingv1.NetworkPolicyEgressRule{{Ports: https, To: []networkingv1.NetworkPolicyPeer{apiServer}}},
			from:   []networkingv1.NetworkPolicyPeer{prometheus}},
		{name: "no-peers", values: `reloader: {netpol: {enabled: true}}`,
			egress: []networkingv1.NetworkPolicyEgressRule{{Ports: https}}},
		// extraEgress (reloader only) adds rules after upstream's one, e.g. DNS.
		{name: "extra", values: `reloader: {netpol: {enabled: true, extraEgress: [{ports: [{port: 53, protocol: UDP}]}]}}`,
			egress: []networkingv1.NetworkPolicyEgressRule{{Ports: https}, {Ports: []networkingv1.NetworkPolicyPort{
				{Port: ptr.To(intstr.FromInt32(53)), Protocol: ptr.To(corev1.ProtocolUDP)}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ns := "netpol-" + tt.name
			ensureNamespace(t, ctx, ns)
			var v map[string]any
			testutil.Must(t, yaml.Unmarshal([]byte(tt.values), &v))
			objs, err := render.Chart(chartDir, v, "rel", ns)
			testutil.Must(t, err)
			testutil.Must(t, applyAll(ctx, render.OfKind(objs, "NetworkPolicy"), ns))
			var np networkingv1.NetworkPolicy
			testutil.Must(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rel-reloader"}, &np))
			if !equality.Semantic.DeepEqual(np.Spec.Egress, tt.egress) {
				t.Errorf("egress %s, want %s", asYAML(np.Spec.Egress), asYAML(tt.egress))
			}
			ingress := []networkingv1.NetworkPolicyIngressRule{{Ports: metrics, From: tt.from}}
			if !equality.Semantic.DeepEqual(np.Spec.Ingress, ingress) {
				t.Errorf("ingress %s, want %s", asYAML(np.Spec.Ingress), asYAML(ingress))
			}
			want := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
			if !equality.Semantic.DeepEqual(np.Spec.PolicyTypes, want) {
				t.Errorf("policy types %v, want %v", np.Spec.PolicyTypes, want)
			}
		})
	}
}

func asYAML(v any) string {
	b, _ := yaml.Marshal(v)
	return "\n" + string(b)
}
