package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vidra-operator/vidra/e2e/fleetenv"
	"github.com/vidra-operator/vidra/internal/test/testfleet"
)

// upgradeUIDs names every VidraResource of the upgrade's GitSync on the hub and every
// object it delivered, with its UID.
func upgradeUIDs(ctx context.Context, t *testing.T) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	out := kubectl(ctx, t, nil, "get", "vidraresources", "-l", "vidra.infrahub.operators.com/gitsync=upgrade",
		"-o", `go-template={{range .items}}{{.metadata.name}} {{.metadata.uid}}{{"\n"}}{{end}}`)
	for line := range strings.Lines(out) {
		name, uid, _ := strings.Cut(strings.TrimSpace(line), " ")
		uids["hub/VidraResource/"+name] = types.UID(uid)
	}
	for i, m := range fleetenv.Fleet(ctx).Members[:2] {
		var list corev1.ConfigMapList
		if err := m.Client.List(ctx, &list, client.InNamespace(upgradeNamespace)); err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			uids[fmt.Sprintf("member-%d/ConfigMap/%s", i, cm.Name)] = cm.UID
		}
	}
	if len(uids) != 2+2*3 {
		t.Fatalf("the upgrade's objects are %v, want 2 VidraResources and 3 ConfigMaps on each member", uids)
	}
	return uids
}

// writes counts what the API servers of the members report of each delivered object.
type writes struct{ added, modified, deleted int }

func (w writes) String() string { return fmt.Sprintf("+%d ~%d -%d", w.added, w.modified, w.deleted) }

// writeCounter watches the delivered objects on both members from the moment it starts.
type writeCounter struct {
	cancel   context.CancelFunc
	done     sync.WaitGroup
	mu       sync.Mutex
	counts   map[string]writes
	lost     []string // members whose watch ended before stop: their counts are short
	stopping bool
}

func countWrites(ctx context.Context, t *testing.T) *writeCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	w := &writeCounter{cancel: cancel, counts: map[string]writes{}}
	for i, m := range fleetenv.Fleet(ctx).Members[:2] {
		cs, err := kubernetes.NewForConfig(m.Config)
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.CoreV1().ConfigMaps(upgradeNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			w.counts[fmt.Sprintf("member-%d/ConfigMap/%s", i, cm.Name)] = writes{}
		}
		watcher, err := cs.CoreV1().ConfigMaps(upgradeNamespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		w.done.Add(1)
		go w.record(fmt.Sprintf("member-%d", i), watcher)
	}
	return w
}

func (w *writeCounter) record(member string, watcher watch.Interface) {
	defer w.done.Done()
	defer watcher.Stop()
	for ev := range watcher.ResultChan() {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		key := member + "/ConfigMap/" + cm.Name
		w.mu.Lock()
		n := w.counts[key]
		switch ev.Type {
		case watch.Added:
			n.added++
		case watch.Modified:
			n.modified++
		case watch.Deleted:
			n.deleted++
		}
		w.counts[key] = n
		w.mu.Unlock()
	}
	w.mu.Lock()
	if !w.stopping {
		w.lost = append(w.lost, member)
	}
	w.mu.Unlock()
}

// stop ends the watches and returns the counts, or an error if a watch ended early.
func (w *writeCounter) stop() (map[string]writes, error) {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.cancel()
	w.done.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.lost) > 0 {
		return nil, fmt.Errorf("the watch of %v ended before the upgrade was over", w.lost)
	}
	return w.counts, nil
}

// waitReconciled waits until the new operator has reconciled both VidraResources and the
// new agent its copy: only then would a write the upgrade makes have been made.
func waitReconciled(ctx context.Context, t *testing.T, operator, agent *fleetenv.Operator) {
	t.Helper()
	for _, w := range []struct {
		what string
		op   *fleetenv.Operator
		want int
	}{{"the operator", operator, 2}, {"the agent", agent, 1}} {
		n := 0
		defer func() {
			if t.Failed() {
				t.Logf("%s reconciled %d VidraResources; its log:\n%s", w.what, n, w.op.Logs())
			}
		}()
		testfleet.Poll(t, 100*time.Millisecond, 90*time.Second, w.what+" reconciled its VidraResources", func() (bool, error) {
			var err error
			n, err = reconciled(ctx, w.op)
			return err == nil && n >= w.want, err
		})
	}
}

// reconciled sums the operator's reconciles of VidraResources that did not fail.
func reconciled(ctx context.Context, op *fleetenv.Operator) (int, error) {
	code, body, err := fleetenv.Get(ctx, op.MetricsURL+"/metrics")
	if err != nil || code != 200 {
		return 0, fmt.Errorf("metrics: %d %w", code, err)
	}
	total := 0
	scanner := bufio.NewScanner(strings.NewReader(body))
	for scanner.Scan() {
		line := scanner.Text()
		// Every result but an error: a VidraResource in place is requeued for its resync.
		if !strings.HasPrefix(line, "controller_runtime_reconcile_total{") ||
			!strings.Contains(line, `controller="vidraresource"`) || strings.Contains(line, `result="error"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, err
		}
		total += int(v)
	}
	return total, scanner.Err()
}

// cleanUpUpgrade removes the sync, its VidraResources (while the operator runs to release
// their objects), both enrollments and the app's namespaces.
func cleanUpUpgrade(ctx context.Context, t *testing.T, fleet *testfleet.Fleet) {
	t.Helper()
	_, _ = fleet.Hub.Kubectl(ctx, nil, "delete", "gitsync", "upgrade", "--ignore-not-found")
	_, _ = fleet.Hub.Kubectl(ctx, nil, "delete", "vidraresources", "-l", "vidra.infrahub.operators.com/gitsync=upgrade", "--timeout=60s")
	path, err := fleet.WriteUserKubeconfig(t.TempDir())
	if err == nil {
		binary, _ := fleetenv.PluginBinary(ctx)
		out, err := exec.CommandContext(ctx, binary, "unenroll", upgradePull, "--context", fleet.Members[1].Name, "--hub-context", "hub",
			"--agent-namespace", upgradeSystem, "--service-account", upgradeSystem+"/vidra",
			"--hub-kubeconfig="+path, "--kubeconfig="+path).CombinedOutput()
		if err != nil {
			t.Logf("kubectl vidra unenroll %s: %v\n%s", upgradePull, err, out)
		}
	}
	_, _ = fleet.Hub.Kubectl(ctx, nil, "-n", operatorNamespace, "delete", "secret", upgradePush, "--ignore-not-found")
	for _, m := range fleet.Members[:2] {
		_, _ = m.Kubectl(ctx, nil, "delete", "namespace", upgradeNamespace, "--wait=false", "--ignore-not-found")
	}
}
