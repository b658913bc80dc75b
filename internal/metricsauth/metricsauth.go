// Package metricsauth guards /metrics as kube-apiserver guards its own: the caller's bearer
// token is checked with a TokenReview, and its right to get the non-resource URL with a
// SubjectAccessReview. Filter plugs into controller-runtime's secure metrics serving.
//
// controller-runtime's metrics/filters does the same through k8s.io/apiserver's delegating
// authenticator, which links gRPC, OpenTelemetry and component-base: 15 MB more binary, for
// two API calls per scrape that client-go's typed clients make as well.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Decisions are kept this long, so that a scraper every few seconds costs no API calls;
// a denial shorter, so that a grant just made takes effect soon.
const (
	allowTTL    = time.Minute
	denyTTL     = 10 * time.Second
	maxEntries  = 256
	callTimeout = 10 * time.Second
	// maxReviews bounds the reviews in flight: anyone who reaches the port can send a new
	// junk token with each request, and each would cost the API server a TokenReview. When
	// all are busy, a request whose decision is not cached gets 503 at once; a scraper with
	// a cached decision is not slowed.
	maxReviews = 4
)

// Filter is a metricsserver.Options FilterProvider.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	g, err := apiGuard(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			code, err := g.check(r)
			if err != nil {
				log.Error(err, "metrics authorization failed")
			}
			if code == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "1")
			}
			if code != http.StatusOK {
				http.Error(w, http.StatusText(code), code)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// Guard checks the bearer token of a request as Filter does, but for a verb and non-resource
// path its user names: the plan webhook asks whether its caller may post a path of its own.
type Guard struct{ g *guard }

// NewGuard asks the API server with cfg and httpClient.
func NewGuard(cfg *rest.Config, httpClient *http.Client) (*Guard, error) {
	g, err := apiGuard(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &Guard{g: g}, nil
}

// Check returns 200 when the caller's token is valid and its user may verb path, else 401
// (no token, or not valid), 403 (not allowed), 503 (reviews busy) or 500 (the API server not
// reached, with the error). Decisions are cached as Filter's are.
func (g *Guard) Check(r *http.Request, verb, path string) (int, error) {
	return g.g.checkAccess(r, verb, path)
}

func apiGuard(cfg *rest.Config, httpClient *http.Client) (*guard, error) {
	authn, err := authnclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return newGuard(apiReview(authn.TokenReviews(), authz.SubjectAccessReviews())), nil
}

// reviewFunc answers with 200, 401 (the token is not valid) or 403 (not allowed).
type reviewFunc func(ctx context.Context, token, verb, path string) (int, error)

type decision struct {
	code  int
	until time.Time
}

// guard caches the API server's decisions by token, verb and path.
type guard struct {
	review    reviewFunc
	reviews   chan struct{} // a slot per review in flight
	mu        sync.Mutex
	decisions map[[32]byte]decision
}

func newGuard(review reviewFunc) *guard {
	return &guard{review: review, reviews: make(chan struct{}, maxReviews), decisions: map[[32]byte]decision{}}
}

// check returns the HTTP status a request gets: 401 without a bearer token, 503 when
// maxReviews reviews are already in flight, 500 when the API server can't be asked (neither
// is cached).
func (g *guard) check(r *http.Request) (int, error) {
	return g.checkAccess(r, strings.ToLower(r.Method), r.URL.Path)
}

func (g *guard) checkAccess(r *http.Request, verb, path string) (int, error) {
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return http.StatusUnauthorized, nil
	}
	key := sha256.Sum256([]byte(token + "\x00" + verb + "\x00" + path))
	now := time.Now()
	g.mu.Lock()
	d, ok := g.decisions[key]
	g.mu.Unlock()
	if ok && now.Before(d.until) {
		return d.code, nil
	}
	select {
	case g.reviews <- struct{}{}:
		defer func() { <-g.reviews }()
	default:
		return http.StatusServiceUnavailable, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	code, err := g.review(ctx, token, verb, path)
	if err != nil {
		return http.StatusInternalServerError, err
	}
	ttl := denyTTL
	if code == http.StatusOK {
		ttl = allowTTL
	}
	g.mu.Lock()
	if _, ok := g.decisions[key]; !ok && len(g.decisions) >= maxEntries {
		g.evict(now)
	}
	g.decisions[key] = decision{code: code, until: now.Add(ttl)}
	g.mu.Unlock()
	return code, nil
}

// evict makes room for one decision: the expired ones go, or else the one that expires
// first. Emptying the whole cache instead would let a flood of junk tokens (each denied,
// so each cached) make real scrapers' tokens be reviewed again; and as denials expire
// sooner than grants, a flood mostly evicts its own.
func (g *guard) evict(now time.Time) {
	var first [32]byte
	var until time.Time
	for k, d := range g.decisions {
		if !now.Before(d.until) {
			delete(g.decisions, k)
			continue
		}
		if until.IsZero() || d.until.Before(until) {
			first, until = k, d.until
		}
	}
	if len(g.decisions) >= maxEntries {
		delete(g.decisions, first)
	}
}

// bearerToken reads "Authorization: Bearer <token>" (the scheme in any case).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

// apiReview asks the API server who the token is, then whether that user may verb path.
func apiReview(tokens authnclient.TokenReviewInterface, access authzclient.SubjectAccessReviewInterface) reviewFunc {
	return func(ctx context.Context, token, verb, path string) (int, error) {
		tr, err := tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return 0, fmt.Errorf("token review: %w", err)
		}
		if !tr.Status.Authenticated {
			return http.StatusUnauthorized, nil
		}
		u := tr.Status.User
		extra := map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = authzv1.ExtraValue(v)
		}
		sar, err := access.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
		}}, metav1.CreateOptions{})
		if err != nil {
			return 0, fmt.Errorf("subject access review for %s: %w", u.Username, err)
		}
		if !sar.Status.Allowed || sar.Status.Denied {
			return http.StatusForbidden, nil
		}
		return http.StatusOK, nil
	}
}
