package options

import (
	"fmt"
	"strings"

	"go.uber.org/zap/zapcore"
)

// LogLevels are the values --log-level accepts: upstream's (logrus) levels, any case.
var LogLevels = []string{"trace", "debug", "info", "warn", "warning", "error", "fatal", "panic"}

// ParseLogLevel maps upstream's logrus levels onto zap's. trace is logr's V(2) (reloader's
// most detailed lines), debug V(1). reloader logs nothing at fatal or panic level, so those
// two, as in logrus, keep only what is logged at that level or above: errors are left out.
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
	case "fatal":
		return zapcore.FatalLevel, nil
	case "panic":
		return zapcore.PanicLevel, nil
	}
	return 0, fmt.Errorf("--log-level: %q is not one of %s", s, strings.Join(LogLevels, ", "))
}
