// Package fleetenv holds sigs.k8s.io/e2e-framework environment functions backed by
// Vidra's own fleet of control planes (internal/test/testfleet) — e2e-framework's kind support
// cannot run here — and a handle on the real bin/vidra process that the suites drive the
// way a user would.
package fleetenv
