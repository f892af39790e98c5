package main

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/runtime/version"
)

func TestOptionsDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.operator.MetricsBindAddress != ":8080" || o.operator.HealthProbeBindAddress != ":8081" || o.operator.LeaderElection {
		t.Errorf("defaults = %+v", o)
	}
	if o.operator.LeaderElectionNamespace != "vidra-system" {
		t.Errorf("leader election namespace = %q, want vidra-system", o.operator.LeaderElectionNamespace)
	}
	// Infrahub: Secrets from the operator's namespace; webhooks only with a key.
	if o.operator.HubQPS != 100 || o.operator.HubBurst != 200 || o.operator.PprofBindAddress != "0" {
		t.Errorf("hub client and pprof defaults = %+v", o)
	}
	// Members: no client-side limit unless asked (their API Priority and Fairness paces).
	if o.operator.ClusterQPS != 0 || o.operator.ClusterBurst != 100 {
		t.Errorf("cluster client defaults = %+v", o)
	}
	if o.operator.InfrahubSecretNamespace != "vidra-system" || o.operator.WebhookBindAddress != ":8090" || o.operator.WebhookSecret != "" || o.operator.InfrahubTimeout.Seconds() != 30 {
		t.Errorf("Infrahub defaults = %+v", o)
	}
}

func TestOptionsLeaderElectionNamespaceFollowsPodNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "platform")
	o, err := parseOptions([]string{"--leader-elect"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.operator.LeaderElection || o.operator.LeaderElectionNamespace != "platform" {
		t.Errorf("options = %+v, want leader election in namespace platform", o)
	}
}

func TestOptionsRejectPositionalArguments(t *testing.T) {
	if _, err := parseOptions([]string{"run"}); err == nil {
		t.Error("positional argument accepted")
	}
	if _, err := parseOptions([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h = %v, want flag.ErrHelp", err)
	}
}

func TestOptionsShardingElectsALeaderAndNamesThePod(t *testing.T) {
	t.Setenv("POD_NAME", "vidra-7d9f-abcde")
	o, err := parseOptions([]string{"--sharding"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.operator.Sharding || !o.operator.LeaderElection || o.operator.ShardID != "vidra-7d9f-abcde" || o.operator.ShardLeaseDuration.Seconds() != 15 {
		t.Errorf("options = %+v, want sharding with leader election, shard ID from POD_NAME and a 15s fence", o)
	}
	if _, err := parseOptions([]string{"--sharding", "--cluster-provider=none"}); err == nil {
		t.Error("--sharding accepted in standalone mode")
	}
	if _, err := parseOptions([]string{"--sharding", "--shard-lease-duration=1s"}); err == nil {
		t.Error("a 1s fence accepted")
	}
}

func TestOptionsRefuseAClusterRateLimitThatCannotBeMet(t *testing.T) {
	for _, args := range [][]string{{"--cluster-qps=-1"}, {"--cluster-qps=20", "--cluster-burst=0"}} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("parseOptions(%v) accepted it", args)
		}
	}
	if o, err := parseOptions([]string{"--cluster-qps=20", "--cluster-burst=40"}); err != nil || o.operator.ClusterQPS != 20 || o.operator.ClusterBurst != 40 {
		t.Errorf("parseOptions(20, 40) = %v, %v", o.operator.ClusterQPS, err)
	}
}

// The leader keeps its Lease through a hub slow for half a minute, as Flux's do, and
// timings under which it would lose it between renewals are refused by name.
func TestOptionsLeaderElectionOutlastsASlowHub(t *testing.T) {
	o, err := parseOptions([]string{"--leader-elect"})
	if err != nil {
		t.Fatal(err)
	}
	if lease, renew, retry := o.operator.LeaderElectionLeaseDuration, o.operator.LeaderElectionRenewDeadline, o.operator.LeaderElectionRetryPeriod; lease != 35*time.Second || renew != 30*time.Second || retry != 5*time.Second {
		t.Errorf("leader election timings %v, %v, %v; want 35s, 30s, 5s", lease, renew, retry)
	}
	if _, err := parseOptions([]string{"--leader-election-lease-duration=20s", "--leader-election-renew-deadline=15s", "--leader-election-retry-period=2s"}); err != nil {
		t.Errorf("consistent timings refused: %v", err)
	}
	for _, args := range [][]string{
		{"--leader-election-lease-duration=30s"},
		{"--leader-election-renew-deadline=5s"},
		{"--leader-election-retry-period=0s"},
		{"--leader-election-retry-period=-1s"},
	} {
		_, err := parseOptions(args)
		if err == nil || !strings.Contains(err.Error(), "--leader-election-renew-deadline=") {
			t.Errorf("%v: error %v, want the timings named", args, err)
		}
	}
}

func TestVersionIsPrintedAndNothingStarts(t *testing.T) {
	var out strings.Builder
	// A context already done: were the operator started, it would stop at once and fail
	// to reach any cluster, returning 1.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := run(ctx, []string{"--version"}, &out); code != 0 || out.String() != "vidra "+version.Get()+"\n" {
		t.Errorf("vidra --version: exit %d, printed %q", code, out.String())
	}
}
