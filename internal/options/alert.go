package options

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// Alert configures the notification sent after each reload: upstream's ALERT_* variables,
// and upstream v2's --alert-* flags, which win over them.
type Alert struct {
	Enabled bool
	// Sink is slack, teams, gchat or raw; empty means raw.
	Sink           string
	WebhookURL     string
	Proxy          string
	AdditionalInfo string
	// Structured is v2's --alert-structured (ALERT_STRUCTURED): for the raw sink, JSON in
	// place of plain text. reloader's raw sink always posts JSON; see alertWarnings.
	Structured bool

	// given records the --alert-* flags given on the command line (each then wins over its
	// variable) and the settings given at all (for error messages and warnings).
	given alertGiven
}

// alertGiven tells, per setting, whether its flag was given (flag) or, failing that, its
// variable was set (env). Bit sets, not maps: Options are copied by value.
type alertGiven struct {
	flag, env settingSet
}

// alertSetting is one of the alert settings.
type alertSetting uint

// settingSet is a set of alert settings.
type settingSet uint

func (s settingSet) has(a alertSetting) bool        { return s&(1<<a) != 0 }
func (s settingSet) with(a alertSetting) settingSet { return s | 1<<a }

// AlertSinks are the values --alert-sink and ALERT_SINK accept.
var AlertSinks = []string{"slack", "teams", "gchat", "raw"}

// The alert settings: upstream v2's flags (alertFlagNames), and the variables read when the
// flag is not given, in order (v2 reads ALERT_PROXY first, then v1's ALERT_WEBHOOK_PROXY).
const (
	alertOnReload alertSetting = iota
	alertSink
	alertWebhookURL
	alertProxy
	alertAdditional
	alertStructured
)

var alertFlagNames = [...]string{"alert-on-reload", "alert-sink", "alert-webhook-url", "alert-proxy", "alert-additional-info", "alert-structured"}

var alertEnv = [...][]string{
	alertOnReload:   {"ALERT_ON_RELOAD"},
	alertSink:       {"ALERT_SINK"},
	alertWebhookURL: {"ALERT_WEBHOOK_URL"},
	alertProxy:      {"ALERT_PROXY", "ALERT_WEBHOOK_PROXY"},
	alertAdditional: {"ALERT_ADDITIONAL_INFO"},
	alertStructured: {"ALERT_STRUCTURED"},
}

// alertName names a setting in messages as the user gave it: the flag when it was given,
// else its variables when one was set, else both.
func (a Alert) alertName(setting alertSetting) string {
	flag, env := "--"+alertFlagNames[setting], strings.Join(alertEnv[setting], " or ")
	switch {
	case a.given.flag.has(setting):
		return flag
	case a.given.env.has(setting):
		return env
	}
	return flag + " or " + env
}

// bindAlertFlags registers upstream v2's alert flags.
func (o *Options) bindAlertFlags(fs *pflag.FlagSet) {
	a := &o.Alert
	str := func(s alertSetting, v *string, usage string) {
		fs.Var(&givenString{v: v, given: &a.given, setting: s}, alertFlagNames[s], usage)
	}
	boolean := func(s alertSetting, v *bool, usage string) {
		f := fs.VarPF(&givenBool{v: v, given: &a.given, setting: s}, alertFlagNames[s], "", usage)
		f.NoOptDefVal = "true"
	}
	boolean(alertOnReload, &a.Enabled, "send an alert on each reload (env ALERT_ON_RELOAD; the flag wins); --alert-webhook-url alone also turns alerts on, as upstream v2 does, unless --alert-on-reload=false")
	str(alertSink, &a.Sink, "alert format: "+strings.Join(AlertSinks, ", ")+" (default raw; env ALERT_SINK)")
	str(alertWebhookURL, &a.WebhookURL, "URL the alerts are posted to (env ALERT_WEBHOOK_URL, e.g. from a Secret, keeps the URL, a token, off the command line)")
	str(alertProxy, &a.Proxy, "HTTP proxy for the alert requests (env ALERT_PROXY or ALERT_WEBHOOK_PROXY)")
	str(alertAdditional, &a.AdditionalInfo, "text added to each alert, e.g. the cluster's name (env ALERT_ADDITIONAL_INFO)")
	boolean(alertStructured, &a.Structured, "accepted for upstream v2: its raw sink then posts JSON; reloader's raw sink always posts JSON (env ALERT_STRUCTURED)")
}

// applyAlertEnv reads the ALERT_* variables of the settings whose flag was not given, and
// applies v2's rule that a webhook URL given as a flag turns alerts on.
func (o *Options) applyAlertEnv(getenv func(string) string) {
	a := &o.Alert
	lookup := func(setting alertSetting) (string, bool) {
		if a.given.flag.has(setting) {
			return "", false
		}
		for _, name := range alertEnv[setting] {
			if v := getenv(name); v != "" {
				a.given.env = a.given.env.with(setting)
				return v, true
			}
		}
		return "", false
	}
	// envBool reads a boolean variable as upstream does: only true turns it on; another word
	// is a warning, not a refusal, so that an install that worked starts after the swap.
	envBool := func(setting alertSetting, v *bool, what string) {
		s, ok := lookup(setting)
		if !ok || strings.TrimSpace(s) == "" {
			return
		}
		on, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			o.Warnings = append(o.Warnings, fmt.Sprintf("%s: %q is neither true nor false; %s, as upstream does", a.alertName(setting), strings.TrimSpace(s), what))
		}
		*v = on
	}
	if v, ok := lookup(alertSink); ok {
		a.Sink = strings.ToLower(strings.TrimSpace(v))
	}
	if v, ok := lookup(alertWebhookURL); ok {
		a.WebhookURL = strings.TrimSpace(v)
	}
	if v, ok := lookup(alertProxy); ok {
		a.Proxy = strings.TrimSpace(v)
	}
	if v, ok := lookup(alertAdditional); ok {
		a.AdditionalInfo = v
	}
	envBool(alertOnReload, &a.Enabled, "alerts stay off")
	envBool(alertStructured, &a.Structured, "it is off")

	// Upstream v2 turns alerts on when an alert URL is set. Its users set it with the flag;
	// from the environment, v1's rule stands (ALERT_ON_RELOAD=true is needed), so that a v1
	// install with a URL but alerts off stays quiet. An explicit --alert-on-reload=false or
	// ALERT_ON_RELOAD=false keeps them off.
	explicit := a.given.flag.has(alertOnReload) || a.given.env.has(alertOnReload)
	if a.given.flag.has(alertWebhookURL) && a.WebhookURL != "" && !explicit {
		a.Enabled = true
	}
}

// checkAlert checks the alert settings when alerts are on; off, they are never read.
func checkAlert(a Alert) []error {
	if !a.Enabled {
		return nil
	}
	var errs []error
	if !slices.Contains(AlertSinks, a.Sink) {
		errs = append(errs, fmt.Errorf("%s: %q is not one of %s", a.alertName(alertSink), a.Sink, strings.Join(AlertSinks, ", ")))
	}
	if err := checkURL(a.WebhookURL); err != nil {
		errs = append(errs, fmt.Errorf("%s (needed when alerts are on: --alert-on-reload or ALERT_ON_RELOAD=true): %w", a.alertName(alertWebhookURL), err))
	}
	if a.Proxy != "" {
		if err := checkURL(a.Proxy); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.alertName(alertProxy), err))
		}
	}
	return errs
}

// alertWarnings says what reloader sends where upstream v2's --alert-structured asks for a
// payload reloader has no copy of. reloader's raw sink always posts one JSON document (event,
// workload, sources, message, additionalInfo, time); v2's raw sink posts plain text, or with
// --alert-structured a flat JSON document of other field names. Said only when the setting
// was given, alerts are on and the sink is raw (v2 ignores it for the other sinks, as
// reloader does).
func alertWarnings(a Alert) []string {
	name := a.alertName(alertStructured)
	if !a.Enabled || a.Sink != "raw" || !(a.given.flag.has(alertStructured) || a.given.env.has(alertStructured)) {
		return nil
	}
	const ours = "reloader's raw sink posts JSON {event, workload: {kind, namespace, name}, sources, message, additionalInfo, time}"
	if a.Structured {
		return []string{name + ": " + ours + ", not upstream v2's flat fields (workloadKind, workloadName, workloadNamespace, resourceKind, resourceName, resourceNamespace, timestamp, additional); a receiver that reads those must read these"}
	}
	return []string{name + "=false: " + ours + ", not upstream v2's plain text; the text is in its message field"}
}

// givenString is a string flag that records that it was given.
type givenString struct {
	v       *string
	given   *alertGiven
	setting alertSetting
}

func (f *givenString) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}

func (f *givenString) Set(s string) error {
	s = strings.TrimSpace(s)
	if f.setting == alertSink {
		s = strings.ToLower(s)
	}
	*f.v = s
	f.given.flag = f.given.flag.with(f.setting)
	return nil
}

func (f *givenString) Type() string { return "string" }

// givenBool is a boolean flag that records that it was given.
type givenBool struct {
	v       *bool
	given   *alertGiven
	setting alertSetting
}

func (f *givenBool) String() string {
	if f.v == nil {
		return "false"
	}
	return strconv.FormatBool(*f.v)
}

func (f *givenBool) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*f.v = on
	f.given.flag = f.given.flag.with(f.setting)
	return nil
}

func (f *givenBool) Type() string     { return "bool" }
func (f *givenBool) IsBoolFlag() bool { return true }
