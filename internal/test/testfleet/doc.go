// Package testfleet starts a fleet of real Kubernetes control planes for tests, benchmarks
// and the demo: a hub with Vidra's CRDs installed plus N member clusters, each a
// kube-apiserver and etcd built from source by hack/ (see `make control-plane`). It hands
// back clients, rest.Configs and kubeconfig bytes per cluster and can pause a member's API
// server to make that cluster unreachable.
package testfleet
