package reload

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ReloadWindows are the maintenance windows of the reload-window annotation: a reload is due
// only while one of them is open.
//
//	windows = window *( ";" window )
//	window  = days " " HH:MM "-" HH:MM " " zone
//	days    = "daily" / day [ "-" day ] *( "," day [ "-" day ] )   ; Mon … Sun
//
// The days name the day a window opens; a window whose end is not after its start ends the
// next day ("Sat,Sun 22:00-02:00 UTC"). Times are wall-clock times in the IANA zone.
type ReloadWindows []reloadWindow

type reloadWindow struct {
	days       [7]bool // by time.Weekday
	start, end int     // minutes after midnight; end may be 24*60
	loc        *time.Location
}

// Bounds of the reload-window annotation: what a user writes is checked before it costs.
const (
	MaxReloadWindowLen = 512
	MaxReloadWindows   = 16
)

// ReloadWindowForm is the accepted form, for error messages.
const ReloadWindowForm = `"<days> HH:MM-HH:MM <IANA zone>" separated by ";", days "daily" or Mon-Sun lists and ranges, e.g. "Mon-Fri 02:00-04:00 Europe/Berlin; Sat,Sun 22:00-02:00 UTC"`

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// ParseReloadWindows reads a reload-window annotation value.
func ParseReloadWindows(s string) (ReloadWindows, error) {
	return (*Caches)(nil).ParseReloadWindows(s)
}

// ParseReloadWindows is the package's ParseReloadWindows, with the time zones loaded once
// per Caches.
func (c *Caches) ParseReloadWindows(s string) (ReloadWindows, error) {
	if len(s) > MaxReloadWindowLen {
		return nil, fmt.Errorf("longer than %d characters", MaxReloadWindowLen)
	}
	parts := strings.Split(s, ";")
	if len(parts) > MaxReloadWindows {
		return nil, fmt.Errorf("more than %d windows", MaxReloadWindows)
	}
	var out ReloadWindows
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		w, err := parseReloadWindow(p, c.location)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", p, err)
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, errors.New("no window")
	}
	return out, nil
}

func parseReloadWindow(s string, location func(string) (*time.Location, error)) (reloadWindow, error) {
	var w reloadWindow
	f := strings.Fields(s)
	if len(f) != 3 {
		return w, errors.New("want days, a time range and a time zone")
	}
	if err := w.parseDays(f[0]); err != nil {
		return w, err
	}
	from, to, ok := strings.Cut(f[1], "-")
	if !ok {
		return w, fmt.Errorf("time range %q: want HH:MM-HH:MM", f[1])
	}
	var err error
	if w.start, err = clock(from, false); err != nil {
		return w, err
	}
	if w.end, err = clock(to, true); err != nil {
		return w, err
	}
	if w.start == w.end {
		return w, fmt.Errorf("time range %q is empty", f[1])
	}
	if w.loc, err = location(f[2]); err != nil {
		return w, err
	}
	return w, nil
}

func (w *reloadWindow) parseDays(s string) error {
	if strings.EqualFold(s, "daily") {
		w.days = [7]bool{true, true, true, true, true, true, true}
		return nil
	}
	for _, r := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(r, "-")
		from, ok1 := dayNames[strings.ToLower(a)]
		to, ok2 := from, true
		if isRange {
			to, ok2 = dayNames[strings.ToLower(b)]
		}
		if !ok1 || !ok2 {
			return fmt.Errorf("days %q: want daily, or days Mon … Sun in lists (Sat,Sun) and ranges (Mon-Fri)", s)
		}
		for d := from; ; d = (d + 1) % 7 {
			w.days[d] = true
			if d == to {
				break
			}
		}
	}
	return nil
}

// clock reads HH:MM as minutes after midnight; 24:00 only as an end.
func clock(s string, end bool) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	if strings.Trim(h+m, "0123456789") != "" {
		ok = false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || len(h) != 2 || len(m) != 2 || err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 ||
		hh > 24 || (hh == 24 && (mm != 0 || !end)) {
		return 0, fmt.Errorf("time %q: want HH:MM from 00:00 to 23:59 (24:00 as an end)", s)
	}
	return hh*60 + mm, nil
}

// loadLocation loads an IANA time zone; Caches.location memoizes it.
func loadLocation(name string) (*time.Location, error) {
	if name == "Local" || name == "" {
		return nil, fmt.Errorf("time zone %q: want an IANA name such as UTC or Europe/Berlin", name)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: want an IANA name such as UTC or Europe/Berlin", name)
	}
	return l, nil
}

// span is one opening of w: the one that starts on the day of date (in w's zone).
func (w reloadWindow) span(y int, m time.Month, d int) (from, to time.Time, ok bool) {
	day := time.Date(y, m, d, 12, 0, 0, 0, w.loc)
	if !w.days[day.Weekday()] {
		return time.Time{}, time.Time{}, false
	}
	endDay := d
	if w.end <= w.start {
		endDay++
	}
	from = time.Date(y, m, d, w.start/60, w.start%60, 0, 0, w.loc)
	to = time.Date(y, m, endDay, w.end/60, w.end%60, 0, 0, w.loc)
	// A daylight-saving jump can swallow a short window; it does not open that day.
	return from, to, from.Before(to)
}

// Next returns t when a window is open at t, else the time the next one opens. ok is false
// only for windows that never open (none can be parsed so).
func (ws ReloadWindows) Next(t time.Time) (time.Time, bool) {
	var next time.Time
	for _, w := range ws {
		local := t.In(w.loc)
		// Yesterday's opening may run past midnight; eight days ahead find every weekday even
		// when a daylight-saving jump swallows one opening.
		for off := -1; off <= 8; off++ {
			from, to, ok := w.span(local.Year(), local.Month(), local.Day()+off)
			if !ok || !to.After(t) {
				continue
			}
			if !from.After(t) {
				return t, true
			}
			if next.IsZero() || from.Before(next) {
				next = from
			}
			break
		}
	}
	return next, !next.IsZero()
}
