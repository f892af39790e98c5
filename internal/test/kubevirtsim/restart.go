package kubevirtsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// subresourcesGroupVersion is KubeVirt's aggregated API of VM actions.
const subresourcesGroupVersion = "subresources.kubevirt.io/v1"

// RestartHandler serves the VM restart action of subresources.kubevirt.io/v1 as
// virt-api does (PUT .../namespaces/{ns}/virtualmachines/{name}/restart: 202 and the VMI
// deleted, so the VM's controller starts a new one; 404 for an unknown VM; 409 when the
// VM is not running), and the discovery documents the aggregator asks for.
func (s *Simulator) RestartHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/"+subresourcesGroupVersion, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: subresourcesGroupVersion,
			APIResources: []metav1.APIResource{{Name: "virtualmachines/restart", Namespaced: true, Kind: "VirtualMachine", Verbs: []string{"update"}}},
		})
	})
	mux.HandleFunc("PUT /apis/"+subresourcesGroupVersion+"/namespaces/{namespace}/virtualmachines/{name}/restart", func(w http.ResponseWriter, r *http.Request) {
		key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
		code, msg := s.restart(r.Context(), key)
		if code != http.StatusAccepted {
			writeJSON(w, code, metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Message: msg, Code: int32(code), Reason: reasonFor(code), //nolint:gosec // HTTP codes fit
			})
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

func reasonFor(code int) metav1.StatusReason {
	switch code {
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	default:
		return metav1.StatusReasonInternalError
	}
}

func (s *Simulator) restart(ctx context.Context, key types.NamespacedName) (int, string) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.client.Get(ctx, key, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return http.StatusNotFound, fmt.Sprintf("virtualmachine.kubevirt.io %q not found", key.Name)
		}
		return http.StatusInternalServerError, err.Error()
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := s.client.Get(ctx, key, vmi)
	strategy, _ := vm.RunStrategy()
	switch {
	case apierrors.IsNotFound(err) || strategy == kubevirtv1.RunStrategyHalted:
		return http.StatusConflict, "VM is not running"
	case err != nil:
		return http.StatusInternalServerError, err.Error()
	case !vmi.DeletionTimestamp.IsZero():
		return http.StatusConflict, "VM is already restarting"
	}
	s.record(Entry{VM: key, Action: ActionRestartAPI, VMI: vmi.UID})
	if err := s.deleteVMI(ctx, key, vmi); err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	return http.StatusAccepted, ""
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ServeRestartAPI serves RestartHandler over TLS on ip (a free port) until ctx ends and
// registers it with the cluster's aggregator as subresources.kubevirt.io/v1: a Service
// without selector in namespace, its endpoints pointing at ip, and an APIService. The
// aggregator refuses loopback endpoints, so ip must be an address of this host that is
// not loopback (see RoutableIP).
func (s *Simulator) ServeRestartAPI(ctx context.Context, ip net.IP, namespace string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return fmt.Errorf("listen on %s: %w", ip, err)
	}
	srv := httptest.NewUnstartedServer(s.RestartHandler())
	srv.Listener = ln
	srv.StartTLS()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	return s.registerAPIService(ctx, ip, port, namespace)
}

func (s *Simulator) registerAPIService(ctx context.Context, ip net.IP, port int, namespace string) error {
	const name = "virt-api"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := s.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}}, //nolint:gosec // a port
	}
	//nolint:staticcheck // the aggregator still reads Endpoints on some paths; both are written
	endpoints := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck // see above
			Addresses: []corev1.EndpointAddress{{IP: ip.String()}},                                //nolint:staticcheck // see above
			Ports:     []corev1.EndpointPort{{Name: "https", Port: int32(port), Protocol: "TCP"}}, //nolint:gosec,staticcheck // see above
		}},
	}
	portName, portNumber, protocol := "https", int32(port), corev1.ProtocolTCP //nolint:gosec // a port
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &portNumber, Protocol: &protocol}},
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": "v1.subresources.kubevirt.io"},
		"spec": map[string]any{
			"service":               map[string]any{"namespace": namespace, "name": name, "port": int64(443)},
			"group":                 "subresources.kubevirt.io",
			"version":               "v1",
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(1000),
			"versionPriority":       int64(15),
		},
	}}
	for _, obj := range []client.Object{svc, endpoints, slice, apiService} {
		if err := s.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("register the restart API: create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// RoutableIP returns an IPv4 address of this host that is neither loopback nor
// link-local, which the API server accepts in endpoints. A host with none gets one added
// to its loopback interface (outside 127.0.0.0/8, so endpoints accept it), which needs
// root.
func RoutableIP() (net.IP, error) {
	if ip, err := hostIP(); err == nil {
		return ip, nil
	}
	const addr = "198.18.0.1" // 198.18.0.0/15 is reserved for benchmarking networks
	out, err := exec.Command("ip", "addr", "add", addr+"/32", "dev", "lo").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "File exists") {
		return nil, fmt.Errorf("this host has no IPv4 address but loopback and link-local, and adding %s to lo failed: %w: %s", addr, err, out)
	}
	return net.ParseIP(addr).To4(), nil
}

func hostIP() (net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip := ipnet.IP.To4()
		if ip != nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsUnspecified() {
			return ip, nil
		}
	}
	return nil, errors.New("this host has no IPv4 address other than loopback and link-local: the aggregator cannot reach a restart API here")
}
