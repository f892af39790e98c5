package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

const (
	operatorNamespace = "vidra-system"
	leaseName         = "vidra.infrahub.operators.com"
)

type operatorKey struct{ name string }

func operatorFrom(ctx context.Context, name string) *fleetenv.Operator {
	return ctx.Value(operatorKey{name}).(*fleetenv.Operator)
}

func startOperator(name string, args ...string) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		op, err := fleetenv.StartOperator(ctx, append([]string{"--kubeconfig=" + cfg.KubeconfigFile()}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return context.WithValue(ctx, operatorKey{name}, op)
	}
}

func stopOperator(name string) features.Func {
	return func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
		op := operatorFrom(ctx, name)
		if err := op.Stop(30 * time.Second); err != nil {
			t.Errorf("stop operator %s: %v\n%s", name, err, op.Logs())
		}
		return ctx
	}
}

func leaseHolder(ctx context.Context, cfg *envconf.Config) (string, error) {
	var lease coordinationv1.Lease
	if err := cfg.Client().Resources(operatorNamespace).Get(ctx, leaseName, operatorNamespace, &lease); err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

func TestOperatorServesProbesMetricsAndLeaderElection(t *testing.T) {
	feature := features.New("the operator binary runs against a hub").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}
			if err := cfg.Client().Resources().Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			return ctx
		}).
		Setup(startOperator("first", "--leader-elect")).
		Assess("healthz and readyz answer ok", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			op := operatorFrom(ctx, "first")
			for _, path := range []string{"/healthz", "/readyz"} {
				testfleet.Eventually(t, 30*time.Second, path+" ok", func() (bool, error) {
					code, body, err := fleetenv.Get(ctx, op.HealthURL+path)
					return code == 200 && body == "ok", err
				})
			}
			return ctx
		}).
		Assess("it becomes the leader through a Lease", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			testfleet.Eventually(t, 30*time.Second, "lease held", func() (bool, error) {
				holder, err := leaseHolder(ctx, cfg)
				return holder != "", err
			})
			return ctx
		}).
		Assess("metrics are served in Prometheus text format", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			op := operatorFrom(ctx, "first")
			testfleet.Eventually(t, 30*time.Second, "leader metric is 1", func() (bool, error) {
				code, body, err := fleetenv.Get(ctx, op.MetricsURL+"/metrics")
				return code == 200 && strings.Contains(body, "# TYPE go_goroutines gauge") &&
					strings.Contains(body, `leader_election_master_status{name="`+leaseName+`"} 1`), err
			})
			return ctx
		}).
		Assess("every log line is structured JSON", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			logs := operatorFrom(ctx, "first").Logs()
			sawStart := false
			scanner := bufio.NewScanner(bytes.NewReader(logs))
			for scanner.Scan() {
				var entry map[string]any
				if err := json.Unmarshal(scanner.Bytes(), &entry); err != nil {
					t.Errorf("log line is not JSON: %q", scanner.Text())
					continue
				}
				if entry["level"] == nil || entry["msg"] == nil {
					t.Errorf("log line lacks level or msg: %q", scanner.Text())
				}
				if entry["msg"] == "starting operator" {
					sawStart = true
				}
			}
			if !sawStart {
				t.Errorf("no \"starting operator\" entry in:\n%s", logs)
			}
			return ctx
		}).
		Assess("a second replica stands by and takes over when the leader stops", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			first, err := leaseHolder(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx = startOperator("second", "--leader-elect")(ctx, t, cfg)
			second := operatorFrom(ctx, "second")
			testfleet.Eventually(t, 30*time.Second, "standby replica ready", func() (bool, error) {
				code, _, err := fleetenv.Get(ctx, second.HealthURL+"/readyz")
				return code == 200, err
			})
			if holder, _ := leaseHolder(ctx, cfg); holder != first {
				t.Fatalf("lease moved to %q while the first leader %q runs", holder, first)
			}

			// SIGTERM, as a rolling update sends: a clean exit that releases the Lease.
			op := operatorFrom(ctx, "first")
			if err := op.Stop(30 * time.Second); err != nil {
				t.Fatalf("first operator: %v\n%s", err, op.Logs())
			}
			if code := op.ExitCode(); code != 0 {
				t.Errorf("first operator exit code %d after SIGTERM, want 0", code)
			}
			// Released on exit, so the standby acquires it at its next retry (2s), long
			// before the 15s lease would have expired.
			testfleet.Eventually(t, 10*time.Second, "standby took the lease", func() (bool, error) {
				holder, err := leaseHolder(ctx, cfg)
				return holder != "" && holder != first, err
			})
			return ctx
		}).
		Teardown(stopOperator("second")).
		Feature()
	testenv.Test(t, feature)
}

func TestOperatorRefusesBadConfigurationClearly(t *testing.T) {
	feature := features.New("bad configuration stops the operator with a clear message").
		Assess("an unknown flag exits 2 naming the flag", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			op, err := fleetenv.StartOperator(ctx, "--no-such-flag")
			if err != nil {
				t.Fatal(err)
			}
			<-op.Exited()
			if code := op.ExitCode(); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if !strings.Contains(string(op.Logs()), "no-such-flag") {
				t.Errorf("output does not name the flag:\n%s", op.Logs())
			}
			return ctx
		}).
		Assess("a missing kubeconfig exits 1 with a JSON error naming the file", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			op, err := fleetenv.StartOperator(ctx, "--kubeconfig=/nonexistent/hub.kubeconfig")
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-op.Exited():
			case <-time.After(30 * time.Second):
				_ = op.Stop(time.Second)
				t.Fatal("operator kept running without a kubeconfig")
			}
			if code := op.ExitCode(); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			var entry struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
				Error string `json:"error"`
			}
			lines := bytes.Split(bytes.TrimSpace(op.Logs()), []byte("\n"))
			if err := json.Unmarshal(lines[len(lines)-1], &entry); err != nil {
				t.Fatalf("last log line is not JSON: %q", lines[len(lines)-1])
			}
			if entry.Level != "error" || !strings.Contains(entry.Error, "/nonexistent/hub.kubeconfig") {
				t.Errorf("last log line = %+v, want an error naming the kubeconfig", entry)
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, feature)
}
