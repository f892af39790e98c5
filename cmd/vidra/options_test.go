package main

import (
	"errors"
	"flag"
	"testing"
)

func TestOptionsDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.metricsBindAddress != ":8080" || o.healthProbeBindAddress != ":8081" || o.leaderElect {
		t.Errorf("defaults = %+v", o)
	}
	if o.leaderElectionNamespace != "vidra-system" {
		t.Errorf("leader election namespace = %q, want vidra-system", o.leaderElectionNamespace)
	}
	// Infrahub: Secrets from the operator's namespace; webhooks only with a key.
	if o.hubQPS != 100 || o.hubBurst != 200 || o.pprofBindAddress != "0" {
		t.Errorf("hub client and pprof defaults = %+v", o)
	}
	// Members: no client-side limit unless asked (their API Priority and Fairness paces).
	if o.clusterQPS != 0 || o.clusterBurst != 100 {
		t.Errorf("cluster client defaults = %+v", o)
	}
	if o.infrahubSecretNamespace != "vidra-system" || o.webhookBindAddress != ":8090" || o.webhookSecret != "" || o.infrahubTimeout.Seconds() != 30 {
		t.Errorf("Infrahub defaults = %+v", o)
	}
}

func TestOptionsLeaderElectionNamespaceFollowsPodNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "platform")
	o, err := parseOptions([]string{"--leader-elect"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.leaderElect || o.leaderElectionNamespace != "platform" {
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
	if !o.sharding || !o.leaderElect || o.shardID != "vidra-7d9f-abcde" || o.shardLeaseDuration.Seconds() != 15 {
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
	if o, err := parseOptions([]string{"--cluster-qps=20", "--cluster-burst=40"}); err != nil || o.clusterQPS != 20 || o.clusterBurst != 40 {
		t.Errorf("parseOptions(20, 40) = %v, %v", o.clusterQPS, err)
	}
}
