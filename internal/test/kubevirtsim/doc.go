// Package kubevirtsim plays KubeVirt's part on a member cluster where KubeVirt itself
// cannot run: the VirtualMachine and VirtualMachineInstance CRDs (generated from
// kubevirt.io/api, in testdata/crds), a virt-controller simulator, and the restart
// subresource of subresources.kubevirt.io.
package kubevirtsim
