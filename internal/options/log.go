package options

import (
	"fmt"
	"strings"

	"go.uber.org/zap/zapcore"
)

// ParseLogLevel maps upstream's logrus-style levels to zap levels; trace is logr's V(2).
func ParseLogLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace":
		return zapcore.Level(-2), nil
	case "debug":
		return zapcore.DebugLevel, nil
	case "", "info":
		return zapcore.InfoLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	case "fatal", "panic":
		return zapcore.FatalLevel, nil
	}
	return 0, fmt.Errorf("--log-level: %q is not one of trace, debug, info, warning, error", s)
}
