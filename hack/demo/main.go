// Command demo runs Vidra's main job on a local sandbox fleet: a hub and two member
// control planes, a demo Infrahub serving rendered artifacts (a web application and a
// VirtualMachine), a Helm repository serving the demo's own chart (hack/demo/chart), a Git
// repository served over smart HTTP (git http-backend) on loopback, the operator, both members enrolled with `kubectl vidra enroll`: member-1 in push mode in the
// canary ring, member-2 in pull mode (--pull) in prod, its agent (`bin/vidra --mode=agent`)
// running as its own process with a token of its ServiceAccount on the member, as its pod
// would; an InfrahubSync that fans the artifacts out to both, wave by wave, and a
// HelmSync that renders the chart for each member with that member's name, labels and
// APIs (the pull member's as its agent reports them), and a GitSync that delivers the
// repository's fleet/ directory to both; a third member is enrolled from a Cluster API
// Cluster and its kubeconfig Secret. A change in Infrahub then crosses
// the fleet canary first, with a preview of what
// waits for prod. It prints what a user would look at and stays up until Ctrl-C; with
// DEMO_EXIT=1 it exits after printing.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/source/infrahub"
	"github.com/vidra-operator/vidra/internal/test/capi"
	"github.com/vidra-operator/vidra/internal/test/gitserver"
	"github.com/vidra-operator/vidra/internal/test/infrahubtest"
	"github.com/vidra-operator/vidra/internal/test/kubevirtsim"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

func main() {
	if err := demo(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func demo() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	zl, err := zap.NewDevelopment(zap.IncreaseLevel(zap.WarnLevel))
	if err != nil {
		return err
	}
	return run(ctx, zapr.NewLogger(zl), os.Stdout, os.Getenv("DEMO_EXIT") == "1")
}

// sandbox is everything the demo started, stopped in reverse by close.
type sandbox struct {
	root, dir string
	fleet     *testfleet.Fleet
	// inventoryMember is the member enrolled from Cluster API, not one of fleet.Members.
	inventoryMember *testfleet.Cluster
	simulators      []*kubevirtsim.Simulator
	infrahub        *infrahubtest.Server
	charts          *chartRepo
	git             *gitserver.Server
	gitRepo         *gitserver.Repo
	gitHost         *gitHost
	gitURL          string
	operator        *exec.Cmd
	agent           *exec.Cmd // the pull member's agent
	webhook         string    // URL of the operator's webhook receiver
	cancel          context.CancelFunc
	userKube        string // kubeconfig with contexts hub, member-1, member-2
}

func run(ctx context.Context, log logr.Logger, out io.Writer, exitAfter bool) error {
	root, err := testfleet.ModuleRoot()
	if err != nil {
		return err
	}
	s := &sandbox{root: root, dir: filepath.Join(root, "bin", "demo")}
	defer s.close(out)
	steps := []struct {
		what string
		do   func(context.Context, logr.Logger) error
	}{
		{"start a hub and two member clusters", s.startFleet},
		{"start a demo Infrahub with rendered artifacts", s.startInfrahub},
		{"package the demo's chart and serve it from a Helm repository on loopback", s.startChartRepo},
		{"serve a Git repository of fleet settings on loopback (git http-backend)", s.startGitRepo},
		{"start the operator (bin/vidra)", s.startOperator},
		{"enroll member-1 with kubectl vidra enroll, member-2 with --pull, and start member-2's agent (bin/vidra --mode=agent)", s.enroll},
		{"apply an InfrahubSync that fans out to both members in two waves (canary, prod)", s.applySync},
		{"apply a HelmSync that renders the chart for each push member", s.applyHelmSync},
		{"apply a GitSync that delivers the repository's fleet/ directory to both members", s.applyGitSync},
		{"wait until everything is Ready", s.waitReady},
		{"wait until the HelmSync is Ready on the push members", s.waitHelmReady},
		{"wait until the GitSync is Ready on both members", s.waitGitReady},
	}
	rollout := []struct {
		what string
		do   func(context.Context, logr.Logger) error
	}{
		{"change the VM's memory in Infrahub and send its signed webhook", s.changeVM},
		{"watch the change reach the canary first, with a preview of what waits for prod", s.watchCanary},
		{"wait for the prod wave and the VM rollout on both members", s.waitRollout},
	}
	for i, step := range steps {
		fmt.Fprintf(out, "==> [%d/%d] %s\n", i+1, len(steps), step.what)
		if err := step.do(ctx, log); err != nil {
			return fmt.Errorf("%s: %w", step.what, err)
		}
	}
	s.show(ctx, out)
	for i, step := range rollout {
		fmt.Fprintf(out, "\n==> [%d/%d] %s\n", i+1, len(rollout), step.what)
		if err := step.do(ctx, log); err != nil {
			return fmt.Errorf("%s: %w", step.what, err)
		}
	}
	s.showRollout(ctx, out)
	order := []struct {
		what string
		do   func(context.Context, logr.Logger) error
	}{
		{"apply a database GitSync, Ready where its cluster says so (postBuild, a CEL health check), and an app that dependsOn it", s.applyOrderedSyncs},
		{"watch the app go to member-1 and wait on " + heldBack + ", whose database is still provisioning", s.waitHeldBack},
		{"label " + heldBack + "'s database ready: the app follows there", s.releaseHeldBack},
		{"push branch " + previewBranch + " and preview it on the fleet before it merges", s.previewBranch},
		{"enroll member-3 from Cluster API: a Cluster in " + inventoryNamespace + " and its kubeconfig Secret", s.enrollFromClusterAPI},
	}
	for i, step := range order {
		fmt.Fprintf(out, "\n==> [%d/%d] %s\n", i+1, len(order), step.what)
		if err := step.do(ctx, log); err != nil {
			return fmt.Errorf("%s: %w", step.what, err)
		}
	}
	s.explore(out)
	if exitAfter {
		return nil
	}
	fmt.Fprintln(out, "\nThe sandbox stays up until Ctrl-C.")
	<-ctx.Done()
	return nil
}

func (s *sandbox) startFleet(ctx context.Context, log logr.Logger) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	kubevirtCRDs := filepath.Join(s.root, "internal", "test", "kubevirtsim", "testdata", "crds")
	hubCRDs, err := capi.HubCRDDirectories()
	if err != nil {
		return err
	}
	s.fleet, err = testfleet.Start(ctx, testfleet.Options{
		Members: 3, ControllerManager: true,
		HubCRDDirectories: hubCRDs, MemberCRDDirectories: []string{kubevirtCRDs},
	})
	if err != nil {
		return err
	}
	// The third is enrolled from Cluster API at the end, and stopped by close.
	s.inventoryMember, s.fleet.Members = s.fleet.Members[2], s.fleet.Members[:2]
	simCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for i, m := range s.fleet.Members {
		// KubeVirt's part, and the nodes' part, on every member.
		sim, err := kubevirtsim.New(m.Config, kubevirtsim.Options{Log: log.WithName(m.Name)})
		if err != nil {
			return err
		}
		go sim.Run(simCtx)
		s.simulators = append(s.simulators, sim)
		if i == 0 { // member-1 also serves KubeVirt's restart API
			ip, err := kubevirtsim.RoutableIP()
			if err != nil {
				return err
			}
			if err := sim.ServeRestartAPI(simCtx, ip, "kubevirt"); err != nil {
				return err
			}
		}
		go runNodes(simCtx, m.Client)
	}
	return s.writeKubeconfigs()
}

// writeKubeconfigs writes one kubeconfig per cluster and a user's kubeconfig holding all
// three as contexts hub, member-1 and member-2.
func (s *sandbox) writeKubeconfigs() error {
	for _, c := range s.fleet.Clusters() {
		if _, err := c.WriteKubeconfig(s.dir); err != nil {
			return err
		}
	}
	var err error
	s.userKube, err = s.fleet.WriteUserKubeconfig(s.dir)
	return err
}

const (
	operatorNamespace = "vidra-system"
	artifactName      = "demo-webserver"
	artifactID        = "18a6d5a2-7c4e-4b3e-8d4f-00000000d001"
	infrahubToken     = "demo-token"
	webhookKey        = "demo-webhook-key"
)

func (s *sandbox) startInfrahub(_ context.Context, _ logr.Logger) error {
	s.infrahub = infrahubtest.New(infrahubtest.Options{TLS: true, Token: infrahubToken})
	s.putArtifact("64Mi")
	return os.WriteFile(filepath.Join(s.dir, "infrahub-ca.pem"), s.infrahub.CACertPEM(), 0o600)
}

func (s *sandbox) putArtifact(vmMemory string) {
	s.infrahub.Put("main", infrahubtest.Artifact{
		ID: artifactID, Name: artifactName, Content: webserverArtifact(vmMemory),
		TargetID: "18a6d5a2-7c4e-4b3e-8d4f-00000000a001", TargetLabel: "web-frontend", TargetKind: "InfraService",
		DefinitionID: "18a6d5a2-7c4e-4b3e-8d4f-00000000f001", DefinitionName: "webserver-manifests",
	})
}

func (s *sandbox) startOperator(ctx context.Context, _ logr.Logger) error {
	if _, err := s.kubectl(ctx, nil, "create", "namespace", operatorNamespace); err != nil {
		return err
	}
	if _, err := s.kubectl(ctx, nil, "-n", operatorNamespace, "create", "secret", "generic", "infrahub-webhook", "--from-literal=key="+webhookKey); err != nil {
		return err
	}
	webhookAddr, err := testfleet.FreeLocalAddress()
	if err != nil {
		return err
	}
	s.webhook = "http://" + webhookAddr + "/hooks/infrahub"
	logFile, err := os.Create(filepath.Join(s.dir, "vidra.log"))
	if err != nil {
		return err
	}
	s.operator = exec.Command(filepath.Join(s.root, "bin", "vidra"),
		"--kubeconfig="+filepath.Join(s.dir, "hub.kubeconfig"),
		"--cluster-secret-namespace="+operatorNamespace, "--infrahub-secret-namespace="+operatorNamespace,
		"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=0",
		"--webhook-bind-address="+webhookAddr, "--infrahub-webhook-secret=infrahub-webhook",
		"--cluster-probe-interval=5s", "--agent-timeout="+agentTimeout.String(),
		"--cluster-inventory=cluster-api", "--cluster-inventory-namespaces="+inventoryNamespace)
	s.operator.Stdout, s.operator.Stderr = logFile, logFile
	if err := s.operator.Start(); err != nil {
		return fmt.Errorf("start bin/vidra (run make build first): %w", err)
	}
	return nil
}

func (s *sandbox) enroll(ctx context.Context, _ logr.Logger) error {
	for i, m := range s.fleet.Members {
		ring := "prod"
		if i == 0 {
			ring = "canary"
		}
		labels := "demo=true,ring=" + ring + ",site=" + m.Name
		var out string
		var err error
		if isPullMember(i) {
			out, err = s.enrollPull(ctx, i, labels+",delivery=pull")
		} else {
			// The member's context and the hub's, from the one kubeconfig a user would have.
			out, err = s.plugin(ctx, "enroll", m.Name, "--context", m.Name, "--hub-context", "hub", "--labels", labels+",delivery=push")
		}
		if err != nil {
			return err
		}
		if _, err := io.WriteString(os.Stdout, indent(out)); err != nil {
			return err
		}
	}
	// The pull member is Engaged once its agent's first heartbeat reached the hub.
	return s.waitFor(ctx, 60*time.Second, "both members Engaged, one in mode Push and one in mode Pull", func() (bool, error) {
		out, err := s.kubectl(ctx, nil, "get", "vidraclusters", "-o", "jsonpath={range .items[*]}{.status.phase}/{.status.mode}{\" \"}{end}")
		return err == nil && strings.Count(out, "Engaged/Push") == 1 && strings.Count(out, "Engaged/Pull") == 1, nil
	})
}

func (s *sandbox) applySync(ctx context.Context, _ logr.Logger) error {
	if _, err := s.kubectl(ctx, nil, "-n", operatorNamespace, "create", "secret", "generic", "infrahub-token", "--from-literal=apiToken="+infrahubToken); err != nil {
		return err
	}
	if _, err := s.kubectl(ctx, nil, "-n", operatorNamespace, "create", "secret", "generic", "infrahub-ca", "--from-file=ca.crt="+filepath.Join(s.dir, "infrahub-ca.pem")); err != nil {
		return err
	}
	// An admin says where the credentials may be sent: nowhere else.
	if _, err := s.kubectl(ctx, nil, "-n", operatorNamespace, "annotate", "secret", "infrahub-token", "infrahub-ca",
		"vidra.infrahub.operators.com/allowed-urls="+s.infrahub.URL()); err != nil {
		return err
	}
	sync := fmt.Sprintf(`apiVersion: infrahub.operators.com/v1alpha1
kind: InfrahubSync
metadata:
  name: demo-webserver
  # Who asked, which the chart's admission policy records on a real hub: this sandbox hub
  # runs without the chart, so the demo writes its admin here, whose right to use the
  # credentials Secrets the operator then checks.
  annotations:
    vidra.infrahub.operators.com/requested-by: default
    vidra.infrahub.operators.com/requested-by-groups: system:masters
spec:
  interval: 30s
  source:
    infrahubAPIURL: %s
    targetBranch: main
    artefactName: %s
    credentialsSecretRef: {namespace: %s, name: infrahub-token}
    caSecretRef: {namespace: %s, name: infrahub-ca}
  destination:
    namespace: demo
    reconcileOnEvents: true
    clusterSelector:
      matchLabels: {demo: "true"}
  rollout:
    strategy: Progressive
    waves:
    - name: canary
      clusterSelector: {matchLabels: {ring: canary}}
      pauseAfter: 10s
    - name: prod
      clusterSelector: {matchLabels: {ring: prod}}
    maxUnavailable: 1
    healthTimeout: 2m
    onFailure: Rollback
`, s.infrahub.URL(), artifactName, operatorNamespace, operatorNamespace)
	if err := os.WriteFile(filepath.Join(s.dir, "infrahubsync.yaml"), []byte(sync), 0o600); err != nil {
		return err
	}
	_, err := s.kubectl(ctx, []byte(sync), "apply", "-f", "-")
	return err
}

func (s *sandbox) waitReady(ctx context.Context, _ logr.Logger) error {
	return s.waitFor(ctx, 120*time.Second, "the sync and both VidraResources Ready, VMs rolled out", func() (bool, error) {
		sync, err := s.kubectl(ctx, nil, "get", "infrahubsync", "demo-webserver", "-o", "jsonpath={.status.syncState}")
		if err != nil || sync != "Succeeded" {
			return false, nil
		}
		out, err := s.kubectl(ctx, nil, "get", "vidraresources", "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}/{.status.vmRollout.phase}{" "}{end}`)
		return err == nil && strings.Count(out, "True/Completed") == 2, nil
	})
}

// show prints what a user would look at.
func (s *sandbox) show(ctx context.Context, out io.Writer) {
	fmt.Fprintln(out, "\n==> kubectl get vidra (the hub)")
	fleet, _ := s.kubectl(ctx, nil, "get", "vidra")
	fmt.Fprint(out, fleet)
	fmt.Fprintln(out, "\n==> kubectl vidra clusters   (MODE: Push, the hub applies; Pull, the member's agent fetches and applies)")
	clusters, _ := s.plugin(ctx, "clusters", "--context", "hub")
	fmt.Fprint(out, clusters)
	for i, m := range s.fleet.Members {
		if isPullMember(i) {
			fmt.Fprintf(out, "    %s: the hub holds no credential for it; its agent reports every %s (log: %s)\n",
				m.Name, agentHeartbeat, s.agentLog(m.Name))
		}
	}
	for _, m := range s.fleet.Members {
		fmt.Fprintf(out, "\n==> kubectl --context %s get deployment,service,vm,vmi -n demo\n", m.Name)
		objects, _ := s.kubectl(ctx, nil, "--context", m.Name, "get", "deployment,service,vm,vmi", "-n", "demo")
		fmt.Fprint(out, objects)
	}
	s.showHelm(ctx, out)
	s.showGit(ctx, out)
}

// changeVM raises the VM's memory in Infrahub, which only a restart applies, and
// delivers Infrahub's signed webhook for it.
func (s *sandbox) changeVM(ctx context.Context, _ logr.Logger) error {
	s.putArtifact("128Mi")
	body := fmt.Appendf(nil, `{"data":{"node_id":%q,"artifact_definition_id":"18a6d5a2-7c4e-4b3e-8d4f-00000000f001","artifact_definition_name":"webserver-manifests","target_id":"18a6d5a2-7c4e-4b3e-8d4f-00000000a001","target_kind":"InfraService","checksum":"","checksum_previous":null,"storage_id":"","storage_id_previous":null},"id":"demo-event-1","branch":"main","account_id":"demo","occured_at":%q,"event":"infrahub.artifact.updated"}`,
		artifactID, time.Now().UTC().Format("2006-01-02 15:04:05.000000+00:00"))
	now := time.Now().Unix()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.webhook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(infrahub.HeaderWebhookID, "msg_demo1")
	req.Header.Set(infrahub.HeaderWebhookTimestamp, strconv.FormatInt(now, 10))
	req.Header.Set(infrahub.HeaderWebhookSignature, infrahub.SignWebhook([]byte(webhookKey), "msg_demo1", now, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("webhook answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// watchCanary waits until the change is healthy on the canary while prod waits through
// the canary's pauseAfter, and prints the rollout and prod's preview.
func (s *sandbox) watchCanary(ctx context.Context, _ logr.Logger) error {
	var status string
	err := s.waitFor(ctx, 120*time.Second, "revision 2 healthy on the canary, prod waiting", func() (bool, error) {
		var err error
		status, err = s.plugin(ctx, "rollout", "status", "demo-webserver", "--context", "hub")
		return err == nil && strings.Contains(status, "revision 2") && strings.Contains(status, "wave canary healthy"), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "    kubectl vidra rollout status demo-webserver\n%s", indent(status))
	diff, _ := s.plugin(ctx, "diff", "ihs/demo-webserver", "--context", "hub") // exits 1: there are changes
	fmt.Fprintf(os.Stdout, "    kubectl vidra diff ihs/demo-webserver   (what waits for prod)\n%s", indent(diff))
	return nil
}

// waitRollout waits until the VM was restarted once on each member and both rollouts
// are Completed.
func (s *sandbox) waitRollout(ctx context.Context, _ logr.Logger) error {
	vm := types.NamespacedName{Namespace: "demo", Name: "edge-router"}
	return s.waitFor(ctx, 120*time.Second, "edge-router restarted with its new memory on both members", func() (bool, error) {
		for _, sim := range s.simulators {
			if sim.Restarts(vm) != 1 {
				return false, nil
			}
		}
		out, err := s.kubectl(ctx, nil, "get", "vidraresources", "-o", `jsonpath={range .items[*]}{.status.vmRollout.phase}{" "}{end}`)
		if err != nil || strings.Count(out, "Completed") != 2 {
			return false, nil
		}
		phase, err := s.kubectl(ctx, nil, "get", "infrahubsync", "demo-webserver", "-o", "jsonpath={.status.rollout.revision}/{.status.rollout.phase}")
		return err == nil && phase == "2/Completed", nil
	})
}

func (s *sandbox) showRollout(ctx context.Context, out io.Writer) {
	fmt.Fprintln(out, "\n==> kubectl vidra rollout status demo-webserver")
	status, _ := s.plugin(ctx, "rollout", "status", "demo-webserver", "--context", "hub")
	fmt.Fprint(out, status)
	fmt.Fprintln(out, "\n==> kubectl vidra history ihs/demo-webserver")
	history, _ := s.plugin(ctx, "history", "ihs/demo-webserver", "--context", "hub")
	fmt.Fprint(out, history)
	s.showHelmHistory(ctx, out)
	fmt.Fprintln(out, "\n==> kubectl vidra get -o wide")
	wide, _ := s.plugin(ctx, "get", "-o", "wide", "--context", "hub")
	fmt.Fprint(out, wide)
	for i, m := range s.fleet.Members {
		how := "by replacing its VMI (no restart API served there)"
		if isPullMember(i) {
			how += ", by its agent"
		}
		if i == 0 {
			how = "through KubeVirt's restart API (subresources.kubevirt.io)"
		}
		fmt.Fprintf(out, "    %s: edge-router restarted once, %s\n", m.Name, how)
	}
}

// explore prints how to look around.
func (s *sandbox) explore(out io.Writer) {
	fmt.Fprintf(out, `
==> Explore
  export KUBECONFIG=%s        # contexts: hub, member-1, member-2
  kubectl get vidra                                   # the fleet, from the hub
  %s get -o wide      # VidraResources across the fleet (or: kubectl vidra, with bin/ on PATH)
  %s describe <name>  # one VidraResource's objects and events
  %s rollout status demo-webserver   # where the rollout stands, cluster by cluster
  %s rollback ihs/demo-webserver     # back to the previous revision (then: rollout resume)
  kubectl --context member-1 get vm,vmi -n demo       # what landed on a member
  kubectl get vidraclusters                           # MODE: member-2 is a pull member; INVENTORY: %s.%s came from Cluster API
  kubectl --context member-2 get vidraresources       # the agent's copies of its bundles
  kubectl get helmsyncs                               # the chart, the version delivered, Ready
  %s history helmsync/%s   # the chart versions delivered, cluster by cluster
  %s diff hs/%s            # what the next rendering would change
  kubectl --context member-1 get configmap,deployment -n %s   # the chart as rendered for member-1
  kubectl get gitsyncs                                # the repository, the commit delivered, Ready
  %s history gitsync/%s    # the commits delivered
  %s preview gitsync/%s --ref %s   # what the branch would change, before it merges
  kubectl get vidraresources -l vidra.infrahub.operators.com/gitsync=demo-app   # dependsOn: member-2 waited for its database
  Helm repository: %s (chart %s, packaged from hack/demo/chart)
  Git repository:  %s (the GitSync delivers its fleet/ directory)
  operator logs: %s
  agent logs:    %s
`, s.userKube, s.pluginPath(), s.pluginPath(), s.pluginPath(), s.pluginPath(), inventoryNamespace, inventoryCluster,
		s.pluginPath(), helmSyncName, s.pluginPath(), helmSyncName, helmNamespace, s.pluginPath(), gitSyncName, s.pluginPath(), gitSyncName, previewBranch, s.charts.url, s.charts.chart, s.gitURL,
		filepath.Join(s.dir, "vidra.log"), s.agentLog(s.fleet.Members[1].Name))
}

// close stops the agent, the operator, the simulators, Infrahub and the clusters: nothing
// is left running.
func (s *sandbox) close(out io.Writer) {
	fmt.Fprintln(out, "==> stopping the sandbox")
	_ = testfleet.Terminate(s.agent, 30*time.Second)
	_ = testfleet.Terminate(s.operator, 30*time.Second)
	if s.cancel != nil {
		s.cancel()
	}
	if s.infrahub != nil {
		s.infrahub.Close()
	}
	if s.charts != nil {
		s.charts.close()
	}
	if s.gitHost != nil {
		s.gitHost.close()
	}
	if s.fleet != nil {
		if err := s.fleet.Stop(); err != nil {
			fmt.Fprintln(out, "stop the clusters:", err)
		}
	}
	if s.inventoryMember != nil {
		if err := s.inventoryMember.Stop(); err != nil {
			fmt.Fprintln(out, "stop "+s.inventoryMember.Name+":", err)
		}
	}
}

func (s *sandbox) kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	return s.runTool(ctx, filepath.Join(s.root, "bin", "k8s", "kubectl"), stdin, append([]string{"--kubeconfig=" + s.userKube}, args...)...)
}

func (s *sandbox) pluginPath() string { return filepath.Join(s.root, "bin", "kubectl-vidra") }

func (s *sandbox) plugin(ctx context.Context, args ...string) (string, error) {
	return s.runTool(ctx, s.pluginPath(), nil, append(args, "--kubeconfig="+s.userKube)...)
}

func (s *sandbox) runTool(ctx context.Context, path string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", filepath.Base(path), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// waitFor waits for cond, pointing at the operator's log when it does not come.
func (s *sandbox) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	if err := testfleet.WaitFor(ctx, 250*time.Millisecond, timeout, what, cond); err != nil {
		return fmt.Errorf("%w (operator log: %s; agent log: %s)", err, filepath.Join(s.dir, "vidra.log"), s.agentLog(s.fleet.Members[1].Name))
	}
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
