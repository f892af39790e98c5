package testfleet

import (
	"os"
	"strconv"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
)

// EnvInt reads an integer setting of a test from the environment (to replay a randomized
// run, for example), or returns def.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// Logger returns the logger for an operator running inside a test: errors only, unless
// VIDRA_TEST_LOG=debug asks for the operator's whole story.
func Logger() (logr.Logger, error) {
	level := zap.ErrorLevel
	if os.Getenv("VIDRA_TEST_LOG") == "debug" {
		level = zap.DebugLevel
	}
	cfg := zap.NewDevelopmentConfig()
	cfg.Level = zap.NewAtomicLevelAt(level)
	zl, err := cfg.Build()
	if err != nil {
		return logr.Discard(), err
	}
	return zapr.NewLogger(zl), nil
}
