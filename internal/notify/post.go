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
			return nil, fmt.Errorf("proxy %q: %w", proxy, err)
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
		return fmt.Errorf("POST %s: %w", redact(target), err)
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

// redact drops the path and query of a URL for logs: chat webhook URLs carry their secret there.
func redact(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return "<invalid URL>"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
