package fleetenv

import (
	"context"
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

type fleetKey struct{}

// running is what StartFleet leaves in the context for StopFleet.
type running struct {
	fleet *testfleet.Fleet
	dir   string
}

// StartFleet starts a hub and members, points the e2e-framework config (and so
// cfg.Client()) at the hub, and stores the fleet in the context.
func StartFleet(opts testfleet.Options) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		fleet, err := testfleet.Start(ctx, opts)
		if err != nil {
			return ctx, err
		}
		dir, err := os.MkdirTemp("", "vidra-e2e-")
		if err != nil {
			return ctx, errors.Join(fmt.Errorf("temp dir: %w", err), fleet.Stop())
		}
		path, err := fleet.Hub.WriteKubeconfig(dir)
		if err != nil {
			return ctx, errors.Join(err, fleet.Stop())
		}
		cfg.WithKubeconfigFile(path)
		return context.WithValue(ctx, fleetKey{}, running{fleet: fleet, dir: dir}), nil
	}
}

// StopFleet stops the fleet started by StartFleet.
func StopFleet() env.Func {
	return func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		r, ok := ctx.Value(fleetKey{}).(running)
		if !ok {
			return ctx, nil
		}
		return ctx, errors.Join(r.fleet.Stop(), os.RemoveAll(r.dir))
	}
}

// Fleet returns the fleet of the context; it panics when StartFleet did not run, which is
// a mistake in the suite's setup.
func Fleet(ctx context.Context) *testfleet.Fleet {
	r, ok := ctx.Value(fleetKey{}).(running)
	if !ok {
		panic("fleetenv: no fleet in context: add fleetenv.StartFleet to the environment's Setup")
	}
	return r.fleet
}
