// Package notify delivers JSON documents to HTTP endpoints: the --webhook-url notifications
// that replace reloads, and the alerts sent after them.
package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Poster POSTs JSON bodies with a per-attempt timeout and a few retries.
type Poster struct {
	Client *http.Client
	// Attempts is how many times one body is tried; at least 1.
	Attempts int
	// Backoff is the wait before the second attempt; it doubles after each failure.
	Backoff time.Duration
}

// NewPoster returns a Poster whose requests time out after timeout, go through proxy when it
// is not empty, and never follow redirects: a redirect answer is a failure, so a notification
// never lands somewhere the operator did not configure.
func NewPoster(timeout time.Duration, attempts int, proxy string) (*Poster, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if proxy != "" {
		u, err := url.Parse(proxy)
		if err != nil {
			// The proxy URL may hold credentials: never in an error.
			return nil, fmt.Errorf("proxy %s: %w", Redact(proxy), scrub(err, proxy))
		}
		transport.Proxy = http.ProxyURL(u)
	}
	return &Poster{
		Client: &http.Client{
			Timeout:   timeout,
			Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		Attempts: max(attempts, 1),
		Backoff:  500 * time.Millisecond,
	}, nil
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("answered %d %s: %s", e.Code, http.StatusText(e.Code), e.Body)
}

// retriable is false for answers that a second try would get again.
func retriable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusTooManyRequests || se.Code == http.StatusRequestTimeout
	}
	return true
}

// Post sends body to target, retrying transport errors and 5xx/429 answers with backoff.
func (p *Poster) Post(ctx context.Context, target string, body []byte) error {
	wait := p.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		if err = p.once(ctx, target, body); err == nil || !retriable(err) || attempt >= p.Attempts {
			break
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
	if err != nil {
		return fmt.Errorf("POST %s: %w", Redact(target), scrub(err, target))
	}
	return nil
}

func (p *Poster) once(ctx context.Context, target string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "reloader")
	resp, err := p.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Code: resp.StatusCode, Body: string(bytes.TrimSpace(snippet))}
	}
	return nil
}

// Redact drops the path, query and user info of a URL for logs, errors and metrics: chat
// webhook URLs (Slack, Teams, Google Chat) carry their token there.
func Redact(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "<invalid URL>"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// redactedError is an error whose text no longer holds a URL's secret parts; it still wraps
// the cause, so errors.Is sees a timeout or a cancelled context.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// scrub removes target's secret parts from err. The HTTP client's errors are *url.Error,
// whose text quotes the whole URL; other causes could quote parts of it.
func scrub(err error, target string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		// Rebuilt rather than edited: the caller's error value stays as it was.
		err = &url.Error{Op: ue.Op, URL: Redact(ue.URL), Err: ue.Err}
	}
	msg := err.Error()
	for _, secret := range secretParts(target) {
		if strings.Contains(msg, secret) {
			msg = strings.ReplaceAll(msg, secret, "…")
		}
	}
	return &redactedError{msg: msg, err: err}
}

// secretParts are the substrings of target that must not be shown, longest first.
func secretParts(target string) []string {
	parts := []string{target}
	if u, err := url.Parse(target); err == nil {
		parts = append(parts, u.RequestURI(), u.EscapedPath(), u.Path, u.RawQuery, u.Query().Encode())
		if p, ok := u.User.Password(); ok {
			parts = append(parts, p)
		}
		if u.User != nil {
			parts = append(parts, u.User.Username())
		}
	} else if _, rest, ok := strings.Cut(target, "://"); ok {
		if _, path, ok := strings.Cut(rest, "/"); ok {
			parts = append(parts, path)
		}
	}
	out := parts[:0]
	for _, p := range parts {
		if len(p) > 1 { // "/" and "" say nothing
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}
